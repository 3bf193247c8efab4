"""Cross-site request forgery: which state-changing requests a browser may have been tricked into.

A cookie is an ambient credential: a page on another site can make the browser send it. So a
``POST``/``PUT``/``PATCH``/``DELETE`` that carries the session cookie and no bearer token must
send both (OWASP CSRF Prevention Cheat Sheet, "Custom Request Headers" and "Verifying Origin
With Standard Headers"):

* the custom header ``X-Search2o-Client`` (the Web App sends ``web`` on every request): a
  cross-site page cannot add a custom header without a CORS preflight, which this server never
  grants;
* an ``Origin`` (or, when the browser sends none, the origin of ``Referer``) equal to this
  server's own origin (``<scheme>://<Host>``, https when ``web.behind_tls_proxy``) or to the
  configured public URL (``mcp.public_url``).

Using a sign-in link (``POST /v1/auth/link/{value}``) is checked the same way with or without a
cookie: a page on another site must not sign the browser in as an account of its choosing
(login CSRF; OWASP CSRF Prevention Cheat Sheet, "Login CSRF").

Local single-user mode answers tokenless loopback requests as the local user, which is just
as ambient: there a request whose ``Origin``/``Referer`` names another site is refused too
(non-browser clients send neither and are unaffected). A bearer-token request carries no
ambient credential and is not checked.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.types import Scope

from search2o.config import Settings
from search2o.signin import COOKIE_NAME, LINK_API_PATH
from search2o.surfaces.mcp.settings import mcp_settings

__all__ = [
    "CLIENT_HEADER",
    "SIGN_IN_PATH",
    "STATE_CHANGING",
    "csrf_problem",
    "origin_of",
    "own_origins",
    "session_cookie",
]

SIGN_IN_PATH = LINK_API_PATH
"""Requests under this path sign a browser in: checked as if it were signed in already."""

CLIENT_HEADER = "X-Search2o-Client"
"""The custom header the Web App sends on every request."""

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""Methods that change something (RFC 9110 section 9.2.1: the others are safe)."""


def origin_of(url: str | None) -> str | None:
    """Return ``scheme://host[:port]`` of ``url`` lower-cased, ``None`` for none or no URL."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:  # an IPv6 literal keeps its brackets (RFC 6454 section 6.1)
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    suffix = f":{port}" if port is not None and port != default else ""
    return f"{parts.scheme.lower()}://{host}{suffix}"


def own_origins(scope: Scope, settings: Settings) -> set[str]:
    """Return the origins that are this server: its ``Host`` as served, and the public URL."""
    headers = Headers(scope=scope)
    scheme = "https" if settings.web.behind_tls_proxy else scope.get("scheme", "http")
    origins = set()
    host = headers.get("host")
    if host:
        own = origin_of(f"{scheme}://{host}")
        if own is not None:
            origins.add(own)
    public = origin_of(mcp_settings(settings).public_url)
    if public is not None:
        origins.add(public)
    return origins


def session_cookie(headers: Headers) -> str | None:
    """Return the session cookie's value, ``None`` when the request has none."""
    return cookie_parser(headers.get("cookie", "")).get(COOKIE_NAME) or None


def csrf_problem(scope: Scope, settings: Settings, *, bearer: bool) -> str | None:
    """Return why a request looks forged (see the module docstring), or ``None``.

    Args:
        scope: the ASGI scope of the request.
        settings: the server's settings (auth mode, TLS proxy, public URL).
        bearer: the request sends an ``Authorization: Bearer`` token.

    """
    if scope["method"] not in STATE_CHANGING or bearer:
        return None
    headers = Headers(scope=scope)
    sent = headers.get("origin")
    origin = origin_of(sent) if sent is not None else origin_of(headers.get("referer"))
    if session_cookie(headers) is not None or scope["path"].startswith(SIGN_IN_PATH):
        if headers.get(CLIENT_HEADER) is None:
            return f"a browser request that changes something must send {CLIENT_HEADER}"
        if sent is None and headers.get("referer") is None:
            return "a browser request that changes something must send Origin or Referer"
    elif settings.auth_mode != "local" or (origin is None and sent is None):
        return None
    if origin is None or origin not in own_origins(scope, settings):
        shown = (sent if sent is not None else headers.get("referer", ""))[:200]
        return f"request from another origin ({shown!r}) refused: not this server's"
    return None
