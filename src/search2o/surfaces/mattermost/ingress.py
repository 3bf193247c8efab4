"""The HTTP routes Mattermost calls: the slash command and the button callbacks.

``POST /mattermost/command`` — the slash command ``/search2o`` (Mattermost docs, "Slash
commands": a form with ``token``, ``team_id``, ``channel_id``, ``channel_name``, ``user_id``,
``text``, ``trigger_id``). The token is compared with ``mattermost.command_token`` in constant
time; a missing or wrong one answers 401 and records nothing. ``/search2o link CODE`` links the
account and says so; ``/search2o`` alone helps; anything else is a question (``/search2o agent
NAME QUESTION`` runs an agent: :mod:`~search2o.surfaces.mattermost.answer`), recorded (dedupe
on ``trigger_id``) and answered by a job in the channel, in a thread of its own, the command
acknowledged at once with an ephemeral line — Mattermost waits only a few seconds for the
response.

``POST /mattermost/actions`` — a rating button's callback (JSON with ``context``,
``channel_id``, ``trigger_id``). Its context must carry our HMAC
(:mod:`~search2o.surfaces.mattermost.buttons`); a forged or altered one answers 401 and stores
nothing. A genuine click becomes a ``mattermost.rate`` job and is answered with an ephemeral
thanks. Bodies are bounded by the API's ingress (``api.max_body_bytes``).
"""

from __future__ import annotations

import asyncio
import hmac
import re
from collections.abc import Callable
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from search2o.api.errors import error_response
from search2o.api.jsonbody import parse_json_body
from search2o.client import Client
from search2o.errors import AuthenticationError, InputError
from search2o.surfaces.deliveries import Inbound
from search2o.surfaces.mattermost.answer import COMMAND_THREAD
from search2o.surfaces.mattermost.buttons import ACTIONS_PATH, verify_context
from search2o.surfaces.mattermost.pipeline import MattermostPipeline
from search2o.surfaces.mattermost.settings import MattermostSettings
from search2o.surfaces.turns import link_reply
from search2o.textrules import text_problem

__all__ = ["ACTIONS_PATH", "COMMAND_PATH", "HELP", "MattermostIngress"]

COMMAND_PATH = "/mattermost/command"
HELP = (
    "Mention me in a channel or send me a direct message to ask, or type `/search2o QUESTION`. "
    "`/search2o agent NAME QUESTION` runs an agent; reply in its thread when it asks. "
    "`/search2o link CODE` links your account (get a code in the search2o Web App)."
)
ACK = "Looking it up — the answer follows in this channel."
_ID = re.compile(r"[a-z0-9]{26}")
_LINK = re.compile(r"link\s+([0-9A-Za-z][0-9A-Za-z\- ]{4,40})", re.I)


def _ephemeral(text: str) -> JSONResponse:
    return JSONResponse({"response_type": "ephemeral", "text": text})


class MattermostIngress:
    """The routes of the command and the buttons (module docstring).

    Args:
        settings: the ``mattermost`` section.
        pipeline: where questions and clicks go.
        key: the HMAC key of button contexts.
        connect: opens a client of our API with the surface token (for ``link``).

    """

    def __init__(
        self,
        settings: MattermostSettings,
        pipeline: MattermostPipeline,
        key: str,
        connect: Callable[[], Client],
    ) -> None:
        self.settings = settings
        self.pipeline = pipeline
        self.key = key
        self.connect = connect

    def routes(self) -> list[BaseRoute]:
        """Return the actions route, and the command route when a command token is set."""
        routes: list[BaseRoute] = [Route(ACTIONS_PATH, self.actions, methods=["POST"])]
        if self.settings.command_token is not None:
            routes.append(Route(COMMAND_PATH, self.command, methods=["POST"]))
        return routes

    async def command(self, request: Request) -> Response:
        """Verify the token, then answer one ``/search2o`` (module docstring)."""
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        assert self.settings.command_token is not None
        expected = self.settings.command_token.get_secret_value().encode()
        if not hmac.compare_digest(form.get("token", "").encode(), expected):
            return error_response(
                AuthenticationError("the slash command's token is missing or wrong")
            )
        text = " ".join(form.get("text", "").split())
        user, channel = form.get("user_id", ""), form.get("channel_id", "")
        trigger = form.get("trigger_id", "")
        for field, value in (("user_id", user), ("channel_id", channel)):
            if not _ID.fullmatch(value):
                return error_response(InputError(field, "must be a Mattermost id"))
        if not text:
            return _ephemeral(HELP)
        linked = _LINK.fullmatch(text)
        bot = await asyncio.to_thread(self.pipeline.bot)
        if linked is not None:
            said = await asyncio.to_thread(self._link, bot.id, user, linked.group(1))
            return _ephemeral(said)
        if not trigger or len(trigger) > 200 or text_problem(text) is not None:
            return error_response(InputError("trigger_id", "must be Mattermost's trigger id"))
        # A direct channel's name is the two members' ids joined by "__".
        direct = form.get("channel_name", "") in (f"{bot.id}__{user}", f"{user}__{bot.id}")
        key = f"{COMMAND_THREAD}{trigger[:180]}"
        inbound = Inbound(
            surface="mattermost",
            workspace=bot.id,
            channel=channel,
            channel_type="D" if direct else "O",
            user=user,
            message_key=key,
            event_key=key,
            thread_key=key,
            text=text[: self.settings.max_question_chars],
            direct=direct,
        )
        await asyncio.to_thread(self.pipeline.take, inbound)
        return _ephemeral(ACK)

    def _link(self, workspace: str, user: str, code: str) -> str:
        with self.connect() as client:
            return link_reply(client, workspace, user, code)

    async def actions(self, request: Request) -> Response:
        """Verify a click's context, then enqueue its rating (module docstring)."""
        try:
            body = parse_json_body(await request.body())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return Response(status_code=400)
        found = verify_context(self.key, body.get("context"))
        if found is None:
            return error_response(
                AuthenticationError("the button's context does not carry our signature")
            )
        delivery, rating = found
        channel, trigger = str(body.get("channel_id") or ""), str(body.get("trigger_id") or "")
        await asyncio.to_thread(self.pipeline.take_click, delivery, rating, channel, trigger[:200])
        return JSONResponse({"ephemeral_text": "Thanks for the feedback!"})
