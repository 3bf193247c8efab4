"""The admin Users page in a real browser: add a user, edit one inline, remove one after a
confirm — and the change reaches the other user's open browser at once: a demoted admin loses
the admin pages, a removed user is signed out. Token mode, each user signed in by a link."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import MemoEmbedder
from tests.web.conftest import Site, add_people, open_site, shot, sign_in_with_link
from tests.web.test_pages import AXE, serious

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, embedder: MemoEmbedder) -> Iterator[Site]:
    yield from open_site(tmp_path_factory.mktemp("users"), embedder, auth_mode="token")


def test_admins_edit_and_remove_users_and_it_applies_at_once(browser: Any, shared: Site) -> None:
    from playwright.sync_api import expect

    people = [("ann@example.com", (), True), ("gil@example.com", (), True)]
    add_people(shared.runtime, [*people, ("cy@example.com", (), False)])
    ann_context = browser.new_context(viewport={"width": 1280, "height": 860})
    ann_context.add_init_script(path=str(AXE))
    ann = ann_context.new_page()
    sign_in_with_link(ann, shared, "ann@example.com")
    gil = browser.new_context().new_page()
    sign_in_with_link(gil, shared, "gil@example.com")
    cy = browser.new_context().new_page()
    sign_in_with_link(cy, shared, "cy@example.com")
    gil.get_by_role("link", name="Admin").click()
    expect(gil.get_by_role("heading", name="Administration")).to_be_visible()

    ann.goto(shared.url + "/admin/users")
    users = ann.get_by_role("table", name="Users")
    expect(users).to_contain_text("gil@example.com")
    # add a user
    form = ann.get_by_role("form", name="Add a user")
    form.get_by_label("Email").fill("dee@example.com")
    form.get_by_label("Groups").fill("hr, eng")
    form.get_by_role("button", name="Add user").click()
    expect(users.get_by_role("row").filter(has_text="dee@example.com")).to_contain_text("hr, eng")

    # demote gil inline: his open admin pages go on his next request
    ann.get_by_role("button", name="Edit gil@example.com").click()
    ann.get_by_label("Groups of gil@example.com").fill("ops")
    ann.get_by_label("gil@example.com is an admin").uncheck()
    ann.get_by_label("Plan of gil@example.com").select_option("paid")
    assert serious(ann) == []
    shot(ann, "admin-users-editing")
    ann.get_by_role("button", name="Save").click()
    row = users.get_by_role("row").filter(has_text="gil@example.com")
    expect(row).to_contain_text("ops")
    expect(row).to_contain_text("paid")
    gil.get_by_role("navigation", name="Administration").get_by_role("link", name="Users").click()
    expect(gil.get_by_role("heading", name="Not available")).to_be_visible()
    expect(gil.get_by_role("link", name="Admin")).to_have_count(0)

    # the last admin cannot demote herself: the reason is shown, nothing changes
    ann.get_by_role("button", name="Edit ann@example.com").click()
    ann.get_by_label("ann@example.com is an admin").uncheck()
    ann.get_by_role("button", name="Save").click()
    expect(ann.get_by_role("alert")).to_contain_text("last admin")
    ann.get_by_role("button", name="Cancel").click()
    expect(users.get_by_role("row").filter(has_text="ann@example.com")).to_contain_text("yes")

    # remove cy after a confirm: her open app shows the sign-in page on her next request
    ann.get_by_role("button", name="Remove cy@example.com").click()
    confirm = ann.get_by_role("dialog", name="Remove user")
    expect(confirm).to_contain_text("cy@example.com")
    assert serious(ann) == []
    confirm.get_by_role("button", name="Cancel").click()
    expect(users).to_contain_text("cy@example.com")
    ann.get_by_role("button", name="Remove cy@example.com").click()
    confirm.get_by_role("button", name="Remove").click()
    expect(users).not_to_contain_text("cy@example.com")
    cy.get_by_role("link", name="Memories").click()
    expect(cy.get_by_role("status")).to_contain_text("Your session has ended")
    for page in (ann, gil, cy):
        page.context.close()
