"""What ``GET /v1/health/ready`` checks: whether this process should get traffic now.

Four checks, each bounded by ``serve.ready_timeout_s``:

* ``database``: the database answers (it reads the applied migration, one query);
* ``migrations``: the applied revision is the newest this version ships
  (:meth:`~search2o.storage.db.Database.head_revision`): a process newer or older than its
  schema must not serve;
* ``jobs``: where this process should run a job consumer (``jobs.server_workers > 0``), it
  runs; otherwise the check passes and says so (``search2o worker`` processes consume);
* ``thread_pool``: anyio's default thread limiter, which runs every blocking route and
  database call of the API, is not saturated (every token borrowed while tasks wait for one).

The database is asked from a thread of its own (:class:`ProbeThread`), never the saturated
pool, and at most one such question is in flight: a probe that finds the previous one still
waiting (a database that does not answer) fails at once rather than pile up threads.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import anyio.to_thread
from pydantic import BaseModel, Field

from search2o.runtime import Runtime
from search2o.storage.db import Database

__all__ = ["CheckPublic", "ProbeThread", "ReadinessPublic", "check_readiness", "pool_problem"]


class CheckPublic(BaseModel):
    """One readiness check: whether it passed and why (a sentence, no secrets)."""

    ok: bool
    detail: str


class ReadinessPublic(BaseModel):
    """``ready`` (200) or ``unavailable`` (503), with every check; ``failed`` names the failed."""

    status: str = Field(description="ready or unavailable")
    failed: list[str] = Field(description="the names of the checks that failed")
    checks: dict[str, CheckPublic]


@dataclass
class ProbeThread:
    """One thread for the database check, with at most one question in flight."""

    executor: ThreadPoolExecutor
    busy: threading.Lock

    @classmethod
    def create(cls) -> ProbeThread:
        """Return a probe thread (its single worker starts on first use)."""
        return cls(ThreadPoolExecutor(1, thread_name_prefix="search2o-ready"), threading.Lock())

    def close(self) -> None:
        """Stop the thread without waiting for a question still in flight."""
        self.executor.shutdown(wait=False, cancel_futures=True)


def pool_problem(limiter: anyio.CapacityLimiter) -> str | None:
    """Return why ``limiter`` is saturated, or ``None``: all tokens borrowed and tasks waiting."""
    stats = limiter.statistics()
    if stats.borrowed_tokens >= stats.total_tokens and stats.tasks_waiting > 0:
        return (
            f"all {int(stats.total_tokens)} worker threads are busy and {stats.tasks_waiting} "
            "task(s) wait for one"
        )
    return None


def _revision(database: Database, busy: threading.Lock) -> str | None:
    try:
        return database.current_revision()
    finally:
        busy.release()


async def check_readiness(runtime: Runtime, probe: ProbeThread, head: str) -> ReadinessPublic:
    """Run the four checks (see the module docstring) and return their report."""
    timeout = runtime.settings.serve.ready_timeout_s
    checks: dict[str, CheckPublic] = {}
    revision: str | None = None
    if not probe.busy.acquire(blocking=False):
        checks["database"] = CheckPublic(
            ok=False, detail="the previous database check has not answered yet"
        )
    else:
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(probe.executor, _revision, runtime.database, probe.busy)
        except RuntimeError:  # the executor is shut down: the app is stopping
            probe.busy.release()
            checks["database"] = CheckPublic(ok=False, detail="the server is stopping")
        else:
            try:
                revision = await asyncio.wait_for(asyncio.shield(future), timeout)
                checks["database"] = CheckPublic(ok=True, detail=runtime.database.backend)
            except TimeoutError:
                checks["database"] = CheckPublic(
                    ok=False, detail=f"no answer within {timeout:g} s (serve.ready_timeout_s)"
                )
            except Exception as exc:  # StorageError, the driver's errors: the first line only
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                checks["database"] = CheckPublic(ok=False, detail=f"unreachable: {first[:300]}")
    if checks["database"].ok:
        at_head = revision == head
        checks["migrations"] = CheckPublic(
            ok=at_head,
            detail=f"at {head}"
            if at_head
            else f"the database is at {revision or 'blank'}, this version needs {head}: run "
            "`search2o db upgrade`",
        )
    else:
        checks["migrations"] = CheckPublic(ok=False, detail="not checked: no database")
    checks["jobs"] = _jobs_check(runtime)
    problem = pool_problem(anyio.to_thread.current_default_thread_limiter())
    checks["thread_pool"] = CheckPublic(ok=problem is None, detail=problem or "not saturated")
    failed = [name for name, check in checks.items() if not check.ok]
    return ReadinessPublic(
        status="unavailable" if failed else "ready", failed=failed, checks=checks
    )


def _jobs_check(runtime: Runtime) -> CheckPublic:
    if runtime.settings.jobs.server_workers == 0:
        return CheckPublic(ok=True, detail="no consumer in this process (jobs.server_workers = 0)")
    if "jobs" in runtime.__dict__ and runtime.jobs.consuming:
        return CheckPublic(ok=True, detail="the job consumer runs")
    return CheckPublic(ok=False, detail="the job consumer of this process is not running")
