"""Web App sign-in with OpenID Connect against a real Authlib provider on loopback.

Discovery, JWKS, authorization code + PKCE, ID token checks; each refusal creates nothing.
On SQLite and PostgreSQL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import func, select

from search2o.api.app import create_app
from search2o.api.routers.auth import STATE_COOKIE
from search2o.config import OidcSettings, Settings
from search2o.knowledge.access import AccessList
from search2o.runtime import Runtime
from search2o.signin import COOKIE_NAME
from search2o.storage.models import User
from search2o.storage.signin_models import WebSession
from tests.api.test_api import serve
from tests.conftest import MemoEmbedder, free_port
from tests.oidc_provider import TestProvider, running_provider

CLIENT_ID = "search2o-web"
HANDBOOK_HR = b"# Payroll\n\nThe payroll cutoff is the 20th of each month.\n"


@dataclass
class Setup:
    api: httpx.Client
    provider: TestProvider
    runtime: Runtime
    refusals: list[dict[str, str]]


class _Refusals(logging.Handler):
    """Collects the fields of the API's ``sign-in refused`` log lines."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[dict[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "sign-in refused":
            self.seen.append(dict(getattr(record, "fields", {})))


@pytest.fixture
def oidc(settings: Settings, embedder: MemoEmbedder) -> Iterator[Setup]:
    port = free_port()
    callback = f"http://127.0.0.1:{port}/v1/auth/oidc/callback"
    with running_provider(CLIENT_ID, callback) as provider:
        chosen = Settings(
            data_dir=settings.data_dir,
            database_url=settings.database_url,
            auth_mode="token",
            port=port,
            oidc=OidcSettings(
                issuer=provider.issuer,
                client_id=CLIENT_ID,
                groups_claim="groups",
                redirect_url=callback,
            ),
        )
        runtime = Runtime(chosen, embedder=embedder)
        handler = _Refusals()
        logger = logging.getLogger("search2o.api")
        try:
            app = create_app(chosen, runtime=runtime)  # configures logging
            logger.addHandler(handler)
            with serve(app, port) as api:
                yield Setup(api, provider, runtime, handler.seen)
        finally:
            logger.removeHandler(handler)
            runtime.close()


