"""A search2o server in token mode with Slack in ``http`` mode, pointed at a fake Slack.

The server runs on loopback (uvicorn in a thread) with its job consumer, a scripted chat model
and the real embedder; Slack's Web API is :class:`~tests.surfaces.slack.fake_slack.FakeSlack`.
Every test gets a fresh database on each backend.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import select

from search2o import accounts
from search2o.api.app import create_app
from search2o.config import Settings
from search2o.runtime import Runtime
from search2o.storage.db import Database
from search2o.storage.delivery_models import SurfaceDelivery
from search2o.storage.job_models import Job
from tests.conftest import MemoEmbedder, free_port
from tests.jobs.conftest import FAST, wait_until
from tests.query.doubles import ScriptedChatModel, answering
from tests.surfaces.slack.fake_slack import FakeSlack, event_callback, signed

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-test"


@dataclass
class SlackEnv:
    """The server, its runtime, the fake Slack and the scripted model of one test."""

    runtime: Runtime
    fake: FakeSlack
    model: ScriptedChatModel
    http: httpx.Client

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
        sent = headers if headers is not None else signed(
            SECRET, raw, retry=retry, content_type=content_type
        )
        return self.http.post(path, content=raw, headers=sent)

    def event(self, event: dict[str, Any], event_id: str, retry: int | None = None) -> None:
        envelope = event_callback(event, event_id, retry_attempt=retry or 0)
        response = self.post(envelope, retry=retry)
        assert response.status_code == 200, response.text

    def deliveries(self) -> list[SurfaceDelivery]:
        with self.runtime.database.session() as session:
            rows = list(
                session.scalars(
                    select(SurfaceDelivery)
                    .where(SurfaceDelivery.surface == "slack")
                    .order_by(SurfaceDelivery.id)
                )
            )
            session.expunge_all()
            return rows

    def jobs(self, kind: str = "slack.answer") -> list[Job]:
        with self.runtime.database.session() as session:
            rows = list(session.scalars(select(Job).where(Job.kind == kind)))
            session.expunge_all()
            return rows

    def settled(self, count: int, timeout_s: float = 30) -> list[SurfaceDelivery]:
        """Wait until ``count`` deliveries exist, all posted or failed, their jobs finished."""

        def check() -> list[SurfaceDelivery] | None:
            rows = self.deliveries()
            done = len(rows) == count and all(r.state in ("posted", "failed") for r in rows)
            finished = all(j.state in ("done", "failed") for j in self.jobs())
            return rows if done and finished else None

        found: list[SurfaceDelivery] = wait_until(check, timeout_s, f"{count} answers")
        return found


def serve_on(app: Any, port: int) -> Iterator[httpx.Client]:
    """Run ``app`` on loopback ``port`` in a thread; yield a client for it."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "the server thread died while starting"
        assert time.monotonic() < deadline, "the server did not start within 30 s"
        time.sleep(0.01)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the server did not stop"


def slack_settings(data_dir: Path, database_url: str, fake: FakeSlack, **slack: Any) -> Settings:
    """Token-mode settings with Slack in http mode against ``fake`` (a surface token issued)."""
    db = Database(database_url)
    try:
        with db.session() as session:
            token = accounts.issue_surface_token(session, "slack")
    finally:
        db.close()
    return settings_for(data_dir, database_url, fake.url, token, free_port(), **slack)


def settings_for(
    data_dir: Path, database_url: str, api_url: str, token: str, port: int, **slack: Any
) -> Settings:
    """The settings of :func:`slack_settings` for a given Web API URL, surface token and port."""
    values = {
        "bot_token": BOT_TOKEN,
        "signing_secret": SECRET,
        "mode": "http",
        "api_url": api_url,
        "server_url": f"http://127.0.0.1:{port}",
        "service_token": token,
        "update_every_s": 0.05,
        "stream": False,
        **slack,
    }
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        auth_mode="token",
        port=port,
        slack=values,
        jobs={**FAST, "lease_s": 5.0, "backoff_base_s": 0.1, "backoff_max_s": 0.3},
    )


SlackFactory = Callable[..., SlackEnv]


@pytest.fixture
def slack_env(
    tmp_path: Path, database_url: str, embedder: MemoEmbedder
) -> Iterator[SlackFactory]:
    """Start the server and the fake Slack: ``slack_env(**slack settings) -> SlackEnv``."""
    stack: list[Any] = []

    def start(script: Any = None, jobs_in_server: bool = True, **slack: Any) -> SlackEnv:
        fake = FakeSlack(token=BOT_TOKEN).__enter__()
        stack.append(fake)
        settings = slack_settings(tmp_path / "data", database_url, fake, **slack)
        if not jobs_in_server:  # the test runs its own workers
            jobs = settings.jobs.model_copy(update={"server_workers": 0})
            settings = settings.model_copy(update={"jobs": jobs})
        model = ScriptedChatModel(script or answering("Twenty-five days a year."))
        runtime = Runtime(settings, embedder=embedder, chat_model=model)
        stack.append(runtime)
        served = serve_on(create_app(settings, runtime=runtime), settings.port)
        http = next(served)
        stack.append(served)
        return SlackEnv(runtime, fake, model, http)

    try:
        yield start
    finally:
        for item in reversed(stack):
            if isinstance(item, FakeSlack):
                item.__exit__(None, None, None)
            elif isinstance(item, Runtime):
                item.close()
            else:
                next(item, None)
