"""The Slack surface's registration (entry point ``slack`` of ``search2o.extensions``).

Contributes the ``slack`` settings section, the kinds ``slack.answer`` and ``slack.rate``, the
routes ``/slack/events`` and ``/slack/interactions`` (``http`` mode) and ``search2o slack``.
Imports only its settings at import time (:mod:`search2o.extensions`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from search2o.extensions import Extension, OpenRoute
from search2o.surfaces.slack.settings import EXTRA, SlackSettings, slack_settings

if TYPE_CHECKING:
    import typer
    from fastapi import FastAPI

    from search2o.jobs.registry import JobRegistry
    from search2o.runtime import Runtime

__all__ = ["EXTENSION"]

log = logging.getLogger("search2o.api")


def _add_kinds(registry: JobRegistry, runtime: Runtime) -> None:
    """Register ``slack.answer`` and ``slack.rate`` when the section is configured.

    Raises:
        ConfigError: configured in token mode without ``slack.service_token``.
        MissingExtraError: configured without the ``slack`` extra.

    """
    slack = slack_settings(runtime.settings)
    if not slack.configured:
        return
    slack.refuse_without_service_token("slack", runtime.settings.auth_mode)
    EXTRA.require(runtime.settings)
    from search2o.surfaces.slack.surface import add_slack_kinds

    add_slack_kinds(registry, runtime)


def _add_routes(app: FastAPI, runtime: Runtime) -> AbstractAsyncContextManager[None] | None:
    """Serve ``/slack/events`` and ``/slack/interactions`` (docs/slack.md) in ``http`` mode.

    Only when the ``slack`` section is configured (the ``slack`` extra is then required, as
    :func:`search2o.extensions.check_extras` checked when the app was built). A section half
    set (one of the bot token and the signing secret) says which setting is missing, and a
    configured Slack in ``socket`` mode says that this server does not serve the routes:
    either way ``/slack/events`` would otherwise answer a bare 404 that Slack's URL check
    reports without a reason. Sets
    ``app.state.slack`` to the ingress (``None`` when not served), closed with the app.

    Raises:
        ConfigError: configured in token mode without ``slack.service_token`` (the server
            refuses to start rather than answer every question with an error).
        MissingExtraError: configured without the ``slack`` extra.

    """
    app.state.slack = None
    slack = slack_settings(runtime.settings)
    if not slack.configured:
        if slack.bot_token or slack.signing_secret:
            missing = "slack.signing_secret" if slack.bot_token else "slack.bot_token"
            log.warning("Slack is off: %s is not set (both are needed, docs/slack.md)", missing)
        return None
    slack.refuse_without_service_token("slack", runtime.settings.auth_mode)
    if slack.mode != "http":
        log.info("Slack in socket mode: /slack/events is not served; run `search2o slack socket`")
        return None
    EXTRA.require(runtime.settings)  # create_app checked it already (check_extras)
    from search2o.api.mounting import route_first
    from search2o.surfaces.slack.commands import SlashCommand
    from search2o.surfaces.slack.ingress import SlackIngress
    from search2o.surfaces.slack.pipeline import SlackPipeline
    from search2o.surfaces.slack.surface import shared_client, store

    pipeline = SlackPipeline(slack, store(runtime), runtime.jobs)
    command = SlashCommand(shared_client(runtime.settings))
    ingress = SlackIngress(slack, pipeline, command)
    route_first(app, ingress.routes())
    app.state.slack = ingress
    log.info("Slack in http mode: POST /slack/events and /slack/interactions")

    @contextlib.asynccontextmanager
    async def serving() -> AsyncIterator[None]:
        try:
            yield
        finally:
            ingress.close()

    return serving()


def _add_commands(cli: typer.Typer) -> None:
    """Add ``search2o slack`` (manifest, check, socket)."""
    from search2o.surfaces.slack.cli import slack_app

    cli.add_typer(slack_app, name="slack", rich_help_panel="Admin")


EXTENSION = Extension(
    name="slack",
    settings=SlackSettings,
    add_kinds=_add_kinds,
    add_routes=_add_routes,
    add_commands=_add_commands,
    extra=EXTRA,
    # Slack signs each request (v0 HMAC-SHA256 with the signing secret); no API caller.
    open_routes=(
        OpenRoute("/slack/events", verifier="search2o.signing:verify_slack"),
        OpenRoute("/slack/interactions", verifier="search2o.signing:verify_slack"),
    ),
)
"""The Slack surface's :class:`~search2o.extensions.Extension`."""
