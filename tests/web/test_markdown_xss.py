"""Hostile Markdown in an answer renders inert: no script runs, no request leaves the page."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.web.conftest import Site, shot

pytestmark = pytest.mark.slow

HOSTILE = (
    "Look <img src=x onerror=alert(1)> here. <script>alert(2)</script> "
    "[click me](javascript:alert(3)) and <javascript:alert(4)> "
    "![cat](https://images.example.com/cat.png) and ![dot](data:image/png;base64,iVBORw0KGgo=) "
    '<a href="javascript:alert(5)">raw link</a> <iframe src="https://evil.example.com/"></iframe> '
    "[fine](https://example.com/page) done"
)


def test_hostile_answer_renders_inert(browser: Any, site: Site) -> None:
    from playwright.sync_api import expect

    context = browser.new_context()
    page = context.new_page()
    dialogs: list[str] = []
    requests: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    context.on("request", lambda r: requests.append(r.url))
    page.goto(site.url + "/")
    site.model.say.append(HOSTILE)
    box = page.get_by_label("Message", exact=True)
    box.fill("Tell me something odd")
    box.press("Enter")
    answer = page.locator("article.answer").last
    expect(answer).to_contain_text("done", timeout=30_000)
    expect(answer.get_by_role("button", name="Good answer")).to_be_visible()
    page.reload()  # the stored answer renders the same way
    answer = page.locator("article.answer").last
    expect(answer).to_contain_text("done")

    assert answer.locator("img, script, iframe, object, embed").count() == 0
    hrefs = answer.locator("a").evaluate_all("els => els.map(e => e.getAttribute('href'))")
    assert hrefs == ["https://images.example.com/cat.png", "https://example.com/page"], hrefs
    assert all(
        a == "noopener noreferrer nofollow"
        for a in answer.locator("a").evaluate_all("els => els.map(e => e.rel)")
    )
    expect(answer).to_contain_text("[image: cat]")
    expect(answer).to_contain_text("click me")
    assert dialogs == []
    origin = urlsplit(site.url).netloc
    assert [u for u in requests if urlsplit(u).netloc not in (origin, "")] == []
    assert not [u for u in requests if urlsplit(u).path in ("/x", "/cat.png")]
    shot(page, "markdown-inert")
    context.close()
