"""A document uploaded with group `hr` in the admin page is never shown, cited or readable for
a signed-in user outside `hr` — in the browser.

The server runs in token mode, the way a shared install does; each browser context signs in
as one user by opening a one-time sign-in link (``search2o users login-link``), so the app
itself holds the session cookie and sends no token.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.api.test_web_endpoints import HR_DOC
from tests.conftest import MemoEmbedder
from tests.web.conftest import Site, add_people, open_site, shot, sign_in_with_link

pytestmark = pytest.mark.slow

QUESTION = "What is the salary band of a staff engineer?"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, embedder: MemoEmbedder) -> Iterator[Site]:
    yield from open_site(tmp_path_factory.mktemp("shared"), embedder, auth_mode="token")


def as_user(browser: Any, site: Site, email: str) -> Any:
    """A new browser context signed in as ``email`` through a sign-in link."""
    page = browser.new_context().new_page()
    sign_in_with_link(page, site, email)
    return page


def ask(page: Any, text: str) -> Any:
    from playwright.sync_api import expect

    box = page.get_by_label("Message", exact=True)
    box.fill(text)
    box.press("Enter")
    answer = page.locator("article.answer").last
    expect(answer.get_by_role("button", name="Good answer")).to_be_visible(timeout=30_000)
    return answer


def test_hr_upload_is_invisible_outside_hr(browser: Any, shared: Site) -> None:
    from playwright.sync_api import expect

    people = [
        ("ann@example.com", (), True),
        ("carol@example.com", ("hr",), False),
        ("bob@example.com", ("eng",), False),
    ]
    add_people(shared.runtime, people)

    page = as_user(browser, shared, "ann@example.com")
    page.goto(shared.url + "/admin/documents")
    page.get_by_label("Files (Markdown, text, HTML, PDF, DOCX)").set_input_files(
        {"name": "bands.md", "mimeType": "text/markdown", "buffer": HR_DOC}
    )
    page.get_by_label(re.compile("^Groups that may read them")).fill("hr")
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("list", name="Upload results")).to_contain_text("added")
    row = page.get_by_role("row", name=re.compile("Staff salary bands"))
    expect(row).to_contain_text("group:hr")
    shot(page, "access-admin-upload")
    page.context.close()

    # In hr: the answer cites the document.
    page = as_user(browser, shared, "carol@example.com")
    page.goto(shared.url + "/")
    answer = ask(page, QUESTION)
    expect(answer).to_contain_text("zorkmids")
    expect(answer.get_by_role("button", name=re.compile("Staff salary bands"))).to_have_count(1)
    page.context.close()

    # Outside hr: not in the answer, not cited, not listed; no admin pages offered or served.
    page = as_user(browser, shared, "bob@example.com")
    page.goto(shared.url + "/")
    expect(page.get_by_role("link", name="Memories")).to_be_visible()
    expect(page.get_by_role("link", name="Admin")).to_have_count(0)
    answer = ask(page, QUESTION)
    expect(answer).not_to_contain_text("zorkmids")
    expect(page.get_by_role("button", name=re.compile("Staff salary bands"))).to_have_count(0)
    assert "Staff salary bands" not in page.content()
    shot(page, "access-outsider-answer")
    page.goto(shared.url + "/admin/documents")
    expect(page.get_by_role("heading", name="Not available")).to_be_visible()
    page.context.close()
