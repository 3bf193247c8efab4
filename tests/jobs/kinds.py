"""Job kinds of the tests, with effects a test can count, in the database under test.

``job_effects`` holds one row per job id, written with ``INSERT ... ON CONFLICT DO NOTHING``:
the idempotent effect a handler that runs twice must leave once. ``job_runs`` holds one row
per attempt a handler started (job, attempt, worker, time), in order: what actually ran.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, func, insert, select

from search2o.errors import InputError, ProviderError
from search2o.jobs import JobContext, JobInterrupted, JobRegistry
from search2o.storage import dialect
from search2o.storage.db import Database

METADATA = MetaData()
EFFECTS = Table(
    "job_effects",
    METADATA,
    Column("job_id", String(32), primary_key=True),
    Column("kind", String(100), nullable=False),
)
RUNS = Table(
    "job_runs",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", String(32), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("worker", String(200), nullable=False),
    Column("started", Float, nullable=False),
)

FAILURE = "upstream said no"
PERIOD_S = 2.0


def create_tables(database: Database) -> None:
    METADATA.create_all(database.engine)


def record_run(database: Database, ctx: JobContext) -> None:
    with database.session() as session:
        session.execute(
            insert(RUNS).values(
                job_id=ctx.job_id, attempt=ctx.attempt, worker=ctx.worker_id, started=time.time()
            )
        )


def record_effect(database: Database, ctx: JobContext) -> None:
    with database.session() as session:
        session.execute(
            dialect.insert(session, EFFECTS)
            .values(job_id=ctx.job_id, kind=ctx.kind)
            .on_conflict_do_nothing(index_elements=["job_id"])
        )


def runs(database: Database, job_id: str) -> list[tuple[int, str, float]]:
    with database.session() as session:
        rows = session.execute(
            select(RUNS.c.attempt, RUNS.c.worker, RUNS.c.started)
            .where(RUNS.c.job_id == job_id)
            .order_by(RUNS.c.id)
        )
        return [(a, w, s) for a, w, s in rows]


def effects(database: Database, job_id: str | None = None, kind: str | None = None) -> int:
    query = select(func.count()).select_from(EFFECTS)
    if job_id is not None:
        query = query.where(EFFECTS.c.job_id == job_id)
    if kind is not None:
        query = query.where(EFFECTS.c.kind == kind)
    with database.session() as session:
        return int(session.scalar(query) or 0)


def build_registry(database: Database, *, periodic: bool = False) -> JobRegistry:
    """The test kinds, bound to ``database`` (the worker process builds the same).

    ``periodic`` adds ``test.periodic`` (every :data:`PERIOD_S`), which every consumer of the
    registry then enqueues on its ticks.
    """
    registry = JobRegistry()

    @registry.job("test.effect")
    def effect(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        first_run = not runs(database, ctx.job_id)
        record_effect(database, ctx)
        record_run(database, ctx)  # after the effect: a test waiting for the run sees both
        if first_run and payload.get("hold_s"):  # only the first run holds (then dies, stops)
            deadline = time.monotonic() + float(payload["hold_s"])
            while time.monotonic() < deadline:
                if payload.get("cooperate") and ctx.stopping.is_set():
                    raise JobInterrupted(ctx.job_id)
                time.sleep(0.02)
        for step in range(int(payload.get("steps", 0))):
            ctx.progress(step + 1, int(payload["steps"]), f"step {step + 1}")
        return {"effect": ctx.job_id, "attempt": ctx.attempt}

    @registry.job("test.fail")
    def fail(ctx: JobContext, payload: dict[str, Any]) -> None:
        record_run(database, ctx)
        if payload.get("bad_input"):
            raise InputError("payload.file", "is not a file we can read")
        if payload.get("foreign"):
            raise RuntimeError("postgresql://admin:hunter2@db.internal/prod refused")
        raise ProviderError(FAILURE)

    @registry.job("test.result")
    def result(ctx: JobContext, payload: dict[str, Any]) -> Any:
        unstorable = {"nan": {"when": float("nan")}, "set": {"ids": {1, 2}}}
        if "bad" in payload:
            return unstorable[payload["bad"]]
        return "x" * int(payload["size"])

    def periodic_effect(ctx: JobContext, payload: dict[str, Any]) -> str:
        record_run(database, ctx)
        record_effect(database, ctx)
        return str(payload["slot"])

    if periodic:
        registry.add("test.periodic", periodic_effect, every_s=PERIOD_S)
    return registry
