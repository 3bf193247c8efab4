"""A citation chip's hover card closes with Escape, without moving the pointer, and the keyboard
lands on the chip (WCAG 2.1, 1.4.13 "Content on Hover or Focus"); a chip keeps its focus and
card when the stored answer replaces the streamed one."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.conftest import Site
from tests.web.test_walkthrough import QUESTION, ask

pytestmark = pytest.mark.slow


def test_escape_closes_the_hover_card_and_focuses_the_chip(browser: Any, site: Site) -> None:
    from playwright.sync_api import expect

    page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
    page.goto(site.url + "/")
    ask(page, QUESTION)
    answer = page.locator("article.answer").last
    expect(answer).to_contain_text("20", timeout=30_000)
    # the stored answer (rated, so no longer streamed) replaces the streamed one: hover that
    expect(answer.get_by_role("button", name="Good answer")).to_be_visible(timeout=30_000)
    chip = answer.locator(".cite-chip").first
    card = page.get_by_role("tooltip")
    chip.hover()  # the pointer opens it; the keyboard is still in the message box
    expect(card).to_be_visible()
    page.keyboard.press("Escape")
    expect(card).to_be_hidden()
    expect(chip).to_be_focused()
    expect(page.get_by_role("dialog")).to_have_count(0)  # Escape opened nothing else
    # it stays closed while the pointer rests there; leaving and coming back opens it again
    page.mouse.move(0, 0)
    chip.blur()
    chip.focus()
    expect(card).to_be_visible()
    page.keyboard.press("Escape")
    expect(card).to_be_hidden()
    expect(chip).to_be_focused()
    page.context.close()


def test_the_stored_answer_keeps_the_focused_chip(browser: Any, site: Site) -> None:
    """When the stream ends the Web App reads the stored answer and shows it instead of the
    streamed one; a reader on a chip at that moment keeps the very element, its focus and card."""
    from playwright.sync_api import expect

    page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
    held: list[Any] = []
    holding = [True]

    def hold(route: Any) -> None:  # the stored conversation waits until the chip has focus
        if holding[0]:
            held.append(route)
        else:
            route.continue_()

    page.route(re.compile(r"/v1/conversations/[0-9a-f]{32}$"), hold)
    page.goto(site.url + "/")
    ask(page, QUESTION)
    streamed = page.locator(".turn.live article.answer")
    expect(streamed.get_by_role("button", name="Good answer")).to_be_visible(timeout=30_000)
    chip = streamed.locator(".cite-chip").first
    chip.focus()
    card = page.get_by_role("tooltip")
    expect(card).to_be_visible()
    chip.evaluate("element => { window.focusedChip = element; }")
    holding[0] = False
    assert held, "the stored conversation was never asked for"
    for route in held:
        route.continue_()
    expect(page.locator(".turn.live")).to_have_count(0, timeout=30_000)  # the stored one is shown
    expect(page.locator("article.answer")).to_have_count(1)
    assert page.evaluate("() => window.focusedChip.isConnected"), "the chip was replaced"
    expect(page.locator("article.answer").locator(".cite-chip").first).to_be_focused()
    expect(card).to_be_visible()
    page.context.close()
