"""A search2o server in token mode with Slack in ``http`` mode, pointed at a fake Slack.

The server and its jobs are :mod:`tests.surfaces.environment`'s, shared by every messenger;
Slack's Web API is :class:`~tests.surfaces.slack.fake_slack.FakeSlack`. Every test gets a
fresh database on each backend.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import MemoEmbedder
from tests.surfaces.environment import SurfaceEnv, serve_runtime, surface_settings
from tests.surfaces.slack.fake_slack import FakeSlack, event_callback, signed

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-test"


class SlackEnv(SurfaceEnv[FakeSlack]):
    """The server, its runtime, the fake Slack and the scripted model of one test."""

    def post(
        self,
        body: dict[str, Any] | bytes,
        *,
        retry: int | None = None,
        headers: dict[str, str] | None = None,
        path: str = "/slack/events",
        content_type: str = "application/json",
    ) -> httpx.Response:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent = (
            headers
            if headers is not None
            else signed(SECRET, raw, retry=retry, content_type=content_type)
        )
        return self.http.post(path, content=raw, headers=sent)

    def event(self, event: dict[str, Any], event_id: str, retry: int | None = None) -> None:
        envelope = event_callback(event, event_id, retry_attempt=retry or 0)
        response = self.post(envelope, retry=retry)
        assert response.status_code == 200, response.text


SlackFactory = Callable[..., SlackEnv]


@pytest.fixture
def slack_env(tmp_path: Path, database_url: str, embedder: MemoEmbedder) -> Iterator[SlackFactory]:
    """Start the server and the fake Slack: ``slack_env(script, jobs_in_server, **slack)``."""
    with contextlib.ExitStack() as stack:

        def start(script: Any = None, jobs_in_server: bool = True, **slack: Any) -> SlackEnv:
            fake = stack.enter_context(FakeSlack(token=BOT_TOKEN))
            section = {
                "bot_token": BOT_TOKEN,
                "signing_secret": SECRET,
                "mode": "http",
                "api_url": fake.url,
                "stream": False,
                **slack,
            }
            settings = surface_settings(
                "slack", tmp_path / "data", database_url, section, jobs_in_server=jobs_in_server
            )
            runtime, model, http = serve_runtime(stack, settings, embedder, script)
            return SlackEnv("slack", runtime, fake, model, http)

        yield start
