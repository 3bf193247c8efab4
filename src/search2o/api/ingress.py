"""What every HTTP request passes before a route sees it: authentication, then a body bound.

:class:`Ingress` is a pure ASGI middleware (so it never buffers a response, and SSE streams
pass through untouched). A state-changing request under ``/v1/`` that a browser may have been
tricked into sending is refused first (403, :mod:`search2o.api.csrf`). For a path under
``/v1/`` other than the health probes and the sign-in routes (``/v1/auth/...``, which read the
session themselves) it then authenticates the caller from the ``Authorization`` and
``X-Search2o-Act-As`` headers and the session cookie
(:func:`search2o.api.auth.authenticate_header`, in a worker thread) and answers 401 (or 403 /
422 for a refused act-as header) **before a byte of the body is read**; the caller is left in
the scope's ``state`` for the route's dependency. Then the
body is bounded while it streams in by Starlette's ``RequestBodyLimitMiddleware`` (a
``Content-Length`` over the bound is refused before reading): ``api.max_upload_bytes`` for
``POST /v1/documents``, ``api.max_definition_bytes`` for ``PUT /v1/agents/{name}``,
``api.max_body_bytes`` for everything else. A body over its bound answers 413 with our error
body (:mod:`search2o.api.errors`). A refusal made before the body is read (403, 401, 413, 422)
closes the connection (``Connection: close``) when the body is chunked or over
:data:`DISCARD_BYTES`, and so does a 413 cut from a body as it streams: the server never reads
more than 1 MiB of a body it refused, whatever its length (RFC 9112, section 9.6).

Why here and not in the route: FastAPI reads and parses a route's body before it resolves the
route's dependencies, so an authentication dependency alone lets an anonymous client make the
server read (and hold) any body it sends.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from search2o.api.auth import ACT_AS_HEADER, PRINCIPAL_KEY, authenticate_header, bearer_token
from search2o.api.csrf import csrf_problem, session_cookie
from search2o.api.errors import BODY_SETTING_KEY, error_response
from search2o.errors import InputError, PayloadTooLargeError, PermissionDeniedError, Search2oError
from search2o.runtime import Runtime

__all__ = [
    "DISCARD_BYTES",
    "OPEN_PATHS",
    "SIGNIN_PREFIX",
    "BodyBound",
    "Ingress",
    "leaves_much_unread",
    "path_needs_caller",
]

OPEN_PATHS = frozenset({"/v1/health", "/v1/health/ready"})
"""Paths under ``/v1/`` that answer without a caller (probes)."""

SIGNIN_PREFIX = "/v1/auth/"
"""The sign-in routes: they answer signed-out browsers and read the session themselves."""


class BodyBound:
    """One body bound: the operation it applies to, its size in bytes and the setting holding it.

    Args:
        setting: the setting's dotted name, e.g. ``api.max_upload_bytes`` (named in the 413).
        limit: the bound in bytes.
        method: the operation's method, e.g. ``POST``; ``None`` for the default bound.
        path: the operation's path template, e.g. ``/v1/agents/{name}``.

    """

    def __init__(
        self, setting: str, limit: int, method: str | None = None, path: str | None = None
    ) -> None:
        self.setting = setting
        self.limit = limit
        self.method = method
        self._path = compile_path(path)[0] if path is not None else None

    def applies(self, scope: Scope) -> bool:
        """Tell whether a request is for this bound's operation (the default applies to all)."""
        if self._path is None:
            return True
        return scope["method"] == self.method and self._path.match(scope["path"]) is not None


