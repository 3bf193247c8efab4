"""The MCP server's registration (entry point ``mcp`` of ``search2o.extensions``).

Contributes the ``mcp`` settings section, the endpoint ``/mcp`` with its RFC 9728 metadata,
and ``search2o mcp`` (stdio). Imports only its settings at import time
(:mod:`search2o.extensions`).
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from search2o.errors import MissingExtraError
from search2o.extensions import Extension, OpenRoute
from search2o.surfaces.mcp.settings import EXTRA, McpSettings, mcp_settings

if TYPE_CHECKING:
    import typer
    from fastapi import FastAPI

    from search2o.runtime import Runtime

__all__ = ["EXTENSION"]

log = logging.getLogger("search2o.api")


def _add_routes(app: FastAPI, runtime: Runtime) -> AbstractAsyncContextManager[None] | None:
    """Serve the MCP endpoint at ``/mcp`` (docs/mcp.md) unless ``mcp.enabled`` is false.

    Without the ``mcp`` extra installed the API serves without it and says so once, unless
    ``mcp.enabled`` was set (:data:`EXTRA`: the server then refuses to start). Sets
    ``app.state.mcp`` to the endpoint (``None`` when not served); its transport runs while the
    app serves (the returned context).
    """
    app.state.mcp = None
    if not mcp_settings(runtime.settings).enabled:
        return None
    try:
        EXTRA.check()
    except MissingExtraError as exc:
        # Not asked for (on by default; the README's install has no mcp extra): the endpoint
        # is simply off, said once at info level. Asked for, the app was refused before this
        # (check_extras), naming mcp.enabled.
        log.info("MCP endpoint off: %s", exc.message)
        return None
    from search2o.surfaces.mcp.http import McpEndpoint

    endpoint = McpEndpoint(runtime)
    app.router.routes.extend(endpoint.routes())
    app.state.mcp = endpoint
    return endpoint.running()


def _add_commands(cli: typer.Typer) -> None:
    """Add ``search2o mcp`` (the MCP server over stdio)."""
    from search2o.surfaces.mcp.cli import mcp_stdio

    cli.command("mcp", rich_help_panel="Run")(mcp_stdio)


EXTENSION = Extension(
    name="mcp",
    settings=McpSettings,
    add_routes=_add_routes,
    add_commands=_add_commands,
    extra=EXTRA,
    # /mcp checks its own bearer tokens (ours, or the identity provider's JWTs); the metadata
    # documents are public by design (RFC 9728, section 3).
    open_routes=(
        OpenRoute("/mcp", verifier="search2o.surfaces.mcp.auth:CallerBackend.authenticate"),
        OpenRoute(
            "/.well-known/oauth-protected-resource/mcp",
            public="RFC 9728 protected resource metadata: public by design",
        ),
        OpenRoute(
            "/.well-known/oauth-protected-resource",
            public="RFC 9728 protected resource metadata: public by design",
        ),
    ),
)
"""The MCP server's :class:`~search2o.extensions.Extension`."""
