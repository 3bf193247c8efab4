"""One test environment for every messenger: a search2o server on loopback, its jobs, a fake.

:func:`surface_settings` writes token-mode settings with one messenger's section (a surface
token issued, the server on a free port, fast jobs); :func:`serve_runtime` starts the runtime
with a chat model (scripted, or the built-in one over the handbook) and serves its app in a
thread; :class:`SurfaceEnv` reads the delivery records and jobs a test waits on. Each surface's
``conftest.py`` adds only its fake and its way in. Every test gets a fresh database on each
backend (the ``database_url`` fixture).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx
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
from tests.api.test_api import serve
from tests.conftest import MemoEmbedder, free_port, handbook_files
from tests.jobs.conftest import FAST, wait_until
from tests.query.doubles import ScriptedChatModel, answering

FakeT = TypeVar("FakeT")

# Leases long enough for a loaded host, retries quick enough for a test.
JOBS = {**FAST, "lease_s": 5.0, "backoff_base_s": 0.1, "backoff_max_s": 0.3}


@dataclass
class SurfaceEnv(Generic[FakeT]):
    """The server, its runtime, the fake messenger and the chat model of one test."""

    surface: str
    runtime: Runtime
    fake: FakeT
    model: Any
    http: httpx.Client

    def deliveries(self) -> list[SurfaceDelivery]:
        """This surface's delivery records, oldest first."""
        with self.runtime.database.session() as session:
            rows = list(
                session.scalars(
                    select(SurfaceDelivery)
                    .where(SurfaceDelivery.surface == self.surface)
                    .order_by(SurfaceDelivery.id)
                )
            )
            session.expunge_all()
            return rows

    def jobs(self, kind: str | None = None) -> list[Job]:
        """The jobs of ``kind`` (default: this surface's answers)."""
        wanted = kind or f"{self.surface}.answer"
        with self.runtime.database.session() as session:
            rows = list(session.scalars(select(Job).where(Job.kind == wanted)))
            session.expunge_all()
            return rows

    def settled(
        self, count: int, timeout_s: float = 30, kind: str | None = None
    ) -> list[SurfaceDelivery]:
        """Wait until ``count`` deliveries exist, all posted or failed, their jobs finished."""

        def check() -> list[SurfaceDelivery] | None:
            rows = self.deliveries()
            done = len(rows) == count and all(r.state in ("posted", "failed") for r in rows)
            finished = all(j.state in ("done", "failed") for j in self.jobs(kind))
            return rows if done and finished else None

        found: list[SurfaceDelivery] = wait_until(check, timeout_s, f"{count} answers")
        return found


def issue_token(database_url: str, surface: str) -> str:
    """Issue a surface token for ``surface`` in the database at ``database_url``."""
    db = Database(database_url)
    try:
        with db.session() as session:
            return accounts.issue_surface_token(session, surface)
    finally:
        db.close()


def surface_settings(
    surface: str,
    data_dir: Path,
    database_url: str,
    section: dict[str, Any],
    *,
    jobs_in_server: bool = True,
    port: int | None = None,
) -> Settings:
    """Token-mode settings with ``surface``'s ``section`` (a surface token issued).

    The answer jobs reach the server on its loopback ``port`` (default: a free one) and edit
    every 0.05 s unless ``section`` says otherwise; ``jobs_in_server`` false leaves the jobs
    to workers the test runs itself.
    """
    port = port or free_port()
    values = {
        "server_url": f"http://127.0.0.1:{port}",
        "service_token": issue_token(database_url, surface),
        "update_every_s": 0.05,
        **section,
    }
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        auth_mode="token",
        port=port,
        jobs={**JOBS, **({} if jobs_in_server else {"server_workers": 0})},
        **{surface: values},
    )


def serve_on(app: Any, port: int) -> contextlib.AbstractContextManager[httpx.Client]:
    """Run ``app`` on loopback ``port`` in a thread; yield a client for it (as the API tests)."""
    return serve(app, port)


def serve_runtime(
    stack: contextlib.ExitStack,
    settings: Settings,
    embedder: MemoEmbedder,
    script: Any = None,
    builtin: bool = False,
) -> tuple[Runtime, Any, httpx.Client]:
    """Start the runtime and serve its app; both stop with ``stack``.

    ``script``: the scripted chat model's script (default: one short answer); ``builtin``:
    the built-in chat model and the handbook (open to everyone) instead.
    """
    chat: Any = (
        build_chat_model(settings.chat, embedder)
        if builtin
        else ScriptedChatModel(script or answering("Twenty-five days a year."))
    )
    runtime = Runtime(settings, embedder=embedder, chat_model=chat)
    stack.callback(runtime.close)
    if builtin:
        runtime.knowledge.ingest_paths(handbook_files(), AccessList())
    http = stack.enter_context(serve_on(create_app(settings, runtime=runtime), settings.port))
    return runtime, chat, http
