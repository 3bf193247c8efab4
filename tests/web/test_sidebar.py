"""The sidebar with 10,000 conversations of one user: paged by cursor, virtualised, searchable."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import MemoEmbedder
from tests.web.conftest import Site, open_site, shot
from tests.web.seed import seed_conversations, title_of

pytestmark = pytest.mark.slow

COUNT = 10_000


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory, embedder: MemoEmbedder) -> Iterator[Site]:
    for site in open_site(tmp_path_factory.mktemp("crowded"), embedder):
        seed_conversations(site.runtime, site.runtime.local_principal(), COUNT)
        yield site


def test_ten_thousand_conversations(browser: Any, crowded: Site) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    pages: list[str] = []
    page.on("request", lambda r: pages.append(r.url) if "/v1/me/conversations" in r.url else None)
    started = time.perf_counter()
    page.goto(crowded.url + "/")
    sidebar = page.get_by_role("navigation", name="Conversations")
    expect(sidebar.get_by_role("link", name=re.compile(re.escape(title_of(0))))).to_be_visible()
    first_paint = time.perf_counter() - started
    assert first_paint < 10, first_paint
    # Pinned first, then the date groups, in order.
    headers = sidebar.locator(".group-header").all_inner_texts()
    assert headers[:2] == ["Pinned", "Today"], headers
    # Virtualised: only the rows in view (and a few beyond) exist in the page.
    rows = sidebar.locator(".conversation-list li")
    assert rows.count() < 60, rows.count()
    # Scrolling to the end of what is loaded fetches the next page by cursor.
    listing = page.get_by_test_id("conversation-list")
    height = listing.evaluate("el => (el.scrollTop = el.scrollHeight)")
    page.wait_for_function(
        "([el, h]) => el.scrollHeight > h", arg=[listing.element_handle(), height]
    )
    assert any("cursor=" in url for url in pages), pages
    # The first of the second page (0-49 are the first) is now a row just below the view.
    deeper = sidebar.get_by_role("link", name=re.compile(rf"{re.escape(title_of(50))}\b"))
    expect(deeper).to_be_attached()
    assert sidebar.locator(".conversation-list li").count() < 80
    # Older groups appear further down, page after page. From the top, the list is scrolled a
    # quarter of its height per frame until the header is rendered: a virtualised header exists
    # only while it is near the view, and where it falls depends on the time of day the test
    # runs (just after midnight "Today" holds a handful, and the header is above the end of the
    # first page, which the list was scrolled past above).
    older = sidebar.locator(".group-header", has_text="Previous 7 days")
    listing.evaluate("el => (el.scrollTop = 0)")
    page.wait_for_function(
        """el => {
            const hit = [...el.querySelectorAll('.group-header')]
                .some(header => header.textContent.includes('Previous 7 days'));
            if (!hit) el.scrollTop += el.clientHeight / 4;
            return hit;
        }""",
        arg=listing.element_handle(),
        polling="raf",
        timeout=60_000,
    )
    expect(older).to_be_attached()
    # A title search over all 10,000 finds the one deep in the list.
    target = title_of(9_876)
    page.get_by_label("Search conversations").fill("question 9876 ")
    expect(sidebar.get_by_role("link", name=re.compile(re.escape(target)))).to_be_visible(
        timeout=30_000
    )
    expect(sidebar.locator(".conversation-list a")).to_have_count(1)
    shot(page, "sidebar-10000-search")
    context.close()
