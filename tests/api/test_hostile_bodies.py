"""Oversized bodies at the messenger webhooks and a 50 MB page for the extension's chat.

A webhook body over ``api.max_body_bytes`` (1 MiB) is refused with 413 even when its signature
or secret is valid, and records nothing; the same holds for a browser-extension page of 50 MB
sent to ``POST /v1/chat`` (the bound is checked before the body is parsed, so the server
never holds the 50 MB). The bodies are sent whole (not only announced), as a sender would.
"""

from __future__ import annotations

import json

import httpx
import pytest

from search2o.runtime import Runtime
from tests.api.test_api import add_user
from tests.surfaces.mattermost.conftest import (  # noqa: F401 (fixtures)
    MattermostFactory,
    fake_mattermost,
    mattermost_env,
)
from tests.surfaces.mattermost.fake_mattermost import COMMAND_TOKEN
from tests.surfaces.slack.conftest import SECRET as SLACK_SECRET
from tests.surfaces.slack.conftest import SlackFactory, slack_env  # noqa: F401 (fixture)
from tests.surfaces.slack.fake_slack import signed
from tests.surfaces.telegram.conftest import SECRET as TELEGRAM_SECRET
from tests.surfaces.telegram.conftest import (  # noqa: F401 (fixture)
    TelegramFactory,
    telegram_env,
)
from tests.surfaces.telegram.fake_telegram import SECRET_HEADER

pytestmark = pytest.mark.slow

BIG = 2 * 1024 * 1024  # twice api.max_body_bytes


def _too_large(response: httpx.Response) -> None:
    assert response.status_code == 413, response.text[:300]
    detail = response.json()["detail"]
    assert detail["error"] == "PayloadTooLargeError" and "api.max_body_bytes" in detail["reason"]


def test_an_oversized_slack_event_is_413_even_when_signed(
    slack_env: SlackFactory,  # noqa: F811 (the imported fixture)
) -> None:
    env = slack_env()
    body = json.dumps({"type": "event_callback", "event": {"text": "x" * BIG}}).encode()
    for path in ("/slack/events", "/slack/interactions"):
        _too_large(env.http.post(path, content=body, headers=signed(SLACK_SECRET, body)))
    assert env.deliveries() == [] and env.jobs() == []


def test_an_oversized_telegram_update_is_413_even_with_the_secret(
    telegram_env: TelegramFactory,  # noqa: F811 (the imported fixture)
) -> None:
    env = telegram_env()
    update = {
        "update_id": 1,
        "message": {"message_id": 1, "text": "x" * BIG, "chat": {"id": 5, "type": "private"}},
    }
    response = env.http.post(
        "/telegram/webhook",
        content=json.dumps(update).encode(),
        headers={"Content-Type": "application/json", SECRET_HEADER: TELEGRAM_SECRET},
    )
    _too_large(response)
    assert env.deliveries() == [] and env.jobs() == []


def test_an_oversized_mattermost_command_is_413_even_with_the_token(
    mattermost_env: MattermostFactory,  # noqa: F811 (the imported fixture)
) -> None:
    env = mattermost_env()
    form = {"token": COMMAND_TOKEN, "text": "x" * BIG, "user_id": "u", "channel_id": "c"}
    _too_large(env.http.post("/mattermost/command", data=form))
    _too_large(env.http.post("/mattermost/actions", json={"context": {"x": "y" * BIG}}))
    assert env.deliveries() == [] and env.jobs() == []


def test_a_50_mb_page_is_413_and_stores_nothing(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    auth = add_user(token_runtime, "ann@example.com")
    page = {"url": "https://example.com/big", "title": "Big", "text": "a" * (50 * 1024 * 1024)}
    response = token_api.post(
        "/v1/chat",
        json={"message": "summarise this page", "page": page},
        headers=auth,
        timeout=120,
    )
    _too_large(response)
    assert token_api.get("/v1/conversations", headers=auth).json()["conversations"] == []
