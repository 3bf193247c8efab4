"""The Mattermost surface of one process, built from settings: pipeline, jobs, REST, check.

The API app mounts the command and button routes, the job registry adds the two job kinds,
``search2o mattermost listen`` feeds the pipeline from the WebSocket and ``search2o mattermost
check`` runs :func:`check`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from search2o.client import Client
from search2o.config import Settings
from search2o.errors import ConfigError, ProviderError
from search2o.jobs.registry import JobRegistry
from search2o.surfaces.connect import connect_surface, shared_client
from search2o.surfaces.deliveries import DeliveryStore
from search2o.surfaces.mattermost.answer import MattermostAnswerer
from search2o.surfaces.mattermost.buttons import ACTIONS_PATH, button_key
from search2o.surfaces.mattermost.ingress import MattermostIngress
from search2o.surfaces.mattermost.pipeline import ANSWER, RATE, MattermostPipeline
from search2o.surfaces.mattermost.posts import DIRECT_TYPES, SURFACE, Bot
from search2o.surfaces.mattermost.restapi import MattermostApi
from search2o.surfaces.mattermost.settings import mattermost_settings
from search2o.surfaces.mcp.settings import public_url

if TYPE_CHECKING:
    from search2o.runtime import Runtime

__all__ = [
    "BotIdentity",
    "add_mattermost_kinds",
    "check",
    "connect",
    "ingress",
    "pipeline",
    "rest_api",
    "store",
]

_NEEDED = "SEARCH2O_MATTERMOST__URL and SEARCH2O_MATTERMOST__BOT_TOKEN"


def connect(settings: Settings) -> Client:
    """Open a client of our API with the Mattermost surface token (close it, or use ``with``).

    Raises:
        ConfigError: ``mattermost.service_token`` is not set and the server needs tokens.

    """
    mattermost = mattermost_settings(settings)
    return connect_surface(settings, SURFACE, mattermost.server_url, mattermost.service_token)


def _token(settings: Settings) -> str:
    token = mattermost_settings(settings).bot_token
    if token is None or mattermost_settings(settings).url is None:
        raise ConfigError(f"mattermost needs {_NEEDED}")
    return token.get_secret_value()


def rest_api(settings: Settings) -> MattermostApi:
    """Return the REST API with the configured bot token (``mattermost.url`` must be set)."""
    url = mattermost_settings(settings).url
    assert url is not None
    return MattermostApi(url, _token(settings))


def store(runtime: Runtime) -> DeliveryStore:
    """Return the delivery records, knowing Mattermost's ``D`` channels are direct messages."""
    return DeliveryStore(runtime.database, runtime.key_provider, {SURFACE: DIRECT_TYPES})


class BotIdentity:
    """Who the bot is, asked once (``GET /users/me``) and kept for the process."""

    def __init__(self, api: MattermostApi) -> None:
        self.api = api
        self._bot: Bot | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Bot:
        """Return the bot.

        Raises:
            ProviderError: ``GET /users/me`` failed.

        """
        with self._lock:
            if self._bot is None:
                me = self.api.me()
                self._bot = Bot(str(me["id"]), str(me["username"]))
            return self._bot


def pipeline(runtime: Runtime, api: MattermostApi) -> MattermostPipeline:
    """Return the pipeline of this process (its store, the job queue, the bot's identity)."""
    return MattermostPipeline(
        mattermost_settings(runtime.settings), store(runtime), runtime.jobs, BotIdentity(api)
    )


def ingress(runtime: Runtime, api: MattermostApi) -> MattermostIngress:
    """Return the command and button routes' handler."""
    settings = runtime.settings
    return MattermostIngress(
        mattermost_settings(settings),
        pipeline(runtime, api),
        button_key(_token(settings)),
        lambda: connect(settings),
    )


def add_mattermost_kinds(registry: JobRegistry, runtime: Runtime) -> MattermostAnswerer:
    """Register ``mattermost.answer`` and ``mattermost.rate``; return their handler."""
    settings = runtime.settings
    base = mattermost_settings(settings).public_url or public_url(settings)
    answerer = MattermostAnswerer(
        mattermost_settings(settings),
        store(runtime),
        rest_api(settings),
        shared_client(lambda: connect(settings)),
        button_key(_token(settings)),
        base.rstrip("/") + ACTIONS_PATH,
    )
    registry.add(ANSWER, answerer.answer, max_attempts=4, on_final_failure=answerer.final_failure)
    registry.add(RATE, answerer.rate, max_attempts=3)
    return answerer


def check(settings: Settings) -> list[tuple[bool, str]]:
    """Diagnose the setup, one ``(ok, line)`` per part.

    Checks, in order: the URL and bot token are set; ``GET /users/me`` answers and is a bot;
    the bot is in some channel; the service token (token mode); the command token (the slash
    command is then served).
    """
    mattermost = mattermost_settings(settings)
    if not mattermost.configured:
        return [(False, f"mattermost: off — set {_NEEDED}")]
    lines: list[tuple[bool, str]] = []
    api = rest_api(settings)
    try:
        me = api.me()
        who = f"@{me.get('username')} ({me.get('id')})"
        if not me.get("is_bot"):
            lines.append((False, f"mattermost: {who} is not a bot account — create a bot"))
        else:
            lines.append((True, f"mattermost: ok — {who} at {mattermost.url}"))
        channels = api.my_channels()
        lines.append(
            (
                bool(channels),
                f"mattermost: the bot is in {len(channels)} channel(s)"
                + ("" if channels else " — add it to a channel or open a DM"),
            )
        )
    except ProviderError as exc:
        return [*lines, (False, f"mattermost: {exc.message}")]
    finally:
        api.close()
    problem = mattermost.service_token_problem("mattermost", settings.auth_mode)
    if problem is not None:
        lines.append((False, f"mattermost: {problem}"))
    elif mattermost.service_token is None:
        lines.append((True, "mattermost: no service token needed (local mode)"))
    else:
        lines.append((True, "mattermost: service token set"))
    if mattermost.command_token is None:
        lines.append((True, "mattermost: slash command off (SEARCH2O_MATTERMOST__COMMAND_TOKEN)"))
    else:
        lines.append((True, "mattermost: slash command on at /mattermost/command"))
    return lines
