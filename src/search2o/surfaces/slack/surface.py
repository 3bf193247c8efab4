"""The Slack surface of one process: its pipeline, ingress, jobs and Web API, from settings.

:class:`SlackSurface` is built from a runtime whose ``slack`` section is configured; the API
app mounts its routes (``http`` mode), the job registry adds its kinds, ``search2o slack
socket`` feeds its pipeline from Socket Mode.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from search2o.client import Client
from search2o.config import Settings, SlackSettings
from search2o.errors import ConfigError
from search2o.jobs.registry import JobRegistry
from search2o.surfaces.slack.answer import SlackAnswerer
from search2o.surfaces.slack.pipeline import ANSWER, RATE
from search2o.surfaces.slack.records import DeliveryStore
from search2o.surfaces.slack.webapi import SlackApi, UpdateBudget

if TYPE_CHECKING:
    from search2o.runtime import Runtime

__all__ = ["add_slack_kinds", "connect", "server_url", "shared_client"]


def server_url(settings: Settings) -> str:
    """Where answers reach our API: ``slack.server_url``, else ``http://<host>:<port>``.

    A wildcard bind address (``0.0.0.0``, ``::``) is reached on loopback.
    """
    if settings.slack.server_url:
        return settings.slack.server_url.rstrip("/")
    host = settings.host if settings.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.port}"


def shared_client(settings: Settings) -> Callable[[], Client]:
    """Return a getter of one client of our API per process, opened on first use.

    Raises (from the getter):
        ConfigError: as :func:`connect`.

    """
    lock = threading.Lock()
    opened: list[Client] = []

    def get() -> Client:
        with lock:
            if not opened:
                opened.append(connect(settings))
            return opened[0]

    return get


def connect(settings: Settings) -> Client:
    """Open a client of our API with the surface token (close it, or use ``with``).

    Raises:
        ConfigError: ``slack.service_token`` is not set and the server needs tokens.

    """
    slack: SlackSettings = settings.slack
    token = slack.service_token.get_secret_value() if slack.service_token else None
    if token is None and settings.auth_mode == "token":
        raise ConfigError(
            "slack.service_token is not set: create one with `search2o surfaces token slack` "
            "and set SEARCH2O_SLACK__SERVICE_TOKEN"
        )
    return Client(server_url(settings), token, timeout=60.0, retries=5)


def add_slack_kinds(registry: JobRegistry, runtime: Runtime) -> SlackAnswerer:
    """Register ``slack.answer`` and ``slack.rate`` in ``registry``; return their handler."""
    settings = runtime.settings
    slack = settings.slack
    assert slack.bot_token is not None
    answerer = SlackAnswerer(
        slack,
        DeliveryStore(runtime.database, runtime.key_provider),
        SlackApi(slack.bot_token.get_secret_value(), slack.api_url),
        UpdateBudget(slack.update_budget, slack.update_window_s),
        shared_client(settings),
    )
    registry.add(ANSWER, answerer.answer, max_attempts=4)
    registry.add(RATE, answerer.rate, max_attempts=3)
    return answerer
