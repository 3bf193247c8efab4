"""Feedback in a real browser: a thumbs-up sends no form; a thumbs-down opens a small form
(reasons, comment, Send / Skip) used from the keyboard alone, and the admin feedback page
lists the answer with its reasons and comment, linked to its retrieval trace."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import Site, shot
from tests.web.test_pages import AXE, serious
from tests.web.test_walkthrough import QUESTION, ask

pytestmark = pytest.mark.slow

COMMENT = "The policy changed in January."


def test_thumbs_down_asks_why_and_admins_see_it(browser: Any, site: Site) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.add_init_script(path=str(AXE))
    page = context.new_page()
    page.goto(site.url + "/")
    ask(page, QUESTION)
    answer = page.locator("article.answer").last
    expect(answer).to_contain_text("20", timeout=30_000)
    form = answer.get_by_role("form", name="What was wrong with this answer?")

    answer.get_by_role("button", name="Good answer").click()
    expect(answer.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(form).to_have_count(0)  # a thumbs-up sends no form

    answer.get_by_role("button", name="Bad answer").click()
    expect(form).to_be_visible()
    expect(answer.get_by_role("button", name="Bad answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    assert serious(page) == []
    # the keyboard is in the form: Skip with Escape keeps the bare rating
    expect(form.get_by_role("checkbox", name="Wrong source")).to_be_focused()
    page.keyboard.press("Escape")
    expect(form).to_have_count(0)

    # pressed again it clears; once more it asks again, answered from the keyboard alone
    answer.get_by_role("button", name="Bad answer").click()
    expect(answer.get_by_role("button", name="Bad answer")).to_have_attribute(
        "aria-pressed", "false"
    )
    answer.get_by_role("button", name="Bad answer").click()
    expect(form.get_by_role("checkbox", name="Wrong source")).to_be_focused()
    page.keyboard.press("Tab")  # Missing information
    page.keyboard.press("Tab")  # Outdated
    page.keyboard.press("Space")
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # A citation does not support the claim
    page.keyboard.press("Tab")
    expect(form.get_by_label("Comment (optional)")).to_be_focused()
    page.keyboard.type(COMMENT)
    shot(page, "feedback-form")
    page.keyboard.press("Tab")
    expect(form.get_by_role("button", name="Send")).to_be_focused()
    page.keyboard.press("Enter")
    expect(answer.get_by_role("status").filter(has_text="Thanks")).to_be_visible()
    expect(form).to_have_count(0)

    page.goto(site.url + "/admin/feedback")
    row = page.get_by_role("row").filter(has_text=COMMENT)
    expect(row).to_contain_text("Outdated, A citation does not support the claim")
    expect(row).to_contain_text("thumbs down")
    assert serious(page) == []
    shot(page, "admin-feedback-reasons")
    row.get_by_role("button", name="Retrieval trace").click()
    expect(page.get_by_role("dialog")).to_contain_text("vacation")
    context.close()
