"""Sign-in in the browser: a login link and the test identity provider, sign-out, an expired
session, a demoted admin; the cookie is HttpOnly and SameSite=Lax and no token is stored.

Token mode on loopback (a shared install); the identity provider is the real Authlib server
of :mod:`tests.oidc_provider`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from search2o.config import OidcSettings
from search2o.signin import COOKIE_NAME
from search2o.storage.models import User, utcnow
from search2o.storage.signin_models import WebSession
from tests.conftest import MemoEmbedder, free_port
from tests.oidc_provider import TestProvider, running_provider
from tests.web.conftest import Site, add_people, login_link, open_site, shot, sign_in_with_link
from tests.web.test_pages import AXE, VIEWS, serious

pytestmark = pytest.mark.slow

CLIENT_ID = "search2o-web"


@pytest.fixture(scope="module")
def provider_site(
    tmp_path_factory: pytest.TempPathFactory, embedder: MemoEmbedder
) -> Iterator[tuple[Site, TestProvider]]:
    port = free_port()
    callback = f"http://127.0.0.1:{port}/v1/auth/oidc/callback"
    with running_provider(CLIENT_ID, callback) as provider:
        oidc = OidcSettings(
            issuer=provider.issuer,
            client_id=CLIENT_ID,
            groups_claim="groups",
            redirect_url=callback,
        )
        for site in open_site(
            tmp_path_factory.mktemp("signin"), embedder, port, auth_mode="token", oidc=oidc
        ):
            yield site, provider


def session_cookie(page: Any) -> dict[str, Any]:
    (cookie,) = [c for c in page.context.cookies() if c["name"] == COOKIE_NAME]
    return dict(cookie)


def assert_no_token_stored(page: Any, cookie: dict[str, Any]) -> None:
    stored = page.evaluate(
        "() => JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage)])"
    )
    assert cookie["value"] not in stored
    assert "s2o_" not in stored and "token" not in stored.lower()
    assert page.evaluate("() => document.cookie") == ""  # HttpOnly: invisible to scripts


def test_a_crafted_refusal_shows_only_our_own_words(
    browser: Any, provider_site: tuple[Site, TestProvider]
) -> None:
    from playwright.sync_api import expect

    site, _ = provider_site
    page = browser.new_context().new_page()
    page.goto(site.url + "/?signin_error=Call+our+helpdesk+at+555-0100")
    expect(page.get_by_role("alert")).to_have_text("Sign-in failed. Please try again.")
    page.context.close()


def test_login_link_sign_in_and_sign_out(
    browser: Any, provider_site: tuple[Site, TestProvider]
) -> None:
    from playwright.sync_api import expect

    site, _ = provider_site
    add_people(site.runtime, [("dana@example.com", (), False)])
    page = browser.new_context().new_page()
    page.goto(site.url + "/")
    expect(page.get_by_role("heading", name="Sign in to search2o")).to_be_visible()
    expect(page.get_by_role("link", name="Sign in with your company account")).to_be_visible()
    shot(page, "signin-page")
    link = login_link(site, "dana@example.com")
    assert "/signin/link#" in link  # the secret is in the fragment: no server or log sees it
    page.goto(link)
    expect(page.get_by_text("This link signs you in as dana@example.com")).to_be_visible()
    shot(page, "signin-link")
    page.reload()  # opening the page again (a scanner, a preview) used nothing up
    page.get_by_role("button", name="Sign in as dana@example.com").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.locator(".who")).to_have_text("dana")
    cookie = session_cookie(page)
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax"
    assert cookie["secure"] is False  # loopback without a TLS proxy
    assert_no_token_stored(page, cookie)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in to search2o")).to_be_visible()
    assert [c for c in page.context.cookies() if c["name"] == COOKIE_NAME] == []
    page.reload()
    expect(page.get_by_role("heading", name="Sign in to search2o")).to_be_visible()
    page.context.close()


def test_identity_provider_sign_in(browser: Any, provider_site: tuple[Site, TestProvider]) -> None:
    from playwright.sync_api import expect

    site, provider = provider_site
    provider.user = {
        "sub": "e-1",
        "email": "erin@example.com",
        "email_verified": True,
        "name": "Erin Example",
        "groups": ["hr"],
    }
    page = browser.new_context().new_page()
    page.goto(site.url + "/")
    page.get_by_role("link", name="Sign in with your company account").click()
    expect(page.locator(".who")).to_have_text("Erin Example")
    assert page.url == site.url + "/"
    assert_no_token_stored(page, session_cookie(page))
    page.context.close()


def test_an_expired_session_shows_the_sign_in_page(
    browser: Any, provider_site: tuple[Site, TestProvider]
) -> None:
    from playwright.sync_api import expect

    site, _ = provider_site
    add_people(site.runtime, [("fay@example.com", (), False)])
    page = browser.new_context().new_page()
    sign_in_with_link(page, site, "fay@example.com")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    with site.runtime.database.session() as session:
        session.execute(
            update(WebSession)
            .where(WebSession.user.has(User.email == "fay@example.com"))
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    page.get_by_role("link", name="Memories").click()
    expect(page.get_by_role("heading", name="Sign in to search2o")).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("Your session has ended")
    shot(page, "signin-session-ended")
    page.context.close()


def test_a_demoted_admin_loses_the_admin_pages_without_signing_in_again(
    browser: Any, provider_site: tuple[Site, TestProvider]
) -> None:
    from playwright.sync_api import expect

    site, _ = provider_site
    add_people(site.runtime, [("gil@example.com", (), True)])
    page = browser.new_context().new_page()
    sign_in_with_link(page, site, "gil@example.com")
    page.get_by_role("link", name="Admin").click()
    expect(page.get_by_role("heading", name="Administration")).to_be_visible()
    with site.runtime.database.session() as session:
        session.execute(update(User).where(User.email == "gil@example.com").values(is_admin=False))
    page.get_by_role("link", name="Users").click()
    expect(page.get_by_role("heading", name="Not available")).to_be_visible()
    expect(page.get_by_role("link", name="Admin")).to_have_count(0)
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()  # still signed in
    page.context.close()


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_the_sign_in_page_is_accessible(
    browser: Any, provider_site: tuple[Site, TestProvider], view: str
) -> None:
    from playwright.sync_api import expect

    site, _ = provider_site
    assert AXE.exists(), f"{AXE} is missing: npm ci in web/"
    context = browser.new_context(**VIEWS[view])
    context.add_init_script(path=str(AXE))
    page = context.new_page()
    page.goto(site.url + "/?signin_error=state")
    expect(page.get_by_role("alert")).to_contain_text("took too long")
    shot(page, f"signin-{view}")
    assert serious(page) == []
    add_people(site.runtime, [(f"axe-{view}@example.com", (), False)])
    page.goto(login_link(site, f"axe-{view}@example.com"))  # the link's confirmation page
    expect(page.get_by_role("button", name=f"Sign in as axe-{view}@example.com")).to_be_visible()
    shot(page, f"signin-link-{view}")
    assert serious(page) == []
    context.close()
