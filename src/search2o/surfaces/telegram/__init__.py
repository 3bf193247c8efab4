"""The Telegram surface: answers in chats, acknowledged at once, exactly once (docs/telegram.md).

Both ingress modes feed one pipeline (:class:`TelegramPipeline`): the webhook
``POST /telegram/webhook`` (secret header) and long polling (:class:`Poller`, ``getUpdates``
with a persisted offset) → normalise → dedupe → record → enqueue → acknowledge. The answer is
a job (:class:`TelegramAnswerer`) that calls our API through :mod:`search2o.client` with a
surface token and writes in the chat through the Bot API over httpx (:class:`BotApi`).

Modules are imported by their full names: this package re-exports nothing, so its extension
(:mod:`.extension`) and settings load without the rest of it.
"""
