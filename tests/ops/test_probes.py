"""``GET /v1/health`` (liveness) and ``GET /v1/health/ready`` (readiness) on real databases.

Readiness is checked against what really fails: a PostgreSQL server stopped and started again
(a pgserver instance of this test's own, so the session's server is untouched), a database
whose applied migration is behind this version, a process whose job consumer does not run, and
anyio's thread limiter really saturated by blocked threads.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from sqlalchemy import text

from search2o.api.app import create_app
from search2o.api.readiness import ProbeThread, check_readiness, pool_problem
from search2o.config import Settings
from search2o.runtime import Runtime
from search2o.storage.db import Database
from tests.api.test_api import serve
from tests.conftest import MemoEmbedder, _pg_url
from tests.ops.conftest import stop_postgres, value

pytestmark = pytest.mark.slow

CHECKS = {"database", "migrations", "jobs", "thread_pool"}


def test_ready_when_every_check_passes(runtime: Runtime) -> None:
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        live = client.get("/v1/health")
        ready = client.get("/v1/health/ready")
    assert live.status_code == 200 and live.json()["status"] == "ok"
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["status"] == "ready" and body["failed"] == []
    assert set(body["checks"]) == CHECKS
    assert body["checks"]["database"]["detail"] == runtime.database.backend
    assert body["checks"]["migrations"]["detail"] == f"at {Database.head_revision()}"
    assert body["checks"]["jobs"]["detail"] == "the job consumer runs"


def test_probes_answer_without_a_token(token_api: httpx.Client) -> None:
    assert token_api.get("/v1/health").status_code == 200
    assert token_api.get("/v1/health/ready").status_code == 200
    assert token_api.get("/v1/documents").status_code == 401  # the rest still needs one


def test_not_ready_while_migrations_are_behind(runtime: Runtime) -> None:
    head = Database.head_revision()
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        with runtime.database.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '0013'"))
        behind = client.get("/v1/health/ready")
        with runtime.database.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": head})
        again = client.get("/v1/health/ready")
    assert behind.status_code == 503, behind.text
    body = behind.json()
    assert body["status"] == "unavailable" and body["failed"] == ["migrations"]
    detail = body["checks"]["migrations"]["detail"]
    assert "at 0013" in detail and head in detail and "search2o db upgrade" in detail
    assert again.status_code == 200, again.text


def _ready_in_process(app: Any) -> httpx.Response:
    """Ask ``app`` for readiness in this process without running its lifespan."""

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.get("/v1/health/ready")

    return asyncio.run(ask())


@pytest.mark.parametrize("server_workers", [2, 0])
def test_the_job_consumer_counts_only_where_this_process_runs_one(
    settings: Settings, embedder: MemoEmbedder, server_workers: int
) -> None:
    chosen = settings.model_copy(
        update={"jobs": settings.jobs.model_copy(update={"server_workers": server_workers})}
    )
    with Runtime(chosen, embedder=embedder) as rt:
        # No lifespan ran, so no consumer was started: a process that should run one is not ready.
        response = _ready_in_process(create_app(chosen, runtime=rt))
    body = response.json()
    if server_workers:
        assert response.status_code == 503 and body["failed"] == ["jobs"], body
        assert body["checks"]["jobs"]["detail"] == "the job consumer of this process is not running"
    else:
        assert response.status_code == 200, body
        assert "jobs.server_workers = 0" in body["checks"]["jobs"]["detail"]


def test_pool_problem_needs_every_token_borrowed_and_a_waiter() -> None:
    async def scenario() -> tuple[str | None, str | None, str | None]:
        limiter = anyio.CapacityLimiter(1)
        idle = pool_problem(limiter)
        await limiter.acquire()
        busy_no_waiter = pool_problem(limiter)
        waiting = anyio.Event()

        async def wait_for_token() -> None:
            waiting.set()
            async with limiter:
                pass

        async with anyio.create_task_group() as group:
            group.start_soon(wait_for_token)
            await waiting.wait()
            await anyio.sleep(0.01)
            saturated = pool_problem(limiter)
            limiter.release()
        return idle, busy_no_waiter, saturated

    idle, busy_no_waiter, saturated = anyio.run(scenario)
    assert idle is None and busy_no_waiter is None
    assert saturated == "all 1 worker threads are busy and 1 task(s) wait for one"


def test_saturated_thread_pool_is_reported_and_the_database_still_checked(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    """Readiness answers while every request thread is blocked; its database check has its own."""
    no_consumer = settings.jobs.model_copy(update={"server_workers": 0})
    runtime = Runtime(settings.model_copy(update={"jobs": no_consumer}), embedder=embedder)
    probe = ProbeThread.create()
    release = threading.Event()

    async def scenario() -> Any:
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = 2
        async with anyio.create_task_group() as group:
            for _ in range(3):  # two borrow the tokens and block, the third waits
                group.start_soon(anyio.to_thread.run_sync, release.wait)
            await anyio.sleep(0.2)
            report = await check_readiness(runtime, probe, Database.head_revision())
            release.set()
        return report

    try:
        report = asyncio.run(scenario())
    finally:
        release.set()
        probe.close()
        runtime.close()
    assert report.failed == ["thread_pool"], report
    assert report.checks["database"].ok and report.checks["migrations"].ok
    assert "all 2 worker threads are busy" in report.checks["thread_pool"].detail


def _poll(client: httpx.Client, path: str, status: int, within_s: float) -> httpx.Response:
    deadline = time.monotonic() + within_s
    while True:
        response = client.get(path)
        if response.status_code == status or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def test_ready_turns_503_while_postgres_is_down_and_200_after(
    own_postgres: Any, tmp_path: Any, embedder: MemoEmbedder
) -> None:
    url = _pg_url(own_postgres, "postgres")
    chosen = Settings(data_dir=tmp_path / "data", database_url=url)
    with (
        Runtime(chosen, embedder=embedder) as rt,
        serve(create_app(chosen, runtime=rt)) as client,
    ):
        assert client.get("/v1/health/ready").status_code == 200
        stop_postgres(own_postgres)
        started = time.monotonic()
        down = client.get("/v1/health/ready")
        asked_s = time.monotonic() - started
        live = client.get("/v1/health")
        scrape = client.get("/metrics")
        refused = client.get("/v1/documents")
        own_postgres.ensure_postgres_running()
        back = _poll(client, "/v1/health/ready", 200, within_s=30)
    assert down.status_code == 503, down.text
    body = down.json()
    assert body["status"] == "unavailable"
    assert {"database", "migrations"} <= set(body["failed"]), body
    assert body["checks"]["database"]["detail"].startswith(("unreachable: ", "no answer within"))
    assert body["checks"]["migrations"]["detail"] == "not checked: no database"
    assert asked_s < chosen.serve.ready_timeout_s + 5
    # Liveness asks nothing of the database: an outage does not get the process restarted.
    assert live.status_code == 200 and live.json()["database"] == "postgresql"
    # A request that needs the database gets a clear 503 while it is down.
    assert refused.status_code == 503, refused.text
    assert refused.json()["detail"]["error"] == "StorageError"
    # A scrape still answers; the ledger's gauges say the database did not.
    assert scrape.status_code == 200 and value(scrape.text, "search2o_jobs_ledger_up") == 0
    assert back.status_code == 200, back.text
