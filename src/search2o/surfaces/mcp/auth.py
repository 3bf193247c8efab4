"""Who an MCP request over HTTP acts as: the bearer token's owner, under the API's own rules.

:class:`CallerTokenVerifier` is the SDK's ``TokenVerifier``: a token with our prefix
(``s2o_``) is one of our API tokens and goes through
:func:`search2o.api.auth.authenticate_header`, exactly as on ``/v1``; any other token, when
``mcp.oidc_issuer`` is set, is an access token of the identity provider
(:class:`~search2o.surfaces.mcp.oidc.OidcVerifier`). :class:`CallerBackend` is the SDK's
bearer backend plus the one rule of ``auth_mode=local``: a request without any
``Authorization`` header from this machine acts as the local user (the ``/v1`` rule of
:func:`~search2o.api.auth.authenticate_header`).

The SDK's ``RequireAuthMiddleware`` answers any other request 401 with ``WWW-Authenticate:
Bearer error="invalid_token", ..., resource_metadata="<RFC 9728 metadata URL>"`` (RFC 6750
section 3; RFC 9728 section 5.1), and ``AuthContextMiddleware`` keeps the token in a context
variable for the tools (:func:`current_caller`).
"""

from __future__ import annotations

import logging

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthCredentials
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from search2o.accounts import TOKEN_PREFIX, Principal, SurfaceCaller
from search2o.api.auth import authenticate_header
from search2o.errors import AuthenticationError
from search2o.runtime import Runtime
from search2o.surfaces.mcp.oidc import OidcVerifier

__all__ = ["CallerBackend", "CallerToken", "CallerTokenVerifier", "current_caller"]

log = logging.getLogger("search2o.mcp")


class CallerToken(AccessToken):
    """The SDK's access token, carrying the search2o principal it acts as."""

    principal: Principal


def _api_token(token: str, principal: Principal, client_id: str) -> CallerToken:
    return CallerToken(
        token=token,
        client_id=client_id,
        scopes=[],
        subject=f"user:{principal.user_id}",
        principal=principal,
    )


class CallerTokenVerifier:
    """Verify a bearer token: ours, or the identity provider's (see the module docstring).

    Args:
        runtime: the process's runtime (its database knows our tokens).
        oidc: the identity provider's verifier, ``None`` when none is configured.

    """

    def __init__(self, runtime: Runtime, oidc: OidcVerifier | None) -> None:
        self._runtime = runtime
        self._oidc = oidc

    async def verify_token(self, token: str) -> AccessToken | None:
        """Return the token's :class:`CallerToken`, or ``None`` for a token we refuse."""
        return await run_in_threadpool(self.verify, token)

    def verify(self, token: str) -> CallerToken | None:
        """Blocking :meth:`verify_token` (one database read; the provider's keys when cold)."""
        try:
            if self._oidc is None or token.startswith(TOKEN_PREFIX):
                caller = authenticate_header(self._runtime, f"Bearer {token}")
                if isinstance(caller, SurfaceCaller):
                    # A surface's service token acts for nobody without X-Search2o-Act-As,
                    # which MCP does not carry: it searches as no one.
                    raise AuthenticationError(f"a {caller.surface} surface token is no user's")
                return _api_token(token, caller, "search2o-api-token")
            verified = self._oidc.verify(token)
        except AuthenticationError as exc:
            log.info("MCP token refused", extra={"fields": {"reason": exc.message}})
            return None
        return CallerToken(
            token=token,
            client_id=verified.client_id,
            scopes=verified.scopes,
            expires_at=verified.expires_at,
            subject=verified.subject,
            claims={"iss": self._oidc.issuer},
            principal=verified.principal,
        )


class CallerBackend(BearerAuthBackend):
    """The SDK's bearer backend; without any token, local mode's rule for this machine.

    Args:
        runtime: the process's runtime.
        verifier: the token verifier.

    """

    def __init__(self, runtime: Runtime, verifier: CallerTokenVerifier) -> None:
        super().__init__(verifier)
        self._runtime = runtime

    async def authenticate(
        self, conn: HTTPConnection
    ) -> tuple[AuthCredentials, AuthenticatedUser] | None:
        """Authenticate one request; ``None`` leaves it anonymous (answered 401)."""
        if "authorization" in conn.headers or self._runtime.settings.auth_mode != "local":
            result: tuple[AuthCredentials, AuthenticatedUser] | None
            result = await super().authenticate(conn)
            return result
        peer = conn.client.host if conn.client else None
        try:
            principal = await run_in_threadpool(authenticate_header, self._runtime, None, peer)
        except AuthenticationError:
            return None
        if not isinstance(principal, Principal):  # local mode without a token: never a surface
            return None
        return AuthCredentials([]), AuthenticatedUser(_api_token("", principal, "search2o-local"))


def current_caller() -> Principal:
    """Return the principal of the MCP request being served over HTTP.

    Raises:
        AuthenticationError: the request carries no authenticated caller (never the case
            behind ``RequireAuthMiddleware``; refused rather than answered as anyone).

    """
    token = get_access_token()
    if not isinstance(token, CallerToken):
        raise AuthenticationError("this MCP request has no authenticated caller")
    return token.principal
