"""Sign-in routes under ``/v1/auth``: who the browser is, sign-in links, OIDC, sign-out.

* ``GET /v1/auth/session``: signed in or not, as whom, and which ways in this server offers
  (``local``: local mode signs in by itself; ``link``: ``search2o users login-link``;
  ``oidc``: the identity provider).
* ``GET /v1/auth/link/{value}``: whom a sign-in link signs in (uses nothing up: the app's
  confirmation page ``/signin/link#<value>`` shows it); ``POST /v1/auth/link/{value}``: uses
  the link and sets the session cookie. A mail scanner or link preview that opens the link
  only fetches the app's page, so the link is still there for the person.
* ``GET /v1/auth/oidc/login`` and ``GET /v1/auth/oidc/callback``: OpenID Connect
  (:mod:`search2o.api.oidc_signin`). The ``state`` is also kept in a short-lived cookie bound
  to this browser, so a callback started in another browser is refused (login CSRF; OAuth 2.0
  Security BCP, RFC 9700 section 4.7).
* ``POST /v1/auth/logout``: ends the session (CSRF-checked like every state change).

A failed sign-in sends the browser to ``/?signin_error=<code>`` and writes nothing; the code is
one of :data:`REFUSALS` (the app words each), never free text, so a crafted link cannot make
our page say anything; the reason itself is logged. The session cookie is ``HttpOnly``,
``SameSite=Lax``, ``Path=/``, and ``Secure`` unless the server binds loopback without
``web.behind_tls_proxy`` (:func:`cookie_secure`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from search2o.accounts import Principal
from search2o.api.auth import authenticate_header
from search2o.api.csrf import session_cookie
from search2o.api.deps import RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.oidc_signin import OidcSignin
from search2o.api.openapi import error_responses
from search2o.config import Settings
from search2o.errors import AuthenticationError, NotFoundError, Search2oError
from search2o.netpolicy import is_loopback_host
from search2o.runtime import Runtime
from search2o.signin import (
    COOKIE_NAME,
    OIDC_REQUEST_MINUTES,
    begin_oidc,
    end_session,
    peek_login_link,
    redeem_login_link,
    start_session,
    take_oidc,
)
from search2o.storage.models import User

__all__ = ["REFUSALS", "STATE_COOKIE", "LinkPublic", "SessionPublic", "cookie_secure", "router"]

REFUSALS = frozenset({"state", "provider", "off"})
"""Codes of a refused identity-provider sign-in: a ``state`` that is wrong, used or expired;
the identity provider failed or its answer was refused; no identity provider configured. (A
sign-in link is used by the app's own page, which is told 401 and says so itself.)"""

STATE_COOKIE = "s2o_oidc_state"
"""The cookie binding an OIDC authorization request to the browser that started it."""

_STATE_PATH = "/v1/auth/oidc"
log = logging.getLogger("search2o.api")

router = APIRouter(prefix="/v1/auth", tags=["auth"], route_class=StrictJsonRoute)


class SessionPublic(BaseModel):
    """Whether the browser is signed in, as whom, and the ways in this server offers."""

    signed_in: bool
    email: str | None = None
    name: str | None = None
    is_admin: bool = False
    methods: list[Literal["local", "link", "oidc"]]


class LinkPublic(BaseModel):
    """Whom a usable sign-in link signs in, and until when it can be used."""

    email: str
    expires_at: datetime


def cookie_secure(settings: Settings) -> bool:
    """Tell whether cookies carry ``Secure``: always, but on loopback without a TLS proxy."""
    return settings.web.behind_tls_proxy or not is_loopback_host(settings.host)


def _methods(settings: Settings) -> list[Literal["local", "link", "oidc"]]:
    if settings.auth_mode == "local":
        return ["local"]
    return ["link", "oidc"] if settings.oidc.issuer is not None else ["link"]


def _who(runtime: Runtime, request: Request) -> tuple[str, str, bool] | None:
    """Return (email, name, admin) of the browser's session or local user, ``None`` if neither."""
    peer = request.client.host if request.client else None
    try:
        caller = authenticate_header(runtime, None, peer, None, session_cookie(request.headers))
    except AuthenticationError:
        return None
    if not isinstance(caller, Principal):
        return None
    with runtime.database.session() as session:
        name = session.scalar(select(User.display_name).where(User.email == caller.email))
    return caller.email, name or caller.email, caller.is_admin


@router.get("/session", responses=error_responses(503))
def current_session(request: Request, runtime: RuntimeDep) -> SessionPublic:
    """Return who the browser is signed in as (from its cookie, or local mode), and the ways in.

    Never 401: a signed-out browser gets ``signed_in: false`` and the methods to offer.
    """
    methods = _methods(runtime.settings)
    who = _who(runtime, request)
    if who is None:
        return SessionPublic(signed_in=False, methods=methods)
    email, name, admin = who
    return SessionPublic(signed_in=True, email=email, name=name, is_admin=admin, methods=methods)


def _set_session_cookie(response: Response, runtime: Runtime, value: str) -> None:
    """Put the new session cookie on ``response`` (attributes: module docstring)."""
    settings = runtime.settings
    response.set_cookie(
        COOKIE_NAME,
        value,
        max_age=int(settings.web.session_hours * 3600),
        path="/",
        secure=cookie_secure(settings),
        httponly=True,
        samesite="lax",
    )


def _signed_in(runtime: Runtime, value: str) -> RedirectResponse:
    """Send the browser to ``/`` with the new session cookie."""
    response = RedirectResponse("/", status_code=303)
    _set_session_cookie(response, runtime, value)
    return response


def _refused(exc: Search2oError, code: str) -> RedirectResponse:
    """Send the browser to the sign-in page with ``code``; log the reason (never a secret)."""
    assert code in REFUSALS
    fields = {"code": code, "reason": exc.message[:300]}
    log.warning("sign-in refused", extra={"fields": fields})
    return RedirectResponse(f"/?{urlencode({'signin_error': code})}", status_code=303)


def _no_links_in_local_mode(runtime: Runtime) -> None:
    if runtime.settings.auth_mode == "local":
        raise NotFoundError("local mode signs in by itself: no sign-in link is needed")


@router.get("/link/{value}", responses=error_responses(401, 404, 422, 503))
def show_link(value: str, runtime: RuntimeDep) -> LinkPublic:
    """Return whom the sign-in link ``value`` signs in; the link stays unused.

    Raises:
        AuthenticationError: unknown, used or expired (401, one message for all).
        NotFoundError: local mode (it signs in by itself).

    """
    _no_links_in_local_mode(runtime)
    with runtime.database.session() as session:
        email, expires_at = peek_login_link(session, value[:200])
    return LinkPublic(email=email, expires_at=expires_at)


@router.post(
    "/link/{value}",
    response_model=SessionPublic,
    responses=error_responses(401, 403, 404, 422, 503),
)
def use_link(value: str, request: Request, runtime: RuntimeDep) -> JSONResponse:
    """Use the one-time sign-in link ``value``: set the session cookie, return the session.

    A browser signed in already is signed in as the link's user instead (its old session ends).

    Raises:
        AuthenticationError: unknown, used or expired (401); nothing is written.
        NotFoundError: local mode (it signs in by itself).

    """
    _no_links_in_local_mode(runtime)
    previous = session_cookie(request.headers)
    try:
        with runtime.database.session() as session:
            user = redeem_login_link(session, value[:200])
            cookie = start_session(session, user, "link", runtime.settings.web)
            if previous:
                end_session(session, previous)
            body = SessionPublic(
                signed_in=True,
                email=user.email,
                name=user.display_name or user.email,
                is_admin=user.is_admin,
                methods=_methods(runtime.settings),
            )
    except AuthenticationError as exc:
        log.warning("sign-in refused", extra={"fields": {"code": "link", "reason": exc.message}})
        raise
    response = JSONResponse(body.model_dump(mode="json"))
    _set_session_cookie(response, runtime, cookie)
    return response


def _oidc(request: Request) -> OidcSignin | None:
    """Return the app's OIDC relying party (one per app: it caches the provider's keys)."""
    runtime: Runtime = request.app.state.runtime
    if runtime.settings.oidc.issuer is None:
        return None
    signin: OidcSignin | None = getattr(request.app.state, "oidc_signin", None)
    if signin is None:
        signin = request.app.state.oidc_signin = OidcSignin(runtime.settings)
    return signin


@router.get(
    "/oidc/login",
    status_code=302,
    response_class=RedirectResponse,
    responses={
        303: {"description": "refused: back to the sign-in page with `?signin_error=<code>`"},
        **error_responses(503),
    },
)
async def oidc_login(request: Request, runtime: RuntimeDep) -> Response:
    """Start signing in at the identity provider (redirect there), or refuse when none is set."""
    signin = _oidc(request)
    if signin is None:
        return _refused(AuthenticationError("no identity provider is configured"), "off")

    def start() -> tuple[str, str]:
        with runtime.database.session() as session:
            pending = begin_oidc(session)
            return signin.authorization_url(pending), pending.state

    try:
        url, state = await run_in_threadpool(start)
    except AuthenticationError as exc:
        return _refused(exc, "provider")
    response = RedirectResponse(url, status_code=302)
    response.set_cookie(
        STATE_COOKIE,
        state,
        max_age=OIDC_REQUEST_MINUTES * 60,
        path=_STATE_PATH,
        secure=cookie_secure(runtime.settings),
        httponly=True,
        samesite="lax",
    )
    return response


@router.get(
    "/oidc/callback",
    status_code=303,
    response_class=RedirectResponse,
    responses=error_responses(422, 503),
)
async def oidc_callback(
    request: Request,
    runtime: RuntimeDep,
    state: Annotated[str, Query(max_length=200)] = "",
    code: Annotated[str, Query(max_length=2000)] = "",
    error: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    """Finish signing in: check ``state``, exchange ``code``, verify the ID token, sign in."""
    signin = _oidc(request)
    if signin is None:
        return _refused(AuthenticationError("no identity provider is configured"), "off")
    bound = request.cookies.get(STATE_COOKIE)

    def finish() -> str:
        if error:
            raise _RefusedError("provider", f"the identity provider answered {error[:100]!r}")
        if not state or not code:
            raise _RefusedError("provider", "the identity provider sent no code and state")
        if bound != state:
            raise _RefusedError("state", "sign-in request (state) does not belong to this browser")
        try:
            with runtime.database.session() as session:
                pending = take_oidc(session, state)
        except AuthenticationError as exc:
            raise _RefusedError("state", exc.message) from exc
        # Separate transactions: the state stays used when the exchange then fails.
        try:
            with runtime.database.session() as session:
                user = signin.complete(session, code, pending)
                return start_session(session, user, "oidc", runtime.settings.web)
        except Search2oError as exc:
            raise _RefusedError("provider", exc.message) from exc

    try:
        cookie = await run_in_threadpool(finish)
    except _RefusedError as exc:
        response: Response = _refused(exc, exc.code)
    else:
        response = _signed_in(runtime, cookie)
    response.delete_cookie(STATE_COOKIE, path=_STATE_PATH)
    return response


class _RefusedError(AuthenticationError):
    """A refused OIDC callback and the code the browser is sent back with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@router.post("/logout", status_code=204, responses=error_responses(403, 503))
def logout(request: Request, runtime: RuntimeDep) -> Response:
    """End the browser's session and clear its cookie (204 whether one was active or not)."""
    value = session_cookie(request.headers)
    if value is not None:
        with runtime.database.session() as session:
            end_session(session, value)
    response = Response(status_code=204)
    response.delete_cookie(
        COOKIE_NAME,
        path="/",
        secure=cookie_secure(runtime.settings),
        httponly=True,
        samesite="lax",
    )
    return response
