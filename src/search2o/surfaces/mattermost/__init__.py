"""The Mattermost surface: thread answers, acknowledged at once, once each (docs/mattermost.md).

Three ways in feed one pipeline (:class:`MattermostPipeline`): the bot's WebSocket event stream
(:class:`Listener`, ``search2o mattermost listen``, with a watchdog and a REST backfill after
each reconnect), and the routes :class:`MattermostIngress` serves — the slash command
``POST /mattermost/command`` (token-checked) and the rating buttons' ``POST
/mattermost/actions`` (HMAC in the context). normalise → dedupe on ``post.id`` → record →
enqueue → acknowledge. The answer is a job (:class:`MattermostAnswerer`) that calls our API
through :mod:`search2o.client` with a surface token and writes in the thread through the REST
API v4 over httpx (:class:`MattermostApi`).
"""

from search2o.surfaces.mattermost.answer import MattermostAnswerer
from search2o.surfaces.mattermost.buttons import ACTIONS_PATH
from search2o.surfaces.mattermost.ingress import COMMAND_PATH, MattermostIngress
from search2o.surfaces.mattermost.listener import Listener
from search2o.surfaces.mattermost.pipeline import ANSWER, RATE, MattermostPipeline
from search2o.surfaces.mattermost.restapi import MattermostApi, MattermostCallError
from search2o.surfaces.mattermost.surface import (
    BotIdentity,
    add_mattermost_kinds,
    check,
    connect,
    ingress,
    pipeline,
    rest_api,
    store,
)

__all__ = [
    "ACTIONS_PATH",
    "ANSWER",
    "COMMAND_PATH",
    "RATE",
    "BotIdentity",
    "Listener",
    "MattermostAnswerer",
    "MattermostApi",
    "MattermostCallError",
    "MattermostIngress",
    "MattermostPipeline",
    "add_mattermost_kinds",
    "check",
    "connect",
    "ingress",
    "pipeline",
    "rest_api",
    "store",
]
