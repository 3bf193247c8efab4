"""The Mattermost surface: thread answers, acknowledged at once, once each (docs/mattermost.md).

Three ways in feed one pipeline (:class:`MattermostPipeline`): the bot's WebSocket event stream
(:class:`Listener`, ``search2o mattermost listen``, with a watchdog and a REST backfill after
each reconnect), and the routes :class:`MattermostIngress` serves — the slash command
``POST /mattermost/command`` (token-checked) and the rating buttons' ``POST
/mattermost/actions`` (HMAC in the context). normalise → dedupe on ``post.id`` → record →
enqueue → acknowledge. The answer is a job (:class:`MattermostAnswerer`) that calls our API
through :mod:`search2o.client` with a surface token and writes in the thread through the REST
API v4 over httpx (:class:`MattermostApi`).

Modules are imported by their full names: this package re-exports nothing, so its extension
(:mod:`.extension`) and settings load without the rest of it.
"""
