"""Browser sessions: sign-in links, the cookie, sign-out, expiry, revocation and CSRF refusals.

Against the real API on a loopback port in token mode, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy import delete, func, select, update

from search2o import accounts, signin
from search2o.api.app import create_app
from search2o.errors import AuthenticationError
from search2o.runtime import Runtime
from search2o.signin import COOKIE_NAME, issue_login_link
from search2o.storage.db import Database
from search2o.storage.models import User, utcnow
from search2o.storage.signin_models import SigninGrant, WebSession
from tests.api.test_api import add_user, serve
from tests.test_cli import Cli, error_line, out

WEB = {"X-Search2o-Client": "web"}


def link_for(runtime: Runtime, email: str, *, admin: bool = False, minutes: int = 5) -> str:
    with runtime.database.session() as session:
        if session.scalar(select(User.id).where(User.email == email)) is None:
            accounts.create_user(session, email, is_admin=admin)
        return issue_login_link(session, email, minutes).value


def use_link(api: httpx.Client, value: str, **extra: str) -> httpx.Response:
    """Press "Sign in" on the app's confirmation page: ``POST /v1/auth/link/{value}``."""
    return api.post(f"/v1/auth/link/{value}", headers={**WEB, "Origin": str(api.base_url), **extra})


def sign_in(api: httpx.Client, runtime: Runtime, email: str, *, admin: bool = False) -> str:
    """Use a fresh sign-in link; return the session cookie's value."""
    response = use_link(api, link_for(runtime, email, admin=admin))
    assert response.status_code == 200 and response.json()["email"] == email, response.text
    value = response.cookies[COOKIE_NAME]
    api.cookies.clear()  # each test sends the cookie it means to
    return value


def browser(api: httpx.Client, cookie: str, **extra: str) -> dict[str, str]:
    """Headers of a same-origin request of the Web App carrying ``cookie``."""
    return {"Cookie": f"{COOKIE_NAME}={cookie}", **WEB, "Origin": str(api.base_url), **extra}


def sessions(runtime: Runtime) -> int:
    with runtime.database.session() as session:
        return int(session.scalar(select(func.count()).select_from(WebSession)) or 0)


