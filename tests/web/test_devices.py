"""The Devices page in a real browser: create a device token (shown once, with Copy), see it
listed by its prefix, revoke it — and the token works until then."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.web.conftest import Site, shot
from tests.web.test_pages import AXE, serious

pytestmark = pytest.mark.slow


def test_create_copy_list_and_revoke_a_device_token(browser: Any, site: Site) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(
        viewport={"width": 1280, "height": 860}, permissions=["clipboard-read", "clipboard-write"]
    )
    context.add_init_script(path=str(AXE))
    page = context.new_page()
    page.goto(site.url + "/")
    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Devices").click()
    expect(page.get_by_role("heading", name="Devices")).to_be_visible()
    form = page.get_by_role("form", name="Create a device token")
    form.get_by_label("Device name").fill("work laptop extension")
    form.get_by_role("button", name="Create token").click()
    shown = page.get_by_role("region", name="New device token")
    expect(shown).to_contain_text("shown this once")
    token = shown.locator("code").inner_text()
    assert token.startswith("s2o_")
    shown.get_by_role("button", name="Copy").click()
    expect(shown.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == token
    assert serious(page) == []
    shot(page, "devices-created")

    bearer = {"Authorization": f"Bearer {token}"}
    assert httpx.get(site.url + "/v1/me/tokens", headers=bearer).status_code == 200
    page.reload()  # the value is never shown again; the list names it by its prefix
    row = page.get_by_role("row").filter(has_text="work laptop extension")
    expect(row).to_contain_text(token[:12])
    expect(page.get_by_text(token)).to_have_count(0)
    row.get_by_role("button", name="Revoke work laptop extension").click()
    expect(row).to_contain_text("revoked")
    assert httpx.get(site.url + "/v1/me/tokens", headers=bearer).status_code == 401
    context.close()


def test_a_link_code_from_the_devices_page_links_a_telegram_account_to_the_user(
    browser: Any, site: Site
) -> None:
    from playwright.sync_api import expect

    from search2o import accounts

    page = browser.new_page(viewport={"width": 1280, "height": 860})
    page.goto(site.url + "/devices")
    form = page.get_by_role("form", name="Get a link code")
    form.get_by_label("Messenger").select_option("telegram")
    form.get_by_role("button", name="Get a link code").click()
    shown = page.get_by_role("region", name="New link code")
    expect(shown).to_contain_text("Telegram link code")
    code = shown.locator("code").inner_text()
    expect(shown).to_contain_text(f"/link {code}")
    me = httpx.get(site.url + "/v1/me", cookies=_cookies(page)).json()
    page.close()

    with site.runtime.database.session() as session:
        telegram = {"Authorization": f"Bearer {accounts.issue_surface_token(session, 'telegram')}"}
        slack = {"Authorization": f"Bearer {accounts.issue_surface_token(session, 'slack')}"}
    body = {"workspace": "telegram", "external_user_id": "4242", "code": code}
    # the code was minted for Telegram: another messenger cannot use it, and nothing is linked
    refused = httpx.post(site.url + "/v1/surfaces/identities", json=body, headers=slack)
    assert refused.status_code == 422 and refused.json()["detail"]["field"] == "code"
    linked = httpx.post(site.url + "/v1/surfaces/identities", json=body, headers=telegram)
    assert linked.status_code == 200, linked.text
    assert linked.json()["email"] == me["email"] and linked.json()["linked_by"] == "code"
    again = httpx.post(site.url + "/v1/surfaces/identities", json=body, headers=telegram)
    assert again.status_code == 422  # shown once, used once


def _cookies(page: Any) -> dict[str, str]:
    return {c["name"]: c["value"] for c in page.context.cookies()}
