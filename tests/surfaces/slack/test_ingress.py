"""Slack's HTTP ingress on a real server: verification, dedupe, exactly one answer.

Against the fake Slack, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator

import pytest

from search2o.api.app import create_app
from search2o.surfaces.slack.ingress import EVENTS_PATH, INTERACTIONS_PATH
from tests.jobs.conftest import wait_until
from tests.surfaces.slack.conftest import SECRET, SlackFactory
from tests.surfaces.slack.fake_slack import BOT_USER, event_callback, message_event, signed

MENTION = f"<@{BOT_USER}> How many vacation days do we get?"


def test_url_verification_and_ssl_check_are_answered(slack_env: SlackFactory) -> None:
    env = slack_env()
    challenge = env.post({"type": "url_verification", "token": "t", "challenge": "3eZbrw1aB"})
    assert challenge.status_code == 200 and challenge.json() == {"challenge": "3eZbrw1aB"}
    ssl = env.post(b"ssl_check=1&token=t", content_type="application/x-www-form-urlencoded")
    assert ssl.status_code == 200
    assert env.deliveries() == []


def test_the_webhook_routes_are_matched_before_the_apis_routers(slack_env: SlackFactory) -> None:
    # Matching a path through the nineteen API routers first cost ~1.1 ms of the event loop
    # per acknowledgement (docs/slack.md, Measured).
    env = slack_env()
    app = create_app(env.runtime.settings, runtime=env.runtime)
    try:
        first = [getattr(route, "path", None) for route in app.router.routes[:2]]
        assert first == [EVENTS_PATH, INTERACTIONS_PATH]
    finally:
        app.state.slack.close()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def api_records() -> Iterator[_Records]:
    """The ``search2o.api`` log records at INFO and above while the test runs."""
    api_log = logging.getLogger("search2o.api")
    seen = _Records()
    api_log.addHandler(seen)
    before = api_log.level
    api_log.setLevel(logging.INFO)
    try:
        yield seen
    finally:
        api_log.removeHandler(seen)
        api_log.setLevel(before)


def test_the_server_says_whether_slack_is_on_and_what_is_missing(
    slack_env: SlackFactory, api_records: _Records
) -> None:
    env = slack_env()
    seen = api_records
    settings = env.runtime.settings
    cases = {
        "http": ({}, "Slack in http mode"),
        "no secret": ({"signing_secret": None}, "slack.signing_secret is not set"),
        "no token": ({"bot_token": None}, "slack.bot_token is not set"),
        "socket": ({"mode": "socket"}, "Slack in socket mode"),
    }
    try:
        for change, said in cases.values():
            seen.records.clear()
            env.runtime.settings = settings.model_copy(
                update={"slack": settings.slack.model_copy(update=change)}
            )
            app = create_app(env.runtime.settings, runtime=env.runtime)
            if app.state.slack is not None:
                app.state.slack.close()
            assert any(said in r.getMessage() for r in seen.records), (change, said)
            assert (app.state.slack is not None) == (change == {})
    finally:
        env.runtime.settings = settings


def test_a_client_gone_before_its_body_arrived_is_bad_input_not_a_500(
    slack_env: SlackFactory, api_records: _Records
) -> None:
    env = slack_env()
    seen = api_records
    head = (
        "POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n{"
    )
    with socket.create_connection(("127.0.0.1", env.runtime.settings.port)) as sock:
        sock.sendall(head.encode())

    def logged() -> list[dict[str, object]] | None:
        lines = [getattr(r, "fields", {}) for r in seen.records]
        found = [f for f in lines if f.get("path") == EVENTS_PATH]
        return found or None

    (line,) = wait_until(logged, 10, "the request's log line")
    assert line["status"] == 422  # as any other route's body that never arrived
    assert not [r for r in seen.records if r.getMessage() == "unhandled error"]
    assert env.deliveries() == []


def test_one_event_delivered_three_more_times_gets_exactly_one_answer(
    slack_env: SlackFactory,
) -> None:
    env = slack_env()
    event = message_event(MENTION, "1700000001.000100", kind="app_mention")
    env.event(event, "Ev1")
    for retry in (1, 2, 3):  # Slack's retries after http_timeout
        env.event(event, "Ev1", retry=retry)
    (row,) = env.settled(1)
    assert row.state == "posted" and row.reply_key is not None
    replies = env.fake.replies("C1", "1700000001.000100")
    assert len(replies) == 1
    assert "Twenty-five days" in replies[0]["text"]
    assert len(env.jobs()) == 1 and env.jobs()[0].state == "done"
    assert len(env.fake.of("chat.postMessage")) == 1


def test_a_retry_whose_first_delivery_never_arrived_is_answered_once(
    slack_env: SlackFactory,
) -> None:
    env = slack_env()
    event = message_event(MENTION, "1700000002.000100", kind="app_mention")
    env.event(event, "Ev2", retry=1)  # the first delivery was lost on the way
    env.event(event, "Ev2", retry=2)
    (row,) = env.settled(1)
    assert row.state == "posted"
    assert len(env.fake.replies("C1", "1700000002.000100")) == 1


def test_app_mention_and_message_of_one_post_get_one_answer(slack_env: SlackFactory) -> None:
    env = slack_env()
    ts = "1700000003.000100"
    env.event(message_event(MENTION, ts, kind="app_mention"), "EvA")
    env.settled(1)
    # the same post as a `message` in the thread we now answer in, and a DM double
    env.event(message_event(MENTION, ts, thread_ts=ts), "EvB")
    env.event(message_event(MENTION, ts, thread_ts=ts), "EvB", retry=1)
    time.sleep(0.3)
    assert len(env.deliveries()) == 1
    assert len(env.fake.replies("C1", ts)) == 1


IGNORED = {
    "own-bot": message_event(
        "hi", "1700000004.000001", channel="D1", channel_type="im", user=BOT_USER
    ),
    "slackbot": message_event(
        "hi", "1700000004.000002", channel="D1", channel_type="im", user="USLACKBOT"
    ),
    "other-bot": message_event(
        "hi", "1700000004.000003", channel="D1", channel_type="im", bot_id="B9"
    ),
    "edit": message_event(
        "hi", "1700000004.000004", channel="D1", channel_type="im", subtype="message_changed"
    ),
    "join": message_event(
        "hi", "1700000004.000005", channel="D1", channel_type="im", subtype="channel_join"
    ),
    "plain-channel": message_event("no mention, no thread of ours", "1700000004.000006"),
    "empty": message_event(f"<@{BOT_USER}>", "1700000004.000007", kind="app_mention"),
}


def test_non_content_and_bot_messages_are_acknowledged_and_ignored(
    slack_env: SlackFactory,
) -> None:
    env = slack_env()
    for name, event in IGNORED.items():
        env.event(event, f"Ev-{name}")
    time.sleep(0.2)
    assert env.deliveries() == [] and env.jobs() == []
    # the control: the same DM from a person is answered
    env.event(message_event("hi", "1700000004.000008", channel="D1", channel_type="im"), "EvOk")
    assert len(env.settled(1)) == 1


def _bodies() -> tuple[bytes, dict[str, str]]:
    body = json.dumps(
        event_callback(message_event(MENTION, "1700000005.000100", kind="app_mention"), "EvS")
    ).encode()
    return body, signed(SECRET, body)


def test_unverified_requests_answer_401_and_record_nothing(slack_env: SlackFactory) -> None:
    env = slack_env()
    for problem in ("bad-signature", "stale", "tampered", "missing"):
        body, headers = _bodies()
        if problem == "bad-signature":
            headers["X-Slack-Signature"] = "v0=" + "0" * 64
        elif problem == "stale":  # signed correctly, but 301 s ago
            headers = signed(SECRET, body, timestamp=int(time.time()) - 301)
        elif problem == "tampered":
            body = body.replace(b"vacation", b"salary")
        else:
            headers = {"Content-Type": "application/json"}
        for path in ("/slack/events", "/slack/interactions"):
            response = env.post(body, headers=headers, path=path)
            assert response.status_code == 401, (problem, response.text)
            assert response.json()["detail"]["error"] == "AuthenticationError"
    command = b"command=%2Fsearch2o&text=link+ABCD&team_id=T1&user_id=U1"
    refused = env.post(
        command,
        headers={**signed("wrong", command), "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert refused.status_code == 401
    assert env.deliveries() == [] and env.jobs() == []
    # the control: the same body, correctly signed, is taken
    body, headers = _bodies()
    assert env.post(body, headers=headers).status_code == 200
    assert len(env.settled(1)) == 1


def test_a_signed_body_nested_too_deep_is_400_and_records_nothing(slack_env: SlackFactory) -> None:
    # A 2 kB body nested 1,100 levels overflowed json.loads' recursion: a 500, before.
    env = slack_env()
    deep = b"[" * 1100 + b"]" * 1100
    assert env.post(deep, headers=signed(SECRET, deep)).status_code == 400
    form = b"payload=" + b"%5B" * 1100 + b"%5D" * 1100
    response = env.post(
        form,
        headers={**signed(SECRET, form), "Content-Type": "application/x-www-form-urlencoded"},
        path="/slack/interactions",
    )
    assert response.status_code == 400
    assert env.deliveries() == [] and env.jobs() == []
