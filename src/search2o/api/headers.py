"""Security headers on every response (OWASP Secure Headers Project; MDN, "CSP").

* ``X-Content-Type-Options: nosniff`` everywhere, so no browser sniffs a JSON answer holding
  document text into HTML (WHATWG Fetch, "X-Content-Type-Options").
* ``Referrer-Policy: no-referrer``.
* A response that sets no ``Content-Security-Policy`` of its own gets
  ``default-src 'none'; frame-ancestors 'none'`` and ``X-Frame-Options: DENY``: an API answer
  rendered by a browser runs nothing, loads nothing and cannot be framed. HTML pages (the API
  docs) set their own policy (:mod:`search2o.api.docs_pages`).

A pure ASGI middleware: it edits the ``http.response.start`` message only, so streamed
responses (SSE) pass through unbuffered.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["API_CSP", "SecurityHeaders"]

API_CSP = "default-src 'none'; frame-ancestors 'none'"


class SecurityHeaders:
    """Add the headers of the module docstring to every HTTP response of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI call, adding headers to the response's start message."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["X-Content-Type-Options"] = "nosniff"
                headers.setdefault("Referrer-Policy", "no-referrer")
                if "content-security-policy" not in headers:
                    headers["Content-Security-Policy"] = API_CSP
                    headers.setdefault("X-Frame-Options", "DENY")
            await send(message)

        await self.app(scope, receive, send_with_headers)
