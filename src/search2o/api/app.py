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
from contextlib import asynccontextmanager
from importlib.metadata import version

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline

from search2o.api.errors import install_error_handlers
from search2o.api.routers import (
    agents,
    chat,
    conversations,
    documents,
    health,
    memories,
    search,
)
from search2o.config import Settings, load_settings
from search2o.errors import ConfigError
from search2o.logs import configure_logging
from search2o.query.retention import run_sweeper
from search2o.runtime import Runtime

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
        sweeper = (
            asyncio.get_running_loop().create_task(
                run_sweeper(rt.database, rt.vault, settings.retention)
            )
            if settings.retention.sweep_interval_s > 0
            else None
        )
        yield
        if sweeper is not None:
            sweeper.cancel()
        if owned:
            rt.close()

    # FastAPIOffline serves Swagger UI and ReDoc from the installed package, not a CDN, so the
    # API pages work on air-gapped installs.
    app = FastAPIOffline(
        title="search2o",
        version=version("search2o"),
        description="Conversations with your company's knowledge and agents.",
        lifespan=lifespan,
    )
    app.state.runtime = rt
    install_error_handlers(app)
    for module in (health, search, documents, chat, conversations, memories, agents):
        app.include_router(module.router)

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
