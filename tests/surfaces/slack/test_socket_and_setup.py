"""Socket Mode against a fake Socket Mode end, and ``search2o slack manifest`` / ``check``."""

from __future__ import annotations

import json
import threading

import pytest
from typer.testing import CliRunner

from search2o.cli import app
from search2o.errors import ProviderError
from search2o.surfaces.slack.manifest import BOT_SCOPES, check
from search2o.surfaces.slack.settings import SlackSettings
from search2o.surfaces.slack.socket import run_socket
from tests.conftest import free_port
from tests.surfaces.slack.conftest import SlackFactory
from tests.surfaces.slack.fake_slack import (
    BOT_USER,
    SCOPES,
    FakeSlack,
    FakeSocketMode,
    event_callback,
    message_event,
)


def test_socket_mode_acks_every_envelope_ignores_resends_and_reconnects(
    slack_env: SlackFactory,
) -> None:
    env = slack_env(app_token="xapp-test")
    socket = FakeSocketMode()
    env.fake.socket = socket
    stop = threading.Event()
    runner = threading.Thread(target=run_socket, args=(env.runtime, stop), daemon=True)
    runner.start()
    try:
        socket.wait_connected(1)
        first = message_event(f"<@{BOT_USER}> vacation?", "1700000901.000100", kind="app_mention")
        socket.send("events_api", event_callback(first, "EvS1"), "env-1")
        socket.wait_ack("env-1")
        socket.send("events_api", event_callback(first, "EvS1", retry_attempt=1), "env-1b", 1)
        socket.wait_ack("env-1b")
        env.settled(1)
        socket.disconnect()  # Slack rotates the connection; the client opens a new one
        socket.wait_connected(2)
        second = message_event("and parking?", "1700000902.000100", channel="D1", channel_type="im")
        socket.send("events_api", event_callback(second, "EvS2"), "env-2")
        socket.wait_ack("env-2")
        command = {"command": "/search2o", "text": "help", "team_id": "T1", "user_id": "U1"}
        socket.send("slash_commands", command, "env-3")
        ack = socket.wait_ack("env-3")
        rows = env.settled(2)
    finally:
        stop.set()
        runner.join(timeout=20)
        socket.close()
    assert not runner.is_alive()
    assert [r.event_key for r in rows] == ["EvS1", "EvS2"]
    assert len(env.fake.replies("C1", "1700000901.000100")) == 1
    assert len(env.fake.replies("D1", "1700000902.000100")) == 1
    assert "link CODE" in ack["payload"]["text"]
    assert len(env.fake.of("apps.connections.open")) >= 2


def test_socket_mode_says_in_one_line_when_slack_refuses_or_cannot_be_reached(
    slack_env: SlackFactory,
) -> None:
    env = slack_env(app_token="xapp-test")
    env.fake.fail("apps.connections.open", error="invalid_auth")
    with pytest.raises(ProviderError) as refused:
        run_socket(env.runtime, threading.Event())
    assert refused.value.message == (
        "slack.app_token (SEARCH2O_SLACK__APP_TOKEN) refused by Slack: invalid_auth"
    )
    gone = f"http://127.0.0.1:{free_port()}/api/"
    slack = env.runtime.settings.slack.model_copy(update={"api_url": gone})
    env.runtime.settings = env.runtime.settings.model_copy(update={"slack": slack})
    with pytest.raises(ProviderError) as unreachable:
        run_socket(env.runtime, threading.Event())
    assert unreachable.value.message.startswith(f"cannot reach slack.api_url {gone} ")
    assert "\n" not in unreachable.value.message


def test_the_manifest_holds_exactly_the_needed_scopes_and_urls() -> None:
    runner = CliRunner()
    result = runner.invoke(
        app, ["slack", "manifest", "--mode", "http", "--url", "https://search.example.com/"]
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads(result.output)
    assert manifest["oauth_config"]["scopes"]["bot"] == sorted(BOT_SCOPES)
    # group DMs: their messages and their threads' history (no mpim:read: nothing is listed)
    assert "mpim:history" in BOT_SCOPES and "mpim:read" not in BOT_SCOPES
    assert "message.mpim" in manifest["settings"]["event_subscriptions"]["bot_events"]
    events = manifest["settings"]["event_subscriptions"]
    assert events["request_url"] == "https://search.example.com/slack/events"
    assert manifest["settings"]["interactivity"]["request_url"].endswith("/slack/interactions")
    assert manifest["settings"]["socket_mode_enabled"] is False
    socket = json.loads(runner.invoke(app, ["slack", "manifest", "--mode", "socket"]).output)
    assert socket["settings"]["socket_mode_enabled"] is True
    assert "request_url" not in socket["settings"]["event_subscriptions"]
    refused = runner.invoke(app, ["slack", "manifest", "--mode", "http"])
    assert refused.exit_code == 2 and "--url" in refused.output
    plain = runner.invoke(app, ["slack", "manifest", "--mode", "http", "--url", "http://x"])
    assert plain.exit_code == 2 and "only to https URLs" in plain.output


def test_check_names_each_missing_scope_and_bad_token_in_one_line() -> None:
    granted = ",".join(s for s in SCOPES.split(",") if s not in ("users:read.email", "commands"))
    with FakeSlack(scopes=granted) as fake:
        good = SlackSettings(
            bot_token="xoxb-test", signing_secret="s", mode="http", api_url=fake.url
        )
        assert check(good) == [
            "missing scope users:read.email (needed to link accounts by their Slack email): "
            "add it and reinstall the app",
            "missing scope commands (needed to offer the /search2o command): add it and "
            "reinstall the app",
        ]
        bad = good.model_copy(update={"bot_token": SlackSettings(bot_token="xoxb-bad").bot_token})
        assert check(bad) == [
            "slack.bot_token (SEARCH2O_SLACK__BOT_TOKEN) refused by Slack: invalid_auth"
        ]
        socket = good.model_copy(update={"mode": "socket"})
        assert check(socket)[-1].startswith("slack.app_token is not set")
    with FakeSlack() as fake:
        fine = SlackSettings(
            bot_token="xoxb-test", signing_secret="s", mode="http", api_url=fake.url
        )
        assert check(fine) == []
