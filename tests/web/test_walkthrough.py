"""A new user's first session in a real browser: ask, follow up, reload mid-answer, rate,
rename, pin and delete — with nothing fetched from another origin."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.web.conftest import Site, shot

pytestmark = pytest.mark.slow

QUESTION = "How many vacation days do we get each year?"
FOLLOW_UP = "and how many can roll over?"


def ask(page: Any, text: str) -> None:
    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")


def test_new_user_walkthrough(browser: Any, site: Site) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 860})
    requests: list[str] = []
    resumed: list[dict[str, str]] = []
    context.on("request", lambda r: requests.append(r.url))
    context.on("request", lambda r: resumed.append(r.headers) if "/events" in r.url else None)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(site.url + "/")
    expect(page.get_by_role("heading", name="What would you like to know?")).to_be_visible()

    ask(page, QUESTION)
    answer = page.locator("article.answer").last
    expect(answer).to_contain_text("20", timeout=30_000)
    # the stored answer (rated, so no longer streamed) replaces the streamed one: hover that
    expect(answer.get_by_role("button", name="Good answer")).to_be_visible(timeout=30_000)
    chip = answer.locator(".cite-chip").first
    expect(chip).to_be_visible()
    chip.hover()
    card = page.get_by_role("tooltip")
    expect(card).to_contain_text("Benefits")
    # the cited passage's snippet, fetched on hover (a loaded host may take longer than 5 s)
    expect(card).to_contain_text("vacation", timeout=20_000)
    page.mouse.move(0, 0)  # the pointer leaves the chip and its card: the card closes
    expect(card).to_be_hidden()
    answer.get_by_text(re.compile(r"^Sources \(\d\)$")).click()  # one per section
    expect(answer.locator(".sources")).to_contain_text("benefits-and-perks.md")
    chip.click()
    passage = page.get_by_role("dialog")
    expect(passage.locator("blockquote")).to_contain_text("20 days of vacation")
    page.keyboard.press("Escape")
    expect(passage).to_be_hidden()
    assert re.search(r"/c/[0-9a-f]{32}$", page.url), page.url
    expect(answer.get_by_role("button", name="Good answer")).to_be_visible()
    shot(page, "walkthrough-answer")

    # The follow-up, reloaded mid-answer: the page resumes the run from the last event it saw.
    site.model.gate.clear()
    site.model.hold_after = 3
    ask(page, FOLLOW_UP)
    live = page.locator(".live article.answer")
    expect(live).not_to_be_empty(timeout=30_000)
    assert site.model.held.wait(30)
    page.reload()
    expect(page.locator(".live")).to_be_visible()
    site.model.release()
    answers = page.locator("article.answer")
    expect(answers.last).to_contain_text("27", timeout=30_000)
    assert resumed and all(h.get("x-search2o-client") == "web" for h in resumed)
    assert any(int(h.get("last-event-id", "0")) > 0 for h in resumed), resumed
    expect(answers).to_have_count(2)

    # Rate the answer; the rating is stored.
    answers.last.get_by_role("button", name="Good answer").click()
    expect(answers.last.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    page.reload()
    good = page.locator("article.answer").last.get_by_role("button", name="Good answer")
    expect(good).to_have_attribute("aria-pressed", "true")

    # Rename, pin and delete it from the sidebar.
    sidebar = page.get_by_role("navigation", name="Conversations")
    sidebar.get_by_role("button", name=re.compile("^Rename")).first.click()
    title = sidebar.get_by_label("New title")
    title.fill("Vacation days")
    title.press("Enter")
    expect(sidebar.get_by_role("link", name=re.compile("Vacation days"))).to_be_visible()
    sidebar.get_by_role("button", name="Pin “Vacation days”").click()
    expect(sidebar.locator(".group-header", has_text="Pinned")).to_be_visible()
    shot(page, "walkthrough-sidebar")
    sidebar.get_by_role("button", name="Delete “Vacation days”").click()
    expect(page.get_by_role("status").filter(has_text="Deleted")).to_be_visible()
    expect(sidebar.get_by_role("link", name=re.compile("Vacation days"))).to_have_count(0)

    origin = urlsplit(site.url)
    foreign = [u for u in requests if urlsplit(u).netloc not in (origin.netloc, "")]
    assert foreign == []
    assert errors == []
    context.close()
