"""The Slack surface of one process: its store, pipeline, jobs and Web API, from settings.

Built from a runtime whose ``slack`` section is configured: the API app mounts the routes
(``http`` mode), the job registry adds the job kinds, ``search2o slack socket`` feeds the
pipeline from Socket Mode. How jobs reach our API is
:mod:`search2o.surfaces.connect`, shared with the other messenger surfaces.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from search2o.client import Client
from search2o.config import Settings
from search2o.jobs.registry import JobRegistry
from search2o.surfaces import connect as connecting
from search2o.surfaces.deliveries import DeliveryStore
from search2o.surfaces.slack.answer import SlackAnswerer
from search2o.surfaces.slack.events import DIRECT_TYPES, SURFACE
from search2o.surfaces.slack.pipeline import ANSWER, RATE
from search2o.surfaces.slack.settings import slack_settings
from search2o.surfaces.slack.webapi import SlackApi, UpdateBudget

if TYPE_CHECKING:
    from search2o.runtime import Runtime

__all__ = ["add_slack_kinds", "connect", "server_url", "shared_client", "store"]


def server_url(settings: Settings) -> str:
    """Where answers reach our API: ``slack.server_url``, else this machine's own server.

    See :func:`search2o.surfaces.connect.server_url`.
    """
    return connecting.server_url(settings, slack_settings(settings).server_url)


def connect(settings: Settings) -> Client:
    """Open a client of our API with the Slack surface token (close it, or use ``with``).

    Raises:
        ConfigError: ``slack.service_token`` is not set and the server needs tokens.

    """
    slack = slack_settings(settings)
    return connecting.connect_surface(settings, SURFACE, slack.server_url, slack.service_token)


def shared_client(settings: Settings) -> Callable[[], Client]:
    """Return a getter of this process's one Slack client of our API (opened on first use).

    Raises (from the getter):
        ConfigError: as :func:`connect`.

    """
    return connecting.shared_client(lambda: connect(settings))


def store(runtime: Runtime) -> DeliveryStore:
    """Return the delivery records, knowing Slack's ``im`` channels are direct messages."""
    return DeliveryStore(runtime.database, runtime.key_provider, {SURFACE: DIRECT_TYPES})


def add_slack_kinds(registry: JobRegistry, runtime: Runtime) -> SlackAnswerer:
    """Register ``slack.answer`` and ``slack.rate`` in ``registry``; return their handler."""
    settings = runtime.settings
    slack = slack_settings(settings)
    assert slack.bot_token is not None
    answerer = SlackAnswerer(
        slack,
        store(runtime),
        SlackApi(slack.bot_token.get_secret_value(), slack.api_url),
        UpdateBudget(slack.update_budget, slack.update_window_s),
        shared_client(settings),
    )
    registry.add(ANSWER, answerer.answer, max_attempts=4, on_final_failure=answerer.final_failure)
    registry.add(RATE, answerer.rate, max_attempts=3)
    return answerer
