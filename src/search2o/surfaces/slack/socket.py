"""Socket Mode: Slack's deliveries over a WebSocket this process opens (no inbound port).

``search2o slack socket`` runs :func:`run_socket`: ``slack_sdk``'s Socket Mode client connects
with the app token (``apps.connections.open`` gives the URL; Slack API docs, "Using Socket
Mode"), reconnects after a ``disconnect`` or a lost connection, and hands each envelope to
:func:`handle_envelope`, which feeds the same pipeline as HTTP and then acknowledges the
``envelope_id``. An envelope whose pipeline step failed (the database was away) is not
acknowledged, so Slack sends it again (with ``retry_attempt``), where the dedupe makes the
re-send harmless. Answers are jobs: a ``serve`` or ``worker`` process runs them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from search2o.errors import ConfigError, ProviderError
from search2o.surfaces.slack.commands import SlashCommand
from search2o.surfaces.slack.pipeline import SlackPipeline
from search2o.surfaces.slack.settings import slack_settings
from search2o.surfaces.slack.surface import shared_client, store

if TYPE_CHECKING:
    from search2o.runtime import Runtime

__all__ = ["handle_envelope", "run_socket"]

log = logging.getLogger("search2o.slack")


def handle_envelope(
    pipeline: SlackPipeline, command: SlashCommand, request: SocketModeRequest
) -> SocketModeResponse | None:
    """Take one envelope; return the acknowledgement to send (``None``: do not acknowledge).

    ``events_api`` → the pipeline's events; ``interactive`` → its interactions;
    ``slash_commands`` → the command, whose answer rides on the acknowledgement.
    """
    payload: dict[str, Any] = request.payload if isinstance(request.payload, dict) else {}
    try:
        if request.type == "events_api":
            pipeline.take_event(payload)
        elif request.type == "interactive":
            pipeline.take_interaction(payload)
        elif request.type == "slash_commands":
            form = {k: str(v) for k, v in payload.items()}
            return SocketModeResponse(request.envelope_id, asyncio.run(command(form)))
    except Exception:
        log.exception("slack socket envelope %s not taken; Slack will resend it", request.type)
        return None
    return SocketModeResponse(request.envelope_id)


def run_socket(runtime: Runtime, stop: threading.Event) -> None:
    """Hold a Socket Mode connection until ``stop`` is set.

    Raises:
        ConfigError: Slack is not configured, or ``slack.app_token`` is missing.
        ProviderError: Slack refused the app token, or ``slack.api_url`` cannot be reached
            (``apps.connections.open``, the first call; the CLI prints it as one line).

    """
    slack = slack_settings(runtime.settings)
    if not slack.configured:
        raise ConfigError(
            "Slack is not configured: set SEARCH2O_SLACK__BOT_TOKEN and "
            "SEARCH2O_SLACK__SIGNING_SECRET (docs/slack.md)"
        )
    if slack.app_token is None or not slack.app_token.get_secret_value():
        raise ConfigError(
            "Socket Mode needs slack.app_token (SEARCH2O_SLACK__APP_TOKEN, an xapp- token with "
            "connections:write)"
        )
    pipeline = SlackPipeline(slack, store(runtime), runtime.jobs)
    command = SlashCommand(shared_client(runtime.settings))
    client = SocketModeClient(
        app_token=slack.app_token.get_secret_value(),
        web_client=WebClient(base_url=slack.api_url),
        logger=log,
    )

    def on_request(socket: SocketModeClient, request: SocketModeRequest) -> None:
        ack = handle_envelope(pipeline, command, request)
        if ack is not None:
            socket.send_socket_mode_response(ack)

    client.socket_mode_request_listeners.append(on_request)  # type: ignore[arg-type]
    try:
        client.connect()
    except SlackApiError as exc:
        error = exc.response.get("error") if exc.response is not None else None
        raise ProviderError(
            f"slack.app_token (SEARCH2O_SLACK__APP_TOKEN) refused by Slack: {error or exc}"
        ) from exc
    except OSError as exc:  # urllib's URLError is an OSError
        reason = getattr(exc, "reason", None) or exc
        raise ProviderError(
            f"cannot reach slack.api_url {slack.api_url} (SEARCH2O_SLACK__API_URL): {reason}"
        ) from exc
    try:
        stop.wait()
    finally:
        client.close()
