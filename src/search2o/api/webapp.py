"""The Web App at ``/``: the built single-page app from the package, under a strict CSP.

``npm run build`` in ``web/`` writes the app into ``search2o/webapp/dist`` (the Python build
runs it: ``hatch_build.py``), so an installed package serves it without Node.

:class:`WebApp` is a pure ASGI middleware that answers only ``GET``/``HEAD`` requests for paths
outside ``/v1/`` that **no route of the API knows** (so ``/docs`` and every ``/v1/`` answer,
404s and 405s included, are untouched): files under ``/assets/`` are served as built
(content-hashed names, cached for a year, ``immutable``, RFC 8246); every other path
answers ``index.html`` (``no-cache``), so a client route such as ``/c/<id>`` survives a
reload (the "history API fallback").

The app's HTML carries :data:`APP_CSP` (W3C CSP Level 3): scripts, styles, connections and
images from this origin only (images also ``data:``), no plugins, no ``<base>`` rewriting, no
form posts elsewhere, framed only by this origin. Vite emits no inline script or style
(``assetsInlineLimit: 0``), so no hash or nonce is needed. Every other response keeps the API's
``default-src 'none'`` (:mod:`search2o.api.headers`).

When the package was built without the app (a source checkout before ``npm run build``), app
paths answer 503 with a page saying how to build it; the API works as before.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Match, Router
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from search2o.api.errors import error_response
from search2o.errors import NotFoundError

__all__ = ["APP_CSP", "WebApp", "dist_folder"]

APP_CSP = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "manifest-src 'self'",
        "frame-ancestors 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "object-src 'none'",
    ]
)
"""The Content-Security-Policy of the app's pages (see the module docstring)."""

API_PREFIX = "/v1/"
"""Paths under it are the API's, routed or not: an unknown one is the API's 404, never HTML."""
ASSET_CACHE = "public, max-age=31536000, immutable"
_MISSING = """<!doctype html><html lang="en"><meta charset="utf-8"><title>search2o</title>
<h1>The Web App is not built</h1>
<p>Run <code>npm ci &amp;&amp; npm run build</code> in <code>web/</code> (or
<code>pip install -e .</code>, which does it). The API is at <code>/v1</code>, its pages at
<a href="/docs">/docs</a>.</p></html>"""


def dist_folder() -> Path:
    """Return the folder of the built app inside the installed package (it may not exist)."""
    return Path(str(files("search2o"))) / "webapp" / "dist"


def _page_headers(cache: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": APP_CSP,
        "Cache-Control": cache,
        "X-Frame-Options": "SAMEORIGIN",
    }


class WebApp:
    """Serve the built app of ``dist`` for paths the API's ``router`` does not route.

    Args:
        app: the application behind it (the API).
        router: the API's router, asked whether a path is one of its routes.
        dist: the built app (default :func:`dist_folder`).

    """

    def __init__(self, app: ASGIApp, router: Router, dist: Path | None = None) -> None:
        self.app = app
        self.router = router
        folder = dist or dist_folder()
        self.index = folder / "index.html"
        self.assets = StaticFiles(directory=folder / "assets", check_dir=False)

    def _is_api(self, scope: Scope) -> bool:
        path: str = scope["path"]
        if path == "/v1" or path.startswith(API_PREFIX):
            return True
        return any(route.matches(scope)[0] is not Match.NONE for route in self.router.routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI call (see the class docstring)."""
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD") or self._is_api(scope):
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith("/assets/"):
            await self._asset(scope, receive, send)
            return
        response: Response
        if self.index.is_file():
            response = FileResponse(
                self.index, media_type="text/html", headers=_page_headers("no-cache")
            )
        else:
            response = HTMLResponse(_MISSING, status_code=503, headers=_page_headers("no-store"))
        await response(scope, receive, send)

    async def _asset(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_cached(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                MutableHeaders(scope=message)["Cache-Control"] = ASSET_CACHE
            await send(message)

        inner = {**scope, "path": scope["path"][len("/assets") :], "root_path": ""}
        try:
            await self.assets(inner, receive, send_cached)
        except HTTPException:  # no such file: a 404 in our error body
            missing = NotFoundError(f"no such file {scope['path']}")
            await error_response(missing)(scope, receive, send)