class Ingress:
    """Authenticate ``/v1/`` requests before reading their bodies; bound every body.

    Args:
        app: the application behind it.
        runtime: the process's runtime (its database authenticates tokens).
        bounds: the specific bounds, tried in order.
        default: the bound of every request no specific one applies to.
        needs_caller: which paths need an authenticated caller (default: :func:`path_needs_caller`).

    """

    def __init__(
        self,
        app: ASGIApp,
        runtime: Runtime,
        bounds: list[BodyBound],
        default: BodyBound,
        needs_caller: Callable[[str], bool] | None = None,
    ) -> None:
        self.app = app
        self.runtime = runtime
        self.bounds = [*bounds, default]
        self.needs_caller = needs_caller or path_needs_caller
        self._limiters = {b.limit: RequestBodyLimitMiddleware(app, b.limit) for b in self.bounds}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI call (see the class docstring)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if scope["path"].startswith("/v1/"):
            bearer = bearer_token(headers.get("authorization")) is not None
            forged = csrf_problem(scope, self.runtime.settings, bearer=bearer)
            if forged is not None:
                await _refuse(PermissionDeniedError(forged), scope, receive, send)
                return
        if self.needs_caller(scope["path"]):
            client = scope.get("client")
            peer = client[0] if client else None
            try:
                acting = headers.getlist(ACT_AS_HEADER)
                if len(acting) > 1:  # which one would be meant is anyone's guess
                    raise InputError(ACT_AS_HEADER, "must be sent once")
                caller = await run_in_threadpool(
                    authenticate_header,
                    self.runtime,
                    headers.get("authorization"),
                    peer,
                    acting[0] if acting else None,
                    session_cookie(headers),
                )
            except Search2oError as exc:
                await _refuse(exc, scope, receive, send)
                return
            scope.setdefault("state", {})[PRINCIPAL_KEY] = caller
        bound = next(b for b in self.bounds if b.applies(scope))
        scope[BODY_SETTING_KEY] = bound.setting
        announced = Headers(scope=scope).get("content-length", "")
        if announced.isdigit() and int(announced) > bound.limit:
            # Refused from its length alone, in our body (Starlette's own 413 is plain text).
            refusal = PayloadTooLargeError(bound.limit, bound.setting)
            await _refuse(refusal, scope, receive, send)
            return
        await self._limiters[bound.limit](scope, receive, send)


DISCARD_BYTES = 1024 * 1024
"""The most a refused body the server lets the connection read on and discard (1 MiB)."""


def leaves_much_unread(headers: Headers) -> bool:
    """Tell whether refusing a request unread leaves more than :data:`DISCARD_BYTES` behind.

    True for a chunked body (its length is unknown: RFC 9112, section 7.1) and for a
    ``Content-Length`` over :data:`DISCARD_BYTES`; false for no body or a small one.
    """
    if "transfer-encoding" in headers:
        return True
    length = headers.get("content-length", "").strip()
    if not length:  # no body (RFC 9112, section 6.3, rule 7)
        return False
    return not length.isdigit() or int(length) > DISCARD_BYTES


async def _refuse(exc: Search2oError, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer ``exc`` without reading the body; close the connection if much is left unread.

    With keep-alive, the server reads and throws away the rest of a body it refused, to find
    the next request: any length, from any caller. So when more than :data:`DISCARD_BYTES`
    would be left (or an unknown length), the answer says ``Connection: close`` and the
    server stops reading (RFC 9112, section 9.6). A small rest is read and thrown away: a
    client that wrote its whole body before reading would otherwise lose the answer to the
    reset of a connection closed with bytes unread. Clients that send ``Expect:
    100-continue`` (curl, for bodies over 1 MiB) get the answer before sending a byte; httpx
    and browsers read an early answer when their write is cut.
    """
    response = error_response(exc)
    if leaves_much_unread(Headers(scope=scope)):
        response.headers["connection"] = "close"
    await response(scope, receive, send)


def path_needs_caller(path: str) -> bool:
    """Tell whether ``path`` needs a caller: ``/v1/`` paths, except the probes and sign-in.

    The app adds the routes of extensions not declared open
    (:mod:`search2o.api.extension_routes`).
    """
    return path.startswith("/v1/") and path not in OPEN_PATHS and not path.startswith(SIGNIN_PREFIX)
