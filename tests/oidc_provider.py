"""A test identity provider: a real Authlib OpenID Connect authorization server on loopback.

It serves what a company's provider serves, over real HTTP (Werkzeug's WSGI server in a
thread): the discovery document (OpenID Connect Discovery 1.0), a JWKS with one RSA key, an
authorization endpoint and a token endpoint implementing the authorization code grant with
PKCE (RFC 7636, required) and the OpenID Connect ``openid`` scope (Authlib's
``AuthorizationCodeGrant``, ``CodeChallenge`` and ``OpenIDCode``), issuing RS256 ID tokens.

There is no login form: the authorization endpoint signs in :attr:`TestProvider.user`, whom
the test sets, and redirects at once. Knobs for the refusal tests: :attr:`audience` (the ID
token's ``aud``) and :attr:`lifetime_s` (negative: an ID token already expired). A code is
deleted when it is used, so a replayed code is refused by the provider (``invalid_grant``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from authlib.oauth2 import AuthorizationServer, OAuth2Request
from authlib.oauth2.rfc6749 import JsonRequest
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core.grants import OpenIDCode
from joserfc.jwk import RSAKey
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

__all__ = ["TestProvider", "running_provider"]


@dataclass
class _Client:
    client_id: str
    redirect_uri: str

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_allowed_scope(self, scope: str) -> str:
        allowed = {"openid", "email", "profile", "groups"}
        return " ".join(s for s in scope.split() if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri == self.redirect_uri

    def check_client_secret(self, client_secret: str) -> bool:
        return False  # a public client: PKCE instead of a secret

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "authorization_code"


@dataclass
class _Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: dict[str, Any]
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> None:
        return None


class _Payload(BasicOAuth2Payload):
    """Form and query values of a Werkzeug request as Authlib reads them."""

    def __init__(self, request: Request) -> None:
        values = request.values
        super().__init__({k: values.get(k) for k in values})
        self._datalist = {k: values.getlist(k) for k in values}


class _Request(OAuth2Request):  # type: ignore[misc]
    """A Werkzeug request as Authlib's grants read it (query ``args``, ``form`` body)."""

    def __init__(self, request: Request) -> None:
        super().__init__(request.method, request.url, headers=request.headers)
        self._request = request
        self.payload = _Payload(request)

    @property
    def args(self) -> Any:
        return self._request.args

    @property
    def form(self) -> Any:
        return self._request.form


class TestProvider:
    """The identity provider (see the module docstring); :func:`running_provider` starts one.

    Attributes:
        user: the claims of whoever signs in next (``sub``, ``email``, ``email_verified``,
            ``name``, ``groups``).
        audience: the ID token's ``aud`` (default: the client id).
        lifetime_s: seconds from issue to the ID token's ``exp``.
        token_requests: how many times the token endpoint was called.

    """

    __test__ = False  # not a test class, whatever its name says

    def __init__(self, client_id: str, redirect_uri: str) -> None:
        self.client = _Client(client_id, redirect_uri)
        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-key", "use": "sig"})
        self.user: dict[str, Any] = {}
        self.audience = client_id
        self.lifetime_s = 300
        self.token_requests = 0
        self.issuer = ""
        self._codes: dict[str, _Code] = {}
        self._server = self._authorization_server()

    def _authorization_server(self) -> AuthorizationServer:
        provider = self

        class Server(AuthorizationServer):  # type: ignore[misc]
            def query_client(self, client_id: str) -> _Client | None:
                return provider.client if client_id == provider.client.client_id else None

            def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
                return None

            def create_oauth2_request(self, request: Request) -> OAuth2Request:
                return _Request(request)

            def create_json_request(self, request: Request) -> JsonRequest:
                return JsonRequest(request.method, request.url, request.headers)

            def handle_response(
                self, status: int, body: Any, headers: list[tuple[str, str]]
            ) -> Response:
                text = json.dumps(body) if isinstance(body, dict) else body
                return Response(text, status=status, headers=headers)

            def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
                return None

        class Grant(AuthorizationCodeGrant):  # type: ignore[misc]
            TOKEN_ENDPOINT_AUTH_METHODS = ["none"]

            def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
                data = request.payload.data
                provider._codes[code] = _Code(
                    code,
                    request.client.get_client_id(),
                    data.get("redirect_uri"),
                    request.scope,
                    dict(request.user),
                    data.get("nonce"),
                    data.get("code_challenge"),
                    data.get("code_challenge_method"),
                )

            def query_authorization_code(self, code: str, client: _Client) -> _Code | None:
                found = provider._codes.get(code)
                return found if found and found.client_id == client.client_id else None

            def delete_authorization_code(self, authorization_code: _Code) -> None:
                provider._codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code: _Code) -> dict[str, Any]:
                return authorization_code.user

        class IdToken(OpenIDCode):  # type: ignore[misc]
            def exists_nonce(self, nonce: str, request: OAuth2Request) -> bool:
                return any(c.nonce == nonce for c in provider._codes.values())

            def resolve_client_private_key(self, client: _Client) -> RSAKey:
                return provider.key

            def get_client_algorithm(self, client: _Client) -> str:
                return "RS256"

            def get_encode_header(self, client: _Client) -> dict[str, str]:
                return {"alg": "RS256", "kid": "test-key"}

            def get_client_claims(self, client: _Client) -> dict[str, Any]:
                now = int(time.time())
                return {
                    "iss": provider.issuer,
                    "aud": [provider.audience],
                    "iat": now,
                    "exp": now + provider.lifetime_s,
                }

            def generate_user_info(self, user: dict[str, Any], scope: str) -> dict[str, Any]:
                return dict(user)

        server = Server()
        server.register_token_generator(
            "default", BearerTokenGenerator(lambda *a, **k: "access-" + str(time.time_ns()))
        )
        server.register_grant(Grant, [CodeChallenge(required=True), IdToken(require_nonce=True)])
        return server

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        """The WSGI application."""
        request = Request(environ)
        response = self._route(request)
        return response(environ, start_response)

    def _route(self, request: Request) -> Response:
        if request.path == "/.well-known/openid-configuration":
            return _json(
                {
                    "issuer": self.issuer,
                    "authorization_endpoint": self.issuer + "/authorize",
                    "token_endpoint": self.issuer + "/token",
                    "jwks_uri": self.issuer + "/jwks",
                    "response_types_supported": ["code"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                }
            )
        if request.path == "/jwks":
            return _json({"keys": [self.key.as_dict(private=False)]})
        if request.path == "/authorize":
            user = dict(self.user)
            grant = self._server.get_consent_grant(request=request, end_user=user)
            response: Response = self._server.create_authorization_response(
                request, grant_user=user, grant=grant
            )
            return response
        if request.path == "/token" and request.method == "POST":
            self.token_requests += 1
            token_response: Response = self._server.create_token_response(request)
            return token_response
        return Response("not found", status=404)


def _json(body: dict[str, Any]) -> Response:
    return Response(json.dumps(body), content_type="application/json")


@contextmanager
def running_provider(client_id: str, redirect_uri: str) -> Iterator[TestProvider]:
    """Serve a :class:`TestProvider` on a free loopback port until the block ends."""
    provider = TestProvider(client_id, redirect_uri)
    server = make_server("127.0.0.1", 0, provider, threaded=True)
    provider.issuer = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