def start(setup: Setup) -> tuple[str, str]:
    """Begin a sign-in; return (the provider's callback URL with code and state, state cookie)."""
    login = setup.api.get("/v1/auth/oidc/login")
    assert login.status_code == 302
    authorize = login.headers["location"]
    query = parse_qs(urlsplit(authorize).query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    assert query["client_id"] == [CLIENT_ID] and "openid" in query["scope"][0].split()
    state_cookie = login.cookies[STATE_COOKIE]
    setup.api.cookies.clear()
    at_provider = httpx.get(authorize, follow_redirects=False)
    assert at_provider.status_code == 302, at_provider.text
    return at_provider.headers["location"], state_cookie


def finish(setup: Setup, callback: str, state_cookie: str) -> httpx.Response:
    path = callback.removeprefix(str(setup.api.base_url).rstrip("/"))
    response = setup.api.get(path, headers={"Cookie": f"{STATE_COOKIE}={state_cookie}"})
    setup.api.cookies.clear()
    return response


def counts(runtime: Runtime) -> tuple[int, int]:
    with runtime.database.session() as session:
        users = int(session.scalar(select(func.count()).select_from(User)) or 0)
        sessions = int(session.scalar(select(func.count()).select_from(WebSession)) or 0)
    return users, sessions


def refused(setup: Setup, response: httpx.Response, code: str, reason: str) -> None:
    """The browser is sent to the sign-in page with ``code``; the log line gives ``reason``."""
    assert response.status_code == 303
    assert response.headers["location"] == f"/?signin_error={code}"
    assert COOKIE_NAME not in response.cookies
    last = setup.refusals[-1]
    assert last["code"] == code and reason in last["reason"], last


def alice(setup: Setup, **claims: object) -> None:
    setup.provider.user = {
        "sub": "u-1",
        "email": "Alice@Example.com",
        "email_verified": True,
        "name": "Alice Example",
        "groups": ["hr", "not a group!"],
        **claims,
    }


def test_the_provider_signs_a_user_in_who_is_created_with_the_claims_groups(
    oidc: Setup,
) -> None:
    alice(oidc)
    response = finish(oidc, *start(oidc))
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = response.cookies[COOKIE_NAME]
    me = oidc.api.get("/v1/me", headers={"Cookie": f"{COOKIE_NAME}={cookie}"}).json()
    assert me["email"] == "alice@example.com" and me["groups"] == ["hr"]
    session = oidc.api.get("/v1/auth/session", headers={"Cookie": f"{COOKIE_NAME}={cookie}"})
    assert session.json()["name"] == "Alice Example"
    assert session.json()["methods"] == ["link", "oidc"]
    # The next sign-in replaces the groups with the directory's.
    alice(oidc, groups=["eng"])
    again = finish(oidc, *start(oidc))
    cookie = again.cookies[COOKIE_NAME]
    me = oidc.api.get("/v1/me", headers={"Cookie": f"{COOKIE_NAME}={cookie}"}).json()
    assert me["groups"] == ["eng"] and counts(oidc.runtime) == (1, 2)


def test_groups_from_the_claim_gate_a_document(oidc: Setup) -> None:
    oidc.runtime.knowledge.ingest_bytes(
        "upload:payroll.md", "payroll.md", HANDBOOK_HR, AccessList.build(groups=["hr"])
    )
    found = {}
    for groups in (["hr"], ["eng"]):
        alice(oidc, groups=groups)
        cookie = finish(oidc, *start(oidc)).cookies[COOKIE_NAME]
        headers = {"Cookie": f"{COOKIE_NAME}={cookie}"}
        hits = oidc.api.get("/v1/documents", headers=headers).json()
        search = oidc.api.post(
            "/v1/search",
            json={"query": "payroll cutoff"},
            headers={**headers, "X-Search2o-Client": "web", "Origin": str(oidc.api.base_url)},
        )
        assert search.status_code == 200, search.text
        found[groups[0]] = (
            len(hits["documents"] if isinstance(hits, dict) else hits),
            [h["source"] for h in search.json()["hits"]],
        )
    assert found["hr"] == (1, ["upload:payroll.md"])
    assert found["eng"] == (0, [])


def test_a_wrong_state_is_refused_and_creates_nothing(oidc: Setup) -> None:
    alice(oidc)
    callback, state_cookie = start(oidc)
    refused(oidc, finish(oidc, callback, "another-browsers-state"), "state", "does not belong")
    forged = callback.replace("state=", "state=x")
    refused(oidc, finish(oidc, forged, "x" + state_cookie), "state", "unknown, used or expired")
    assert counts(oidc.runtime) == (0, 0)


def test_a_wrong_audience_is_refused_and_creates_nothing(oidc: Setup) -> None:
    alice(oidc)
    oidc.provider.audience = "another-client"
    refused(oidc, finish(oidc, *start(oidc)), "provider", "aud")
    assert counts(oidc.runtime) == (0, 0)


def test_an_expired_id_token_is_refused_and_creates_nothing(oidc: Setup) -> None:
    alice(oidc)
    oidc.provider.lifetime_s = -3600
    refused(oidc, finish(oidc, *start(oidc)), "provider", "exp")
    assert counts(oidc.runtime) == (0, 0)


def test_a_replayed_code_is_refused_by_the_provider(oidc: Setup) -> None:
    alice(oidc)
    callback, state_cookie = start(oidc)
    assert finish(oidc, callback, state_cookie).headers["location"] == "/"
    refused(oidc, finish(oidc, callback, state_cookie), "state", "unknown, used")  # same state
    # The same code under a fresh state of this browser: the provider refuses it.
    code = parse_qs(urlsplit(callback).query)["code"][0]
    fresh, fresh_cookie = start(oidc)
    state = parse_qs(urlsplit(fresh).query)["state"][0]
    replay = f"{oidc.api.base_url}v1/auth/oidc/callback?code={code}&state={state}"
    before = oidc.provider.token_requests
    refused(oidc, finish(oidc, replay, fresh_cookie), "provider", "invalid_grant")
    assert oidc.provider.token_requests == before + 1
    assert counts(oidc.runtime) == (1, 1)


def test_an_unverified_email_is_refused_and_creates_nothing(oidc: Setup) -> None:
    alice(oidc, email_verified=False)
    refused(oidc, finish(oidc, *start(oidc)), "provider", "not verified")
    assert counts(oidc.runtime) == (0, 0)
