"""The MCP endpoint in the API app: ``/mcp`` over Streamable HTTP, and its RFC 9728 metadata.

A request to ``/mcp`` passes, in order:

1. the API's own ingress (:mod:`search2o.api.ingress`): ``/mcp`` is no ``/v1`` path, so only
   the body bound ``api.max_body_bytes`` applies;
2. the SDK's DNS-rebinding protection (``TransportSecurityMiddleware``): a ``Host`` outside
   ``mcp.allowed_hosts`` answers 421, an ``Origin`` outside ``mcp.allowed_origins`` 403 —
   before authentication, so a page on another name learns nothing, not even a 401;
3. Starlette's ``AuthenticationMiddleware`` with :class:`~search2o.surfaces.mcp.auth.
   CallerBackend`, the SDK's ``AuthContextMiddleware`` and ``RequireAuthMiddleware``: no valid
   token answers 401 with ``WWW-Authenticate`` naming the metadata URL;
4. the SDK's Streamable HTTP transport (which checks the same allowlists again).

The transport is **stateless** (``stateless_http``, JSON responses): handshake-era requests
get a fresh transport each, 2026-07-28 requests carry their whole envelope, and no session
lives in a process, so any API process behind a load balancer serves any request. What the
SDK would keep per process for 2026 multi-round requests (``requestState``, sealed under a
per-process key) is never used: no tool asks the client for input.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from search2o.runtime import Runtime
from search2o.surfaces.mcp.auth import CallerBackend, CallerTokenVerifier, current_caller
from search2o.surfaces.mcp.metadata import ROOT_METADATA_PATH, metadata_document, metadata_endpoint
from search2o.surfaces.mcp.oidc import OidcVerifier
from search2o.surfaces.mcp.server import build_mcp_server
from search2o.surfaces.mcp.settings import mcp_settings
from search2o.surfaces.mcp.urls import ENDPOINT_PATH, METADATA_PATH, McpUrls

__all__ = ["McpEndpoint"]


class _AllowlistFirst:
    """Answer a request whose ``Host`` or ``Origin`` is not allowed before ``app`` sees it."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings) -> None:
        self._app = app
        self._check = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = await self._check.validate_request(Request(scope), is_post=False)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self._app(scope, receive, send)


class McpEndpoint:
    """The MCP endpoint of one app: its routes and the lifespan its transport needs.

    Args:
        runtime: the app's runtime.

    Attributes:
        urls: the addresses computed from the settings.
        app: the ASGI app served at ``/mcp`` (allowlists, authentication, the SDK's transport).

    """

    def __init__(self, runtime: Runtime) -> None:
        settings = runtime.settings
        self.urls = McpUrls.of(settings)
        self.server = build_mcp_server(runtime, self.urls, current_caller)
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(self.urls.allowed_hosts),
            allowed_origins=list(self.urls.allowed_origins),
        )
        transport = self.server.streamable_http_app(
            streamable_http_path=ENDPOINT_PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=settings.api.max_body_bytes,
            transport_security=security,
        )
        oidc = (
            OidcVerifier(runtime, mcp_settings(settings), self.urls.audience)
            if mcp_settings(settings).oidc_issuer is not None
            else None
        )
        backend = CallerBackend(runtime, CallerTokenVerifier(runtime, oidc))
        guarded = RequireAuthMiddleware(transport, [], AnyHttpUrl(self.urls.metadata))
        self.app: ASGIApp = _AllowlistFirst(
            AuthenticationMiddleware(AuthContextMiddleware(guarded), backend=backend), security
        )
        self._document = metadata_document(self.urls, mcp_settings(settings))

    def routes(self) -> list[BaseRoute]:
        """Return the routes to add to the API app: ``/mcp`` and the two metadata paths."""
        metadata = metadata_endpoint(self._document)
        return [
            Route(ENDPOINT_PATH, endpoint=self.app),
            Route(METADATA_PATH, endpoint=metadata, methods=["GET"]),
            Route(ROOT_METADATA_PATH, endpoint=metadata, methods=["GET"]),
        ]

    def running(self) -> AbstractAsyncContextManager[None]:
        """Return the context the transport serves in (its task group); enter it in the lifespan."""
        return self.server.session_manager.run()
