"""The message box keeps the keyboard focus when a new chat's first message creates its
conversation and the page moves from ``/`` to ``/c/<id>`` (the same page, not a new one)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.conftest import Site
from tests.web.test_walkthrough import QUESTION, ask

pytestmark = pytest.mark.slow


def test_the_message_box_keeps_focus_when_a_new_chat_gets_its_address(
    browser: Any, site: Site
) -> None:
    from playwright.sync_api import expect

    page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
    page.goto(site.url + "/")
    box = page.get_by_label("Message", exact=True)
    box.evaluate("element => { window.messageBox = element; }")
    ask(page, QUESTION)
    expect(page).to_have_url(re.compile(r"/c/[0-9a-f]{32}$"), timeout=30_000)
    answer = page.locator("article.answer").last
    expect(answer.get_by_role("button", name="Good answer")).to_be_visible(timeout=30_000)
    expect(page.locator(".turn.live")).to_have_count(0, timeout=30_000)  # the stored answer
    assert page.evaluate("() => window.messageBox.isConnected"), "the message box was replaced"
    expect(box).to_be_focused()
    page.keyboard.type("and how many roll over?")  # a follow-up straight away
    expect(box).to_have_value("and how many roll over?")
    # another chat is a page of its own: "New chat" shows an empty box and no answer
    sidebar = page.get_by_role("navigation", name="Conversations")
    sidebar.get_by_role("link", name="New chat").click()
    expect(page).to_have_url(site.url + "/")
    expect(page.get_by_label("Message", exact=True)).to_have_value("")
    expect(page.locator("article.answer")).to_have_count(0)
    # and back in the first conversation, its answer and the follow-up's draft are there
    page.go_back()
    expect(page).to_have_url(re.compile(r"/c/[0-9a-f]{32}$"))
    expect(page.locator("article.answer")).to_have_count(1)
    expect(page.get_by_label("Message", exact=True)).to_have_value("and how many roll over?")
    page.context.close()
