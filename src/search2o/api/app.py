"""The app factory: ``create_app(settings)`` builds a FastAPI app with its own runtime.

Nothing is created at import time; the runtime (database, migrations) opens when the factory
runs and closes with the app's lifespan, which also runs the retention sweeper
(:mod:`search2o.query.retention`). Every request is logged as one structured line.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import version
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from search2o.api.docs_pages import install_docs_pages
from search2o.api.errors import install_error_handlers
from search2o.api.headers import SecurityHeaders
from search2o.api.ingress import BodyBound, Ingress
from search2o.api.openapi import install_openapi
from search2o.api.routers import (
    admin_views,
    agents,
    chat,
    conversation_pages,
    conversations,
    documents,
    health,
    jobs,
    me,
    memories,
    passages,
    runs,
    search,
    surfaces,
    waiting,
)
from search2o.api.webapp import WebApp
from search2o.config import Settings, load_settings
from search2o.errors import ConfigError
from search2o.logs import configure_logging
from search2o.runtime import Runtime

if TYPE_CHECKING:
    from search2o.surfaces.mcp import McpEndpoint

__all__ = ["create_app"]

log = logging.getLogger("search2o.api")


def create_app(settings: Settings | None = None, *, runtime: Runtime | None = None) -> FastAPI:
    """Build the API.

    Args:
        settings: defaults to :func:`load_settings` (environment + TOML file).
        runtime: an already open runtime to share (tests); otherwise one is opened here and
            closed when the app shuts down.

    Raises:
        ConfigError: the settings are bad, or serve local single-user mode beyond loopback
            without ``insecure_local_mode`` (:meth:`Settings.local_mode_problem`); checked
            here, before anything opens, so no ASGI server can skip it.
        StorageError: the database cannot be opened.

    """
    settings = settings or (runtime.settings if runtime else load_settings())
    problem = settings.local_mode_problem()
    if problem is not None:
        raise ConfigError(problem)
    configure_logging(settings.log_level, settings.log_format)
    owned = runtime is None
    rt = runtime or Runtime(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.auth_mode == "local" and settings.insecure_local_mode:
            log.warning(
                "LOCAL SINGLE-USER MODE with insecure_local_mode: every client beyond loopback "
                "acts as the local admin without a token; set SEARCH2O_AUTH_MODE=token for "
                "shared use",
                extra={"fields": {"host": settings.host, "auth_mode": "local"}},
            )
        # Background work is jobs (docs/jobs.md): the retention and runs sweeps, compactions
        # and uploads run in this server's consumer threads, once across all processes.
        queue = rt.jobs
        if settings.jobs.server_workers > 0:
            await asyncio.to_thread(queue.start_consumer)
        async with AsyncExitStack() as stack:
            if app.state.mcp is not None:  # its transport serves inside the lifespan
                await stack.enter_async_context(app.state.mcp.running())
            yield
        await asyncio.to_thread(queue.stop_consumer)
        await rt.chat.close()  # answers in flight store what they wrote
        if owned:
            rt.close()

    app = FastAPI(
        title="search2o",
        version=version("search2o"),
        description=API_DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.runtime = rt
    install_error_handlers(app)
    for module in (
        health,
        search,
        documents,
        jobs,
        chat,
        runs,
        conversations,
        conversation_pages,
        memories,
        agents,
        surfaces,
        me,
        admin_views,
        passages,
        waiting,
    ):
        app.include_router(module.router)
    app.state.mcp = _mount_mcp(app, rt)
    # Swagger UI and ReDoc from the installed package, not a CDN: the API pages work offline.
    install_docs_pages(app)
    install_openapi(app, settings)
    # The Web App answers GET paths no route knows (/, /c/<id>, /assets/...).
    app.add_middleware(WebApp, router=app.router)
    limits = settings.api
    app.add_middleware(
        Ingress,
        runtime=rt,
        bounds=[
            BodyBound("api.max_upload_bytes", limits.max_upload_bytes, "POST", "/v1/documents"),
            BodyBound(
                "api.max_definition_bytes",
                limits.max_definition_bytes,
                "PUT",
                "/v1/agents/{name}",
            ),
        ],
        default=BodyBound("api.max_body_bytes", limits.max_body_bytes),
    )
    app.add_middleware(SecurityHeaders)

    @app.middleware("http")
    async def log_requests(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        # A client's request id is kept only when it is short and printable.
        given = request.headers.get("x-request-id", "")
        request_id = (
            given if given.isprintable() and 0 < len(given) <= 64 else uuid.uuid4().hex[:16]
        )
        try:
            response = await call_next(request)
        except Exception:
            log.exception("unhandled error", extra={"fields": {"request_id": request_id}})
            response = JSONResponse(
                {
                    "detail": {
                        "error": "InternalError",
                        "message": f"internal error; the server log has request {request_id}",
                    }
                },
                status_code=500,
            )
        response.headers["x-request-id"] = request_id
        if settings.auth_mode == "local":
            response.headers["x-search2o-auth-mode"] = "local-single-user"
        log.info(
            "request",
            extra={
                "fields": {
                    "request_id": request_id,
                    "method": request.method,
                    "path": request.url.path,
                    "status": response.status_code,
                    "ms": round((time.perf_counter() - started) * 1000, 1),
                }
            },
        )
        return response

    return app


def _mount_mcp(app: FastAPI, runtime: Runtime) -> McpEndpoint | None:
    """Serve the MCP endpoint at ``/mcp`` (docs/mcp.md) unless ``mcp.enabled`` is false.

    Without the ``mcp`` extra installed the API serves without it and says so once.
    """
    if not runtime.settings.mcp.enabled:
        return None
    try:
        from search2o.surfaces.mcp import McpEndpoint
    except ConfigError as exc:
        log.warning("MCP endpoint off: %s", exc.message)
        return None
    endpoint = McpEndpoint(runtime)
    app.router.routes.extend(endpoint.routes())
    return endpoint


API_DESCRIPTION = """Conversations with your company's knowledge and agents.

**Text only.** Every string this API returns — answers, hits, titles, citations, headings,
file names — is plain text taken from documents and users. Clients must render it as text (or
sanitise it as untrusted HTML/Markdown); it is never escaped or marked up for a page. Citation
`url`s are `http`/`https` only.

**Errors** answer with one body, `{"detail": {"error": <class>, "message": ..., "field"?,
"reason"?}}`; bad input is 422 naming the field and the rule and changes nothing. Bodies are
bounded (413), a request without a valid token is refused before its body is read (401).
"""
