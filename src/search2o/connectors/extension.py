"""The sources' registration (entry point ``connectors`` of ``search2o.extensions``).

Contributes the ``connectors`` settings section, the job kinds ``sources.sync`` (one sync, on
demand or when due) and ``sources.due`` (periodic: starts the syncs that are due), the routes
under ``/v1/sources`` and ``search2o sources``. Imports only its settings at import time
(:mod:`search2o.extensions`).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from search2o.connectors.settings import ConnectorsSettings
from search2o.extensions import Extension

if TYPE_CHECKING:
    import typer
    from fastapi import FastAPI

    from search2o.jobs.registry import JobRegistry
    from search2o.runtime import Runtime

__all__ = ["EXTENSION"]


def _add_kinds(registry: JobRegistry, runtime: Runtime) -> None:
    """Register ``sources.sync`` and the periodic ``sources.due``."""
    from search2o.connectors.jobs import add_source_kinds

    add_source_kinds(registry, runtime)


def _add_routes(app: FastAPI, runtime: Runtime) -> AbstractAsyncContextManager[None] | None:
    """Serve ``/v1/sources`` (admins only), and watch folder sources while serving."""
    from search2o.connectors.api import sources_router
    from search2o.connectors.watch import watching

    app.include_router(sources_router)
    return watching(runtime)


def _add_commands(cli: typer.Typer) -> None:
    """Add ``search2o sources`` (add, list, show, update, sync, remove)."""
    from search2o.connectors.cli import register_add_commands, sources_app

    register_add_commands()
    cli.add_typer(sources_app, name="sources", rich_help_panel="Knowledge")


EXTENSION = Extension(
    name="connectors",
    settings=ConnectorsSettings,
    add_kinds=_add_kinds,
    add_routes=_add_routes,
    add_commands=_add_commands,
)
"""The sources' :class:`~search2o.extensions.Extension`."""
