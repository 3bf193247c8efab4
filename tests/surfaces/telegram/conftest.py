"""A search2o server in token mode with Telegram on, pointed at a fake Bot API.

The server runs on loopback (uvicorn in a thread, :func:`tests.surfaces.slack.conftest.serve_on`)
with its job consumer, a chat model (scripted, or the built-in one over the handbook) and the
real embedder; the Bot API is :class:`~tests.surfaces.telegram.fake_telegram.FakeTelegram`.
Every test gets a fresh database on each backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from search2o import accounts
from search2o.api.app import create_app
from search2o.config import Settings
from search2o.knowledge.access import AccessList
from search2o.providers.chat import build_chat_model
from search2o.runtime import Runtime
from search2o.storage.db import Database
from search2o.storage.delivery_models import SurfaceDelivery
from search2o.storage.job_models import Job
from tests.conftest import MemoEmbedder, free_port, handbook_files
from tests.jobs.conftest import FAST, wait_until
from tests.query.doubles import ScriptedChatModel, answering
from tests.surfaces.slack.conftest import serve_on
from tests.surfaces.telegram.fake_telegram import BOT_TOKEN, FakeTelegram, send_webhook

SECRET = "s3cr3t_webhook-token_0123456789"


@dataclass
class TelegramEnv:
    """The server, its runtime, the fake Bot API and the chat model of one test."""

    runtime: Runtime
    fake: FakeTelegram
    model: Any
    http: httpx.Client

    def webhook(self, update: dict[str, Any], secret: str | None = SECRET) -> list[int]:
        """Deliver ``update`` as Telegram's webhook does; return the statuses."""
        url = f"{self.http.base_url}".rstrip("/") + "/telegram/webhook"
        return send_webhook(url, update, secret)

    def deliveries(self) -> list[SurfaceDelivery]:
        with self.runtime.database.session() as session:
            rows = list(
                session.scalars(
                    select(SurfaceDelivery)
                    .where(SurfaceDelivery.surface == "telegram")
                    .order_by(SurfaceDelivery.id)
                )
            )
            session.expunge_all()
            return rows

    def jobs(self, kind: str = "telegram.answer") -> list[Job]:
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


def telegram_settings(
    data_dir: Path, database_url: str, fake: FakeTelegram, **telegram: Any
) -> Settings:
    """Token-mode settings with Telegram against ``fake`` (a surface token issued)."""
    db = Database(database_url)
    try:
        with db.session() as session:
            token = accounts.issue_surface_token(session, "telegram")
    finally:
        db.close()
    port = free_port()
    values = {
        "bot_token": BOT_TOKEN,
        "secret_token": SECRET,
        "mode": "webhook",
        "api_url": fake.url,
        "server_url": f"http://127.0.0.1:{port}",
        "service_token": token,
        "update_every_s": 0.05,
        **telegram,
    }
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        auth_mode="token",
        port=port,
        telegram=values,
        jobs={**FAST, "lease_s": 5.0, "backoff_base_s": 0.1, "backoff_max_s": 0.3},
    )


TelegramFactory = Callable[..., TelegramEnv]


@pytest.fixture
def telegram_env(
    tmp_path: Path, database_url: str, embedder: MemoEmbedder
) -> Iterator[TelegramFactory]:
    """Start the server and the fake: ``telegram_env(script, builtin=..., **telegram)``.

    ``builtin``: the built-in chat model and the handbook instead of a scripted model.
    """
    stack: list[Any] = []

    def start(
        script: Any = None, builtin: bool = False, jobs_in_server: bool = True, **telegram: Any
    ) -> TelegramEnv:
        fake = FakeTelegram().__enter__()
        stack.append(fake)
        settings = telegram_settings(tmp_path / "data", database_url, fake, **telegram)
        if not jobs_in_server:  # the test runs its own workers
            jobs = settings.jobs.model_copy(update={"server_workers": 0})
            settings = settings.model_copy(update={"jobs": jobs})
        chat: Any = (
            build_chat_model(settings.chat, embedder)
            if builtin
            else ScriptedChatModel(script or answering("Twenty-five days a year."))
        )
        runtime = Runtime(settings, embedder=embedder, chat_model=chat)
        stack.append(runtime)
        if builtin:  # the handbook, open to everyone
            runtime.knowledge.ingest_paths(handbook_files(), AccessList())
        served = serve_on(create_app(settings, runtime=runtime), settings.port)
        http = next(served)
        stack.append(served)
        return TelegramEnv(runtime, fake, chat, http)

    try:
        yield start
    finally:
        for item in reversed(stack):
            if isinstance(item, FakeTelegram):
                item.__exit__(None, None, None)
            elif isinstance(item, Runtime):
                item.close()
            else:
                next(item, None)
