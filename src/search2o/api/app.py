"""The app factory: ``create_app(settings)`` builds a FastAPI app with its own runtime.

Nothing is created at import time; the runtime (database, migrations) opens when the factory
runs and closes with the app's lifespan, which also runs this process's job consumer. Every
request is logged as one structured line, counted and (with tracing on) traced by the
outermost middleware (:mod:`search2o.api.telemetry`).

``search2o serve --workers N`` runs the factory in each worker process with no arguments
(``uvicorn search2o.api.app:create_app --factory``): settings then come from the environment,
which the CLI sets from its options.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import version

from fastapi import APIRouter, Depends, FastAPI
from fastapi.routing import APIRoute
from starlette.routing import compile_path
from starlette.types import Scope

from search2o.api.docs_pages import install_docs_pages
from search2o.api.errors import install_error_handlers
from search2o.api.extension_routes import add_extension_routes
from search2o.api.headers import SecurityHeaders
from search2o.api.ingress import BodyBound, Ingress, path_needs_caller
from search2o.api.openapi import install_openapi
from search2o.api.param_texts import refuse_unreadable_parameters
from search2o.api.readiness import ProbeThread
from search2o.api.routers import (
    admin_views,
    agents,
    auth,
    chat,
    conversation_pages,
    conversations,
    documents,
    health,
    jobs,
    me,
    me_tokens,
    memories,
    metrics,
    passages,
    runs,
    search,
    surfaces,
    users,
    waiting,
)
from search2o.api.telemetry import Telemetry
from search2o.api.webapp import WebApp
from search2o.config import Settings, load_settings
from search2o.errors import ConfigError
from search2o.extensions import check_extras
from search2o.logs import configure_logging
from search2o.observability.jobs import instrument_queue
from search2o.observability.metrics import process_metrics
from search2o.observability.tracing import Tracing
from search2o.runtime import Runtime
from search2o.storage.db import Database

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
            here, before anything opens, so no ASGI server can skip it; tracing is on without
            the ``otel`` extra.
        MissingExtraError: a setting turns on a surface whose extra is not installed
            (:func:`search2o.extensions.check_extras`).
        StorageError: the database cannot be opened.

    """
    settings = settings or (runtime.settings if runtime else load_settings())
    problem = settings.local_mode_problem()
    if problem is not None:
        raise ConfigError(problem)
    check_extras(settings)  # a configured surface without its extra: refused, setting named
    configure_logging(settings.log_level, settings.log_format)
    tracing = Tracing.open(settings.tracing)
    owned = runtime is None
    try:
        rt = runtime or Runtime(settings)
    except BaseException:
        if tracing is not None:
            tracing.close()
        raise
    probe = ProbeThread.create()

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
            instrument_queue(queue, tracing)
            await asyncio.to_thread(queue.start_consumer)
        async with AsyncExitStack() as stack:
            for context in serving:  # an extension's transport serves inside the lifespan
                await stack.enter_async_context(context)
            yield
        # SIGTERM: uvicorn has stopped accepting and given responses in flight serve.drain_s;
        # now running jobs finish or are released, and answers still running store their
        # partial text (followable from any process) before the database closes.
        await asyncio.to_thread(queue.stop_consumer)
        await rt.chat.close()
        await rt.chat_models.aclose()  # the model clients of this loop, before it ends
        probe.close()
        if tracing is not None:
            tracing.close()
        if owned:
            rt.close()

    app = FastAPI(
        title="search2o",
        version=version("search2o"),
        description=API_DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        # Every route: a path or query parameter that is not UTF-8 or holds a NUL is a 422.
        dependencies=[Depends(refuse_unreadable_parameters)],
    )
    app.state.runtime = rt
    app.state.ready_probe = probe
    app.state.head_revision = Database.head_revision()
    install_error_handlers(app)
    routers = [
        module.router
        for module in (
            health,
            auth,
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
            me_tokens,
            admin_views,
            users,
            passages,
            waiting,
            metrics,
        )
    ]
    for router in routers:
        app.include_router(router)
    # Every extension's routes (surfaces, connectors: docs/architecture.md); what each returns
    # runs while the app serves; the routes it did not declare open need a caller.
    added = add_extension_routes(app, rt)
    serving = added.serving
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
        needs_caller=lambda path: path_needs_caller(path) or added.needs_caller(path),
    )
    app.add_middleware(SecurityHeaders)

    app.add_middleware(
        Telemetry,
        metrics=process_metrics(),
        tracing=tracing,
        local_mode=settings.auth_mode == "local",
        route_of=_route_templates(routers),
    )
    return app


def _route_templates(routers: list[APIRouter]) -> Callable[[Scope], str | None]:
    """Return a lookup of the path template a request's path matches (``None``: no route).

    For requests refused before routing (401, 413), which FastAPI never tagged. It reads the
    routers' own routes (full paths, their prefix included) rather than the app's route list,
    whose entries for included routers carry no path in recent FastAPI versions.
    """
    compiled = [
        (compile_path(route.path)[0], route.path)
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute)
    ]

    def route_of(scope: Scope) -> str | None:
        path = scope.get("path", "")
        return next((template for regex, template in compiled if regex.match(path)), None)

    return route_of


API_DESCRIPTION = """Conversations with your company's knowledge and agents.

**Text only.** Every string this API returns — answers, hits, titles, citations, headings,
file names — is plain text taken from documents and users. Clients must render it as text (or
sanitise it as untrusted HTML/Markdown); it is never escaped or marked up for a page. Citation
`url`s are `http`/`https` only.

**Errors** answer with one body, `{"detail": {"error": <class>, "message": ..., "field"?,
"reason"?}}`; bad input is 422 naming the field and the rule and changes nothing. Bodies are
bounded (413), a request without a valid token is refused before its body is read (401).
"""
