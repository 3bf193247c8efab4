"""The Telegram surface: answers in chats, acknowledged at once, exactly once (docs/telegram.md).

Both ingress modes feed one pipeline (:class:`TelegramPipeline`): the webhook
``POST /telegram/webhook`` (secret header) and long polling (:class:`Poller`, ``getUpdates``
with a persisted offset) → normalise → dedupe → record → enqueue → acknowledge. The answer is
a job (:class:`TelegramAnswerer`) that calls our API through :mod:`search2o.client` with a
surface token and writes in the chat through the Bot API over httpx (:class:`BotApi`).
"""

from search2o.surfaces.telegram.answer import TelegramAnswerer
from search2o.surfaces.telegram.botapi import BotApi, TelegramCallError
from search2o.surfaces.telegram.ingress import WEBHOOK_PATH, TelegramWebhook
from search2o.surfaces.telegram.pipeline import ANSWER, RATE, TelegramPipeline
from search2o.surfaces.telegram.polling import Poller
from search2o.surfaces.telegram.surface import (
    BotIdentity,
    add_telegram_kinds,
    bot_api,
    check,
    connect,
    pipeline,
)

__all__ = [
    "ANSWER",
    "RATE",
    "WEBHOOK_PATH",
    "BotApi",
    "BotIdentity",
    "Poller",
    "TelegramAnswerer",
    "TelegramCallError",
    "TelegramPipeline",
    "TelegramWebhook",
    "add_telegram_kinds",
    "bot_api",
    "check",
    "connect",
    "pipeline",
]