def test_a_login_link_signs_in_once_with_an_httponly_lax_cookie(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    value = link_for(token_runtime, "ann@example.com")
    first = use_link(token_api, value)
    assert first.status_code == 200, first.text
    assert first.json()["signed_in"] and first.json()["email"] == "ann@example.com"
    set_cookie = first.headers["set-cookie"]
    attributes = {a.strip().split("=")[0].lower() for a in set_cookie.split(";")}
    assert {"httponly", "path"} <= attributes and "samesite=lax" in set_cookie.lower()
    assert "secure" not in attributes  # served on loopback without a TLS proxy
    cookie = first.cookies[COOKIE_NAME]
    token_api.cookies.clear()
    me = token_api.get("/v1/me", headers={"Cookie": f"{COOKIE_NAME}={cookie}"})
    assert me.status_code == 200 and me.json()["email"] == "ann@example.com"
    with token_runtime.database.session() as session:  # only the SHA-256 is stored
        stored = session.scalars(select(WebSession.token_hash)).all()
    assert cookie not in stored and len(stored) == 1
    again = use_link(token_api, value)
    assert again.status_code == 401 and "set-cookie" not in again.headers
    assert sessions(token_runtime) == 1


def test_opening_a_link_uses_nothing_up_so_a_mail_scanner_cannot_spend_it(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    value = link_for(token_runtime, "ann@example.com")
    for _ in range(3):  # a scanner, a link preview, the person: each only looks
        shown = token_api.get(f"/v1/auth/link/{value}")
        assert shown.status_code == 200 and shown.json()["email"] == "ann@example.com"
        assert "set-cookie" not in shown.headers
    assert sessions(token_runtime) == 0
    assert use_link(token_api, value).status_code == 200  # still usable by the person
    assert token_api.get(f"/v1/auth/link/{value}").status_code == 401  # used now


def test_a_link_cannot_be_used_from_another_site_login_csrf(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    value = link_for(token_runtime, "mallory@example.com")
    forged = [
        {"Origin": "https://evil.example"},  # a form on another site, even with the header
        {"X-Search2o-Client": "", "Origin": str(token_api.base_url)},  # no custom header
    ]
    for headers in forged:
        sent = {**WEB, **headers}
        if headers.get("X-Search2o-Client") == "":
            sent.pop("X-Search2o-Client")
        response = token_api.post(f"/v1/auth/link/{value}", headers=sent)
        assert response.status_code == 403, response.text
        assert "set-cookie" not in response.headers
    assert sessions(token_runtime) == 0
    assert use_link(token_api, value).status_code == 200  # the link was not spent


def test_an_expired_or_unknown_link_signs_nobody_in(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    value = link_for(token_runtime, "ann@example.com", minutes=1)
    with token_runtime.database.session() as session:
        session.execute(update(SigninGrant).values(expires_at=utcnow() - timedelta(seconds=1)))
    for attempt in (value, "not-a-link"):
        assert token_api.get(f"/v1/auth/link/{attempt}").status_code == 401
        response = use_link(token_api, attempt)
        assert response.status_code == 401
        assert response.json()["detail"]["message"].startswith("sign-in link is unknown")
    assert sessions(token_runtime) == 0


def test_a_link_used_in_a_signed_in_browser_ends_the_old_session(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    old = sign_in(token_api, token_runtime, "ann@example.com")
    value = link_for(token_runtime, "bob@example.com")
    switched = use_link(token_api, value, Cookie=f"{COOKIE_NAME}={old}")
    assert switched.status_code == 200 and switched.json()["email"] == "bob@example.com"
    token_api.cookies.clear()
    assert token_api.get("/v1/me", headers={"Cookie": f"{COOKIE_NAME}={old}"}).status_code == 401


def test_the_session_endpoint_tells_signed_in_from_signed_out(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    out_ = token_api.get("/v1/auth/session").json()
    assert out_ == {
        "signed_in": False,
        "email": None,
        "name": None,
        "is_admin": False,
        "methods": ["link"],
    }
    cookie = sign_in(token_api, token_runtime, "ann@example.com")
    signed = token_api.get("/v1/auth/session", headers=browser(token_api, cookie)).json()
    assert signed["signed_in"] and signed["email"] == "ann@example.com"
    assert signed["name"] == "ann"


def test_sign_out_ends_the_session_on_the_server(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    cookie = sign_in(token_api, token_runtime, "ann@example.com")
    response = token_api.post("/v1/auth/logout", headers=browser(token_api, cookie))
    assert response.status_code == 204
    assert f"{COOKIE_NAME}=" in response.headers["set-cookie"]  # cleared in the browser
    again = token_api.get("/v1/me", headers=browser(token_api, cookie))  # a copied cookie
    assert again.status_code == 401
    assert "session expired or signed out" in again.json()["detail"]["message"]


@pytest.mark.parametrize("which", ["absolute", "idle"])
def test_an_expired_session_is_refused(
    token_runtime: Runtime, token_api: httpx.Client, which: str
) -> None:
    cookie = sign_in(token_api, token_runtime, "ann@example.com")
    assert token_api.get("/v1/me", headers=browser(token_api, cookie)).status_code == 200
    settings = token_runtime.settings.web
    past = utcnow() - timedelta(seconds=1)
    with token_runtime.database.session() as session:
        if which == "absolute":
            session.execute(update(WebSession).values(expires_at=past))
        else:
            idle = timedelta(minutes=settings.idle_minutes)
            session.execute(update(WebSession).values(last_seen_at=past - idle))
    assert token_api.get("/v1/me", headers=browser(token_api, cookie)).status_code == 401


def test_a_demoted_admin_loses_admin_routes_at_once_and_a_removed_user_everything(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    cookie = sign_in(token_api, token_runtime, "boss@example.com", admin=True)
    headers = browser(token_api, cookie)
    assert token_api.get("/v1/users", headers=headers).status_code == 200
    with token_runtime.database.session() as session:
        session.execute(update(User).where(User.email == "boss@example.com").values(is_admin=False))
    assert token_api.get("/v1/users", headers=headers).status_code == 403
    assert token_api.get("/v1/auth/session", headers=headers).json()["is_admin"] is False
    with token_runtime.database.session() as session:
        session.execute(delete(User).where(User.email == "boss@example.com"))
    assert sessions(token_runtime) == 0  # deleted with the user
    assert token_api.get("/v1/me", headers=headers).status_code == 401


def _forbidden(response: httpx.Response, reason: str) -> None:
    assert response.status_code == 403, response.text
    detail = response.json()["detail"]
    assert detail["error"] == "PermissionDeniedError" and reason in detail["message"]


def test_cookie_requests_that_change_something_need_the_header_and_our_origin(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    cookie = sign_in(token_api, token_runtime, "ann@example.com")
    own = str(token_api.base_url)
    jar = {"Cookie": f"{COOKIE_NAME}={cookie}"}
    search = {"query": "vacation days"}
    _forbidden(
        token_api.post("/v1/search", json=search, headers={**jar, "Origin": own}),
        "X-Search2o-Client",
    )
    _forbidden(token_api.post("/v1/search", json=search, headers={**jar, **WEB}), "Origin")
    _forbidden(
        token_api.post(
            "/v1/search", json=search, headers={**jar, **WEB, "Origin": "https://evil.example"}
        ),
        "another origin",
    )
    _forbidden(
        token_api.post(
            "/v1/search", json=search, headers={**jar, **WEB, "Referer": "https://evil.example/x"}
        ),
        "another origin",
    )
    _forbidden(
        token_api.post("/v1/auth/logout", headers={**jar, **WEB, "Origin": "null"}),
        "another origin",
    )
    assert token_api.get("/v1/me", headers=jar).status_code == 200  # nothing was ended
    referer = {**jar, **WEB, "Referer": own.rstrip("/") + "/c/1"}
    ok = token_api.post("/v1/search", json=search, headers=referer)
    assert ok.status_code == 200
    ok = token_api.post("/v1/search", json=search, headers=browser(token_api, cookie))
    assert ok.status_code == 200


def test_bearer_token_requests_are_not_checked_for_csrf(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    headers = {**add_user(token_runtime, "bot@example.com"), "Origin": "https://evil.example"}
    assert token_api.post("/v1/search", json={"query": "x"}, headers=headers).status_code == 200


def test_local_mode_refuses_a_request_from_another_origin(runtime: Runtime) -> None:
    with serve(create_app(runtime.settings, runtime=runtime)) as api:
        body = {"query": "vacation"}
        _forbidden(
            api.post("/v1/search", json=body, headers={"Origin": "https://evil.example"}),
            "another origin",
        )
        assert api.post("/v1/search", json=body).status_code == 200  # scripts send no Origin
        own = {"Origin": str(api.base_url).rstrip("/")}
        assert api.post("/v1/search", json=body, headers=own).status_code == 200
        assert api.get("/v1/auth/session").json()["methods"] == ["local"]


def test_login_link_command_prints_a_link_and_refuses_an_unknown_email(cli: Cli) -> None:
    cli.ok("users", "add", "ann@example.com")
    guessed = cli.ok("users", "login-link", "Ann@Example.com", "--minutes", "5")
    lines = out(guessed).splitlines()
    assert lines[0].startswith("sign-in link of ann@example.com, valid once until ")
    assert lines[-1].startswith("http://localhost:8000/signin/link#")  # the app's page
    # Where the server runs is not this command's to know: it says the address is a guess.
    assert "set mcp.public_url" in guessed.stderr and "http://localhost:8000" in guessed.stderr
    cli.env["SEARCH2O_MCP__PUBLIC_URL"] = "https://search.example.com"
    told = cli.ok("users", "login-link", "ann@example.com")
    assert out(told).splitlines()[-1].startswith("https://search.example.com/signin/link#")
    assert "public_url" not in told.stderr
    del cli.env["SEARCH2O_MCP__PUBLIC_URL"]
    result = cli("users", "login-link", "nobody@example.com")
    assert "no user nobody@example.com" in error_line(result, 2)


def test_oidc_requests_in_flight_are_bounded_and_ended_ones_dropped(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signin, "MAX_PENDING_OIDC", 2)
    with database.session() as session:
        first = signin.begin_oidc(session)
        signin.begin_oidc(session)
        with pytest.raises(AuthenticationError, match="too many sign-ins"):
            signin.begin_oidc(session)
    with database.session() as session:
        assert signin.take_oidc(session, first.state).nonce == first.nonce
        with pytest.raises(AuthenticationError, match="unknown, used or expired"):
            signin.take_oidc(session, first.state)  # once only
    with database.session() as session:
        session.execute(update(SigninGrant).values(expires_at=utcnow() - timedelta(seconds=1)))
        signin.begin_oidc(session)  # the used and the expired one are gone: room again
        assert session.scalar(select(func.count()).select_from(SigninGrant)) == 1
