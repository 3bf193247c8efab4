"""The Telegram surface's registration (entry point ``telegram`` of ``search2o.extensions``).

Contributes the ``telegram`` settings section, the kinds ``telegram.answer`` and
``telegram.rate``, the route ``POST /telegram/webhook`` (``webhook`` mode) and
``search2o telegram``. Imports only its settings at import time (:mod:`search2o.extensions`).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from search2o.extensions import Extension, OpenRoute
from search2o.surfaces.telegram.settings import TelegramSettings, telegram_settings

if TYPE_CHECKING:
    import typer
    from fastapi import FastAPI

    from search2o.jobs.registry import JobRegistry
    from search2o.runtime import Runtime

__all__ = ["EXTENSION"]


def _add_kinds(registry: JobRegistry, runtime: Runtime) -> None:
    """Register ``telegram.answer`` and ``telegram.rate`` when the section is configured.

    Raises:
        ConfigError: configured in token mode without ``telegram.service_token``.

    """
    section = telegram_settings(runtime.settings)
    if not section.configured:
        return
    section.refuse_without_service_token("telegram", runtime.settings.auth_mode)
    from search2o.surfaces.telegram.surface import add_telegram_kinds

    add_telegram_kinds(registry, runtime)


def _add_routes(app: FastAPI, runtime: Runtime) -> AbstractAsyncContextManager[None] | None:
    """Serve ``POST /telegram/webhook`` (docs/telegram.md) in ``webhook`` mode.

    Raises:
        ConfigError: configured in token mode without ``telegram.service_token``.

    """
    telegram = telegram_settings(runtime.settings)
    if not telegram.configured:
        return None
    telegram.refuse_without_service_token("telegram", runtime.settings.auth_mode)
    if telegram.mode != "webhook":
        return None
    from search2o.api.mounting import route_first
    from search2o.surfaces.telegram.ingress import TelegramWebhook
    from search2o.surfaces.telegram.surface import bot_api, pipeline

    api = bot_api(runtime.settings)  # only for one getMe when the username is not configured
    route_first(app, TelegramWebhook(telegram, pipeline(runtime, api)).routes())
    return None


def _add_commands(cli: typer.Typer) -> None:
    """Add ``search2o telegram`` (check, poll)."""
    from search2o.surfaces.telegram.cli import telegram_app

    cli.add_typer(telegram_app, name="telegram", rich_help_panel="Admin")


EXTENSION = Extension(
    name="telegram",
    settings=TelegramSettings,
    add_kinds=_add_kinds,
    add_routes=_add_routes,
    add_commands=_add_commands,
    # Telegram sends telegram.secret_token in a header, compared in constant time there.
    open_routes=(
        OpenRoute(
            "/telegram/webhook",
            verifier="search2o.surfaces.telegram.ingress:TelegramWebhook.endpoint",
        ),
    ),
)
"""The Telegram surface's :class:`~search2o.extensions.Extension`."""
