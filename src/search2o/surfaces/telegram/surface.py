"""The Telegram surface of one process, built from settings: pipeline, jobs, Bot API, check.

The API app mounts the webhook (``webhook`` mode), the job registry adds the two job kinds,
``search2o telegram poll`` feeds the pipeline from ``getUpdates`` and ``search2o telegram
check`` runs :func:`check`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from search2o.client import Client
from search2o.config import Settings
from search2o.errors import ProviderError
from search2o.jobs.registry import JobRegistry
from search2o.surfaces.budget import CallBudget
from search2o.surfaces.connect import connect_surface, shared_client
from search2o.surfaces.deliveries import DeliveryStore
from search2o.surfaces.telegram.answer import TelegramAnswerer
from search2o.surfaces.telegram.botapi import BotApi, bot_id_of
from search2o.surfaces.telegram.pipeline import ANSWER, RATE, TelegramPipeline
from search2o.surfaces.telegram.settings import telegram_settings
from search2o.surfaces.telegram.updates import DIRECT_TYPES, SURFACE, Bot

if TYPE_CHECKING:
    from search2o.runtime import Runtime

__all__ = [
    "BotIdentity",
    "add_telegram_kinds",
    "bot_api",
    "check",
    "connect",
    "deep_link",
    "pipeline",
    "store",
]


def connect(settings: Settings) -> Client:
    """Open a client of our API with the Telegram surface token (close it, or use ``with``).

    Raises:
        ConfigError: ``telegram.service_token`` is not set and the server needs tokens.

    """
    telegram = telegram_settings(settings)
    return connect_surface(settings, SURFACE, telegram.server_url, telegram.service_token)


def deep_link(settings: Settings, code: str) -> str | None:
    """Return ``https://t.me/<bot>?start=<code>``, or ``None`` without ``telegram.bot_username``.

    Opening it starts the private chat and sends ``/start <code>`` (Telegram "Deep linking":
    the parameter is up to 64 characters ``A-Z a-z 0-9 _ -``, which a link code is).
    """
    username = telegram_settings(settings).bot_username
    return f"https://t.me/{username}?start={code}" if username else None


OVERALL_BUDGET = (30, 1.0)
"""A bot's messages in all chats: about 30 a second (Bot API FAQ, "My bot is hitting limits")."""


def bot_api(settings: Settings) -> BotApi:
    """Return the Bot API with the configured token (``telegram.bot_token`` must be set).

    Its send budgets (per group: ``telegram.group_budget`` per ``telegram.group_window_s``;
    overall: :data:`OVERALL_BUDGET`) are this instance's: one per process answers, shared by
    every answer in flight.
    """
    telegram = telegram_settings(settings)
    assert telegram.bot_token is not None
    return BotApi(
        telegram.bot_token.get_secret_value(),
        telegram.api_url,
        group_budget=CallBudget(telegram.group_budget, telegram.group_window_s),
        overall_budget=CallBudget(*OVERALL_BUDGET),
    )


def store(runtime: Runtime) -> DeliveryStore:
    """Return the delivery records, knowing Telegram's private chats are direct messages."""
    return DeliveryStore(runtime.database, runtime.key_provider, {SURFACE: DIRECT_TYPES})


class BotIdentity:
    """Who the bot is: its id from the token, its username from settings or one ``getMe``.

    Args:
        settings: the ``telegram`` section's owner.
        api: asked once (``getMe``) when ``telegram.bot_username`` is not set.

    """

    def __init__(self, settings: Settings, api: BotApi) -> None:
        telegram = telegram_settings(settings)
        assert telegram.bot_token is not None
        self.id = int(bot_id_of(telegram.bot_token.get_secret_value()))
        self.api = api
        self._bot = Bot(self.id, telegram.bot_username) if telegram.bot_username else None
        self._lock = threading.Lock()

    def __call__(self) -> Bot:
        """Return the bot (the first call without a configured username asks ``getMe``).

        Raises:
            ProviderError: ``getMe`` failed.

        """
        with self._lock:
            if self._bot is None:
                me = self.api.call("getMe")
                self._bot = Bot(int(me["id"]), str(me["username"]))
            return self._bot


def pipeline(runtime: Runtime, api: BotApi) -> TelegramPipeline:
    """Return the pipeline of this process (its store, the job queue, the bot's identity)."""
    settings = runtime.settings
    return TelegramPipeline(
        telegram_settings(settings), store(runtime), runtime.jobs, BotIdentity(settings, api)
    )


def add_telegram_kinds(registry: JobRegistry, runtime: Runtime) -> TelegramAnswerer:
    """Register ``telegram.answer`` and ``telegram.rate`` in ``registry``; return their handler."""
    settings = runtime.settings
    answerer = TelegramAnswerer(
        telegram_settings(settings),
        store(runtime),
        bot_api(settings),
        shared_client(lambda: connect(settings)),
    )
    registry.add(ANSWER, answerer.answer, max_attempts=4, on_final_failure=answerer.final_failure)
    registry.add(RATE, answerer.rate, max_attempts=3)
    return answerer


def check(settings: Settings) -> tuple[bool, str]:
    """Diagnose the setup in one line: ``(ok, line)``.

    Checks, in order: the bot token is set; the service token is set (token mode: without it
    no answer reaches the API); the bot token is well formed; ``getMe`` answers; in
    ``webhook`` mode that a webhook is set (``getWebhookInfo``) and its last error; in
    ``polling`` mode that none is set.
    """
    telegram = telegram_settings(settings)
    if not telegram.configured:
        return False, "telegram: off — set SEARCH2O_TELEGRAM__BOT_TOKEN (from @BotFather)"
    problem = telegram.service_token_problem("telegram", settings.auth_mode)
    if problem is not None:  # before anything else: without it no answer reaches the API
        return False, f"telegram: {problem}"
    try:
        assert telegram.bot_token is not None
        bot_id_of(telegram.bot_token.get_secret_value())
    except ValueError as exc:
        return False, f"telegram: bad telegram.bot_token — {exc}"
    api = bot_api(settings)
    try:
        me = api.call("getMe")
        info = api.call("getWebhookInfo")
    except ProviderError as exc:
        return False, f"telegram: {exc.message}"
    finally:
        api.close()
    url = str(info.get("url") or "")
    who = f"@{me.get('username')} ({me.get('id')})"
    if telegram.mode == "webhook":
        if not url:
            return False, f"telegram: {who} but no webhook is set — call setWebhook with the secret"
        error = info.get("last_error_message")
        if error:
            return False, f"telegram: {who} webhook {url} last failed: {error}"
        pending = info.get("pending_update_count", 0)
        return True, f"telegram: ok — {who}, webhook {url}, {pending} pending"
    if url:
        return False, f"telegram: {who} has a webhook ({url}); polling will remove it"
    return True, f"telegram: ok — {who}, polling"
