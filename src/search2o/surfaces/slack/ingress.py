"""HTTP ingress of Slack: ``POST /slack/events`` and ``POST /slack/interactions``.

Every request is verified first (:func:`search2o.signing.verify_slack`: ``v0`` HMAC-SHA256 of
the raw body under the signing secret, a 300 s window, constant-time comparison); a request
that fails answers 401 and records nothing. Then, by body:

* JSON ``url_verification``: answered with its ``challenge`` (Slack API docs, "Events API");
* JSON ``event_callback``: the pipeline (:class:`~search2o.surfaces.slack.pipeline.
  SlackPipeline`), then an empty 200 — a retry (``X-Slack-Retry-Num``) goes through the same
  dedupe, so a retry of an event we never saw is processed;
* form ``ssl_check=1``: an empty 200 (Slack API docs, "Slash commands");
* form ``payload=<JSON>``: interactivity (the feedback buttons);
* form ``command=/search2o``: the slash command (:mod:`~search2o.surfaces.slack.commands`).

Slash commands and interactivity may be pointed at either path. Bodies are bounded by the
API's ingress (``api.max_body_bytes``) before they are read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from search2o.api.errors import error_response
from search2o.api.jsonbody import parse_json_body
from search2o.errors import AuthenticationError
from search2o.signing import SLACK_SIGNATURE_HEADER, SLACK_TIMESTAMP_HEADER, verify_slack
from search2o.surfaces.slack.pipeline import SlackPipeline
from search2o.surfaces.slack.settings import SlackSettings

__all__ = ["EVENTS_PATH", "INTERACTIONS_PATH", "SlackIngress"]

EVENTS_PATH = "/slack/events"
INTERACTIONS_PATH = "/slack/interactions"


class SlackIngress:
    """The two routes of Slack's HTTP mode.

    Args:
        settings: the ``slack`` section (its signing secret).
        pipeline: where verified deliveries go.
        command: handles a slash command's form fields, returns the JSON answer.

    """

    def __init__(
        self,
        settings: SlackSettings,
        pipeline: SlackPipeline,
        command: Callable[[dict[str, str]], Awaitable[dict[str, Any]]],
    ) -> None:
        assert settings.signing_secret is not None
        self._secret = settings.signing_secret.get_secret_value()
        self.pipeline = pipeline
        self.command = command
        # Threads of their own: the acknowledgement must not queue behind the answers in
        # flight, whose streams use the loop's default executor. Sixty-four: a request waiting
        # for its group commit (search2o.surfaces.groupcommit) holds its thread, so a burst
        # gathers into one transaction only while the threads outnumber it; with sixteen, a
        # burst of sixty waited for threads, not for the database (bench/slack.py: p99
        # 489-579 ms with sixteen, 292-386 ms with sixty-four; docs/slack.md).
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="slack-ingress")

    async def _run(self, func: Callable[[dict[str, Any]], object], value: dict[str, Any]) -> None:
        await asyncio.get_running_loop().run_in_executor(self._pool, func, value)

    def close(self) -> None:
        """Stop the ingress threads (after the server stopped taking requests)."""
        self._pool.shutdown(wait=True)

    def routes(self) -> list[BaseRoute]:
        """Return ``POST /slack/events`` and ``POST /slack/interactions``."""
        return [
            Route(EVENTS_PATH, self.endpoint, methods=["POST"]),
            Route(INTERACTIONS_PATH, self.endpoint, methods=["POST"]),
        ]

    async def endpoint(self, request: Request) -> Response:
        """Verify, then answer one request from Slack (module docstring)."""
        body = await request.body()
        headers = request.headers
        if not verify_slack(
            self._secret,
            headers.get(SLACK_TIMESTAMP_HEADER),
            body,
            headers.get(SLACK_SIGNATURE_HEADER),
        ):
            return error_response(
                AuthenticationError("the request's Slack signature is missing, stale or wrong")
            )
        if "application/json" in (headers.get("content-type") or ""):
            try:
                envelope = parse_json_body(body)
            except ValueError:
                return Response(status_code=400)
            if not isinstance(envelope, dict):
                return Response(status_code=400)
            if envelope.get("type") == "url_verification":
                return JSONResponse({"challenge": str(envelope.get("challenge", ""))})
            await self._run(self.pipeline.take_event, envelope)
            return Response(status_code=200)
        form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if form.get("ssl_check") == "1":
            return Response(status_code=200)
        if "payload" in form:
            try:
                payload = parse_json_body(form["payload"].encode())
            except ValueError:
                return Response(status_code=400)
            if isinstance(payload, dict):
                await self._run(self.pipeline.take_interaction, payload)
            return Response(status_code=200)
        if "command" in form:
            return JSONResponse(await self.command(form))
        return Response(status_code=400)
