"""Identity provider access tokens at ``/mcp``: a loopback test IdP with real discovery + JWKS.

The IdP is a Starlette app on a real loopback port publishing OpenID Connect Discovery and a
JSON Web Key Set; its tokens are signed with Authlib's JOSE library (``joserfc``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tests.api.test_api import serve
from tests.conftest import MemoEmbedder
from tests.mcp.conftest import QUESTION, Handbook, structured
from tests.mcp.test_http import INITIALIZE, JSON_RPC, over_http

from search2o.api.app import create_app
from search2o.errors import AuthenticationError
from search2o.runtime import Runtime
from search2o.surfaces.mcp.oidc import OidcVerifier
from search2o.surfaces.mcp.settings import McpSettings
from search2o.surfaces.mcp.urls import McpUrls

pytestmark = pytest.mark.slow


class TestIdp:
    """A minimal identity provider: discovery, a key set, and tokens signed by its key."""

    __test__ = False

    def __init__(self) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": "idp-1"})
        self.issuer = ""
        self.jwks_fetches = 0

    def app(self) -> Starlette:
        async def discovery(request: Request) -> JSONResponse:
            return JSONResponse({"issuer": self.issuer, "jwks_uri": self.issuer + "/jwks"})

        async def jwks(request: Request) -> JSONResponse:
            self.jwks_fetches += 1
            return JSONResponse(KeySet([self.key]).as_dict(private=False))

        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", discovery),
                Route("/jwks", jwks),
            ]
        )

    def token(self, key: RSAKey | None = None, **claims: Any) -> str:
        """A JWT access token; defaults: this issuer, an hour valid, RS256 by the IdP's key."""
        now = int(time.time())
        body = {"iss": self.issuer, "sub": "u-1", "iat": now, "exp": now + 3600, **claims}
        signer = key or self.key
        header = {"alg": "RS256", "kid": signer.kid, "typ": "at+jwt"}
        return jwt.encode(header, {k: v for k, v in body.items() if v is not None}, signer)


@dataclass
class IdpServer:
    idp: TestIdp
    api: httpx.Client
    runtime: Runtime
    audience: str


@pytest.fixture
def idp_api(handbook: Handbook, embedder: MemoEmbedder) -> Iterator[IdpServer]:
    """The test IdP on loopback, and the API configured with it as ``mcp.oidc_issuer``."""
    idp = TestIdp()
    with serve(idp.app()) as idp_client:  # type: ignore[arg-type]
        idp.issuer = str(idp_client.base_url).rstrip("/")
        settings = handbook.runtime.settings.model_copy(
            update={"mcp": McpSettings(oidc_issuer=idp.issuer, oidc_groups_claim=None)}
        )
        runtime = Runtime(settings, embedder=embedder)
        try:
            with serve(create_app(settings, runtime=runtime)) as api:
                yield IdpServer(idp, api, runtime, McpUrls.of(settings).audience)
        finally:
            runtime.close()


def test_an_idp_token_searches_as_the_user_its_email_names(
    idp_api: IdpServer, handbook: Handbook
) -> None:
    token = idp_api.idp.token(aud=idp_api.audience, email="Alice@Example.com")
    hr = str(handbook.hr_id)

    async def body(client: Any) -> Any:
        return await client.call_tool("search", {"query": QUESTION})

    found = over_http(idp_api.api, {"Authorization": f"Bearer {token}"}, "2026-07-28", body)
    # Alice's stored groups (hr) apply: no groups claim is configured.
    assert hr in [r["id"] for r in structured(found)["results"]]

    metadata = idp_api.api.get("/.well-known/oauth-protected-resource/mcp").json()
    assert metadata["authorization_servers"] == [idp_api.idp.issuer]
    assert metadata["resource"] == idp_api.audience


def test_refused_idp_tokens_answer_401(idp_api: IdpServer) -> None:
    idp, audience = idp_api.idp, idp_api.audience
    stranger = RSAKey.generate_key(2048, parameters={"kid": "idp-1"})
    now = int(time.time())
    refused = {
        "wrong audience": idp.token(aud="https://other.example.com/mcp", email="alice@example.com"),
        "no audience": idp.token(email="alice@example.com"),
        "expired": idp.token(aud=audience, email="alice@example.com", exp=now - 3600),
        "wrong issuer": idp.token(aud=audience, email="alice@example.com", iss="https://x.test"),
        "unknown user": idp.token(aud=audience, email="mallory@example.com"),
        "no email": idp.token(aud=audience),
        "other key": idp.token(stranger, aud=audience, email="alice@example.com"),
        "not a jwt": "not.a.jwt",
    }
    for case, token in refused.items():
        response = idp_api.api.post(
            "/mcp", json=INITIALIZE, headers={**JSON_RPC, "Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 401, case
        assert "resource_metadata=" in response.headers["WWW-Authenticate"], case
    good = idp.token(aud=audience, email="alice@example.com")
    accepted = idp_api.api.post(
        "/mcp", json=INITIALIZE, headers={**JSON_RPC, "Authorization": f"Bearer {good}"}
    )
    assert accepted.status_code == 200, accepted.text


def test_groups_come_from_the_configured_claim(idp_api: IdpServer, handbook: Handbook) -> None:
    settings = McpSettings(oidc_issuer=idp_api.idp.issuer, oidc_groups_claim="groups")
    verifier = OidcVerifier(idp_api.runtime, settings, idp_api.audience)
    idp = idp_api.idp
    audience = idp_api.audience
    with_hr = verifier.verify(idp.token(aud=audience, email="bob@example.com", groups=["hr"]))
    assert with_hr.principal.email == "bob@example.com"
    assert with_hr.principal.groups == ("hr",)
    without = verifier.verify(idp.token(aud=idp_api.audience, email="alice@example.com", groups=[]))
    assert without.principal.groups == ()
    # A name that is no valid group name is left out, the rest kept.
    mixed = verifier.verify(
        idp.token(aud=idp_api.audience, email="alice@example.com", groups=["hr", " bad name"])
    )
    assert mixed.principal.groups == ("hr",)


def test_keys_are_cached_and_a_rotated_key_is_fetched_once(idp_api: IdpServer) -> None:
    settings = McpSettings(oidc_issuer=idp_api.idp.issuer)
    verifier = OidcVerifier(idp_api.runtime, settings, idp_api.audience)
    idp = idp_api.idp
    before = idp.jwks_fetches
    for _ in range(3):
        verifier.verify(idp.token(aud=idp_api.audience, email="alice@example.com"))
    assert idp.jwks_fetches == before + 1
    # The provider rotates its key: a token naming the new kid is refused while the cached
    # set is younger than the refetch interval (no fetch storm), and the old key still works.
    idp.key = RSAKey.generate_key(2048, parameters={"kid": "idp-2"})
    with pytest.raises(AuthenticationError, match="identity provider token refused"):
        verifier.verify(idp.token(aud=idp_api.audience, email="alice@example.com"))
    assert idp.jwks_fetches == before + 1


def test_an_issuer_that_discovery_contradicts_is_refused(idp_api: IdpServer) -> None:
    # Discovery must name exactly the configured issuer (OIDC Discovery 1.0, section 4.3).
    settings = McpSettings(oidc_issuer=idp_api.idp.issuer + "/")
    verifier = OidcVerifier(idp_api.runtime, settings, idp_api.audience)
    token = idp_api.idp.token(aud=idp_api.audience, email="alice@example.com")
    with pytest.raises(AuthenticationError, match="names issuer"):
        verifier.verify(token)
