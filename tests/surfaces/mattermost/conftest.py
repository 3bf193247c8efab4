"""A search2o server in token mode with Mattermost on, pointed at a fake Mattermost.

The server runs on loopback (uvicorn in a thread, :func:`tests.surfaces.slack.conftest.serve_on`)
with its job consumer and a chat model (scripted, or the built-in one over the handbook); the
Mattermost server is :class:`~tests.surfaces.mattermost.fake_mattermost.FakeMattermost`, also
served on loopback. Every test gets a fresh database on each backend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
from search2o.surfaces.mattermost import Listener, pipeline, rest_api
from tests.conftest import MemoEmbedder, free_port, handbook_files
from tests.jobs.conftest import FAST, wait_until
from tests.query.doubles import ScriptedChatModel, answering
from tests.surfaces.mattermost.fake_mattermost import BOT_TOKEN, COMMAND_TOKEN, FakeMattermost
from tests.surfaces.slack.conftest import serve_on


@dataclass
class MattermostEnv:
    """The server, its runtime, the fake Mattermost and the chat model of one test."""

    runtime: Runtime
    fake: FakeMattermost
    model: Any
    http: httpx.Client

    @property
    def base(self) -> str:
        return f"{self.http.base_url}".rstrip("/")

    def deliveries(self) -> list[SurfaceDelivery]:
        with self.runtime.database.session() as session:
            rows = list(
                session.scalars(
                    select(SurfaceDelivery)
                    .where(SurfaceDelivery.surface == "mattermost")
                    .order_by(SurfaceDelivery.id)
                )
            )
            session.expunge_all()
            return rows

    def jobs(self, kind: str = "mattermost.answer") -> list[Job]:
        with self.runtime.database.session() as session:
            rows = list(session.scalars(select(Job).where(Job.kind == kind)))
            session.expunge_all()
            return rows

    def settled(self, count: int, timeout_s: float = 30, kind: str = "mattermost.answer") -> list[
        SurfaceDelivery
    ]:
        """Wait until ``count`` deliveries exist, all posted or failed, their jobs finished."""

        def check() -> list[SurfaceDelivery] | None:
            rows = self.deliveries()
            done = len(rows) == count and all(r.state in ("posted", "failed") for r in rows)
            finished = all(j.state in ("done", "failed") for j in self.jobs(kind))
            return rows if done and finished else None

        found: list[SurfaceDelivery] = wait_until(check, timeout_s, f"{count} answers")
        return found


def mattermost_settings(
    data_dir: Path, database_url: str, fake: FakeMattermost, **mattermost: Any
) -> Settings:
    """Token-mode settings with Mattermost against ``fake`` (a surface token issued)."""
    db = Database(database_url)
    try:
        with db.session() as session:
            token = accounts.issue_surface_token(session, "mattermost")
    finally:
        db.close()
    port = free_port()
    values = {
        "url": fake.url,
        "bot_token": BOT_TOKEN,
        "command_token": COMMAND_TOKEN,
        "public_url": f"http://127.0.0.1:{port}",
        "server_url": f"http://127.0.0.1:{port}",
        "service_token": token,
        "update_every_s": 0.05,
        **mattermost,
    }
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        auth_mode="token",
        port=port,
        mattermost=values,
        jobs={**FAST, "lease_s": 5.0, "backoff_base_s": 0.1, "backoff_max_s": 0.3},
    )


MattermostFactory = Callable[..., MattermostEnv]


@pytest.fixture
def fake_mattermost() -> Iterator[FakeMattermost]:
    """The fake Mattermost, served on a loopback port."""
    fake = FakeMattermost()
    port = free_port()
    served = serve_on(fake.app(), port)
    next(served)
    fake.url = f"http://127.0.0.1:{port}"
    try:
        yield fake
    finally:
        fake.drop()
        next(served, None)


@pytest.fixture
def mattermost_env(
    tmp_path: Path, database_url: str, embedder: MemoEmbedder, fake_mattermost: FakeMattermost
) -> Iterator[MattermostFactory]:
    """Start the server: ``mattermost_env(script, builtin=..., **mattermost)``.

    ``builtin``: the built-in chat model and the handbook instead of a scripted model.
    """
    stack: list[Any] = []

    def start(
        script: Any = None, builtin: bool = False, jobs_in_server: bool = True, **mattermost: Any
    ) -> MattermostEnv:
        settings = mattermost_settings(
            tmp_path / "data", database_url, fake_mattermost, **mattermost
        )
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
        return MattermostEnv(runtime, fake_mattermost, chat, http)

    try:
        yield start
    finally:
        for item in reversed(stack):
            if isinstance(item, Runtime):
                item.close()
            else:
                next(item, None)


@contextmanager
def listening(env: MattermostEnv, watchdog_s: float = 30.0) -> Iterator[Listener]:
    """Run ``search2o mattermost listen``'s listener against the fake in a thread."""
    settings = env.runtime.settings
    api = rest_api(settings)
    listener = Listener(
        env.fake.url, BOT_TOKEN, api, pipeline(env.runtime, api),
        watchdog_s=watchdog_s, backoff_s=0.1,
    )
    stop = threading.Event()
    thread = threading.Thread(target=listener.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: env.fake.sockets and listener.pipeline.since(), 10, "the listener")
        yield listener
    finally:
        stop.set()
        env.fake.drop()
        thread.join(timeout=15)
        api.close()
        assert not thread.is_alive(), "the listener did not stop"
