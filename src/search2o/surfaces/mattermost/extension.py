"""The Mattermost surface's registration (entry point ``mattermost`` of ``search2o.extensions``).

Contributes the ``mattermost`` settings section, the kinds ``mattermost.answer`` and
``mattermost.rate``, the routes ``/mattermost/actions`` and ``/mattermost/command`` and
``search2o mattermost``. Imports only its settings at import time (:mod:`search2o.extensions`).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from search2o.extensions import Extension, OpenRoute
from search2o.surfaces.mattermost.settings import MattermostSettings, mattermost_settings

if TYPE_CHECKING:
    import typer
    from fastapi import FastAPI

    from search2o.jobs.registry import JobRegistry
    from search2o.runtime import Runtime

__all__ = ["EXTENSION"]


def _add_kinds(registry: JobRegistry, runtime: Runtime) -> None:
    """Register ``mattermost.answer`` and ``mattermost.rate`` when the section is configured.

    Raises:
        ConfigError: configured in token mode without ``mattermost.service_token``.

    """
    section = mattermost_settings(runtime.settings)
    if not section.configured:
        return
    section.refuse_without_service_token("mattermost", runtime.settings.auth_mode)
    from search2o.surfaces.mattermost.surface import add_mattermost_kinds

    add_mattermost_kinds(registry, runtime)


def _add_routes(app: FastAPI, runtime: Runtime) -> AbstractAsyncContextManager[None] | None:
    """Serve ``/mattermost/actions`` and ``/mattermost/command`` (docs/mattermost.md).

    Raises:
        ConfigError: configured in token mode without ``mattermost.service_token``.

    """
    section = mattermost_settings(runtime.settings)
    if not section.configured:
        return None
    section.refuse_without_service_token("mattermost", runtime.settings.auth_mode)
    from search2o.api.mounting import route_first
    from search2o.surfaces.mattermost.surface import ingress, rest_api

    api = rest_api(runtime.settings)  # only for one GET /users/me (who the bot is)
    route_first(app, ingress(runtime, api).routes())
    return None


def _add_commands(cli: typer.Typer) -> None:
    """Add ``search2o mattermost`` (check, listen)."""
    from search2o.surfaces.mattermost.cli import mattermost_app

    cli.add_typer(mattermost_app, name="mattermost", rich_help_panel="Admin")


EXTENSION = Extension(
    name="mattermost",
    settings=MattermostSettings,
    add_kinds=_add_kinds,
    add_routes=_add_routes,
    add_commands=_add_commands,
    # The slash command carries mattermost.command_token; a button, its signed context.
    open_routes=(
        OpenRoute(
            "/mattermost/command",
            verifier="search2o.surfaces.mattermost.ingress:MattermostIngress.command",
        ),
        OpenRoute(
            "/mattermost/actions", verifier="search2o.surfaces.mattermost.buttons:verify_context"
        ),
    ),
)
"""The Mattermost surface's :class:`~search2o.extensions.Extension`."""
