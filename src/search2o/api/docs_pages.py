"""The interactive API pages, ``/docs`` (Swagger UI) and ``/redoc``, served offline and locked down.

Their scripts and styles come from the installed ``fastapi-offline`` package (no CDN), mounted at
``/static-offline-docs``. Each page carries a Content-Security-Policy that allows only this
server's own scripts plus the SHA-256 hashes of the page's inline scripts (CSP Level 3,
"hash-source"), no plugins, no framing (``frame-ancestors 'none'`` and ``X-Frame-Options:
DENY``), no base or form redirection. Swagger UI and ReDoc style their elements inline, so
``style-src`` allows ``'unsafe-inline'``; ReDoc runs its search in a worker built from a
``blob:`` URL.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

__all__ = ["STATIC_URL", "install_docs_pages", "page_csp"]

STATIC_URL = "/static-offline-docs"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def page_csp(html: str, *, workers: bool = False) -> str:
    """Return the Content-Security-Policy for an HTML page: self plus its inline scripts' hashes."""
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"
        for body in _INLINE_SCRIPT.findall(html)
    ]
    parts = [
        "default-src 'none'",
        " ".join(["script-src 'self'", *hashes]),
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'none'",
    ]
    if workers:
        parts.append("worker-src blob:")
    return "; ".join(parts)


def _page(html: str, *, workers: bool = False) -> HTMLResponse:
    csp = page_csp(html, workers=workers)
    return HTMLResponse(html, headers={"Content-Security-Policy": csp, "X-Frame-Options": "DENY"})


def install_docs_pages(app: FastAPI) -> None:
    """Add ``/docs``, ``/redoc`` and their static files to ``app`` (created with no docs URLs)."""
    title = app.title
    openapi_url = app.openapi_url or "/openapi.json"
    favicon = f"{STATIC_URL}/favicon.png"
    app.mount(STATIC_URL, StaticFiles(directory=str(files("fastapi_offline") / "static")))
    swagger = get_swagger_ui_html(
        openapi_url=openapi_url,
        title=f"{title} - Swagger UI",
        swagger_js_url=f"{STATIC_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{STATIC_URL}/swagger-ui.css",
        swagger_favicon_url=favicon,
    ).body
    redoc = get_redoc_html(
        openapi_url=openapi_url,
        title=f"{title} - ReDoc",
        redoc_js_url=f"{STATIC_URL}/redoc.standalone.js",
        redoc_favicon_url=favicon,
        with_google_fonts=False,
    ).body

    @app.get("/docs", include_in_schema=False)
    async def swagger_page() -> HTMLResponse:
        return _page(bytes(swagger).decode())

    @app.get("/redoc", include_in_schema=False)
    async def redoc_page() -> HTMLResponse:
        return _page(bytes(redoc).decode(), workers=True)
