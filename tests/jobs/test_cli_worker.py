"""``search2o worker`` as a real process, and ``search2o jobs list`` / ``show``."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from search2o.jobs import JobQueue, JobRegistry
from search2o.jobs.settings import JobSettings
from search2o.storage.db import Database
from tests.conftest import free_port
from tests.jobs.conftest import FAST, QueueEnv, WorkerProcess
from tests.test_cli import Cli, error_line, out

CLI = [sys.executable, "-c", "from search2o.cli import main; main()"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("database_url", "transport"),
    [("sqlite", "sqlite"), ("postgresql", "postgres")],
    indirect=["database_url"],
)
def test_search2o_worker_consumes_the_queue_and_stops_on_sigterm(
    queue_env: QueueEnv, worker_process: Callable[..., WorkerProcess]
) -> None:
    registry = JobRegistry()
    registry.add("reports.monthly", lambda ctx, payload: None)
    producer = queue_env.open(registry)
    worker = worker_process(queue_env.environment(), [*CLI, "worker", "--workers", "1"])
    assert "1 thread(s) on the" in worker.line("worker:")
    job = producer.enqueue("reports.monthly", max_attempts=1)
    failed = producer.wait(job.id, 60)
    # The product's worker has no such kind: it took the job and said so.
    assert failed.state == "failed" and "no handler for job kind 'reports.monthly'" in (
        failed.error or ""
    )
    assert failed.lease_owner is None and failed.attempts == 1
    worker.signal(signal.SIGTERM)
    assert worker.line("worker stopped") == "worker stopped"
    assert worker.wait() == 0


def test_worker_refuses_a_bad_thread_count(cli: Cli) -> None:
    line = error_line(cli("worker", "--workers", "0"), 2)
    assert line == "error: --workers: must be 1-64, got 0"


def _queue(cli: Cli) -> tuple[Database, JobQueue]:
    database = cli.database()
    registry = JobRegistry()
    registry.add("reports.monthly", lambda ctx, payload: None)
    # The CLI's own default transport: the SQLite file in its data folder.
    data_dir = Path(str(cli.env["SEARCH2O_DATA_DIR"]))
    return database, JobQueue(JobSettings(**FAST), database, registry, data_dir=data_dir)


def test_jobs_list_and_show(cli: Cli) -> None:
    database, queue = _queue(cli)
    try:
        first = queue.enqueue("reports.monthly", {"month": "2026-11"}, dedupe_key="m:2026-11")
        second = queue.enqueue("reports.monthly", {"month": "2026-12"})
    finally:
        queue.close()
        database.close()
    listed = json.loads(out(cli.ok("jobs", "list", "--json")))
    assert [j["id"] for j in listed] == [second.id, first.id]
    assert {j["state"] for j in listed} == {"queued"}
    table = out(cli.ok("jobs", "list", "--state", "queued"))
    assert "2 job(s)" in table and first.id in table
    assert "0 job(s)" in out(cli.ok("jobs", "list", "--state", "failed"))
    shown = json.loads(out(cli.ok("jobs", "show", first.id)))
    assert shown["payload"] == {"month": "2026-11"} and shown["dedupe_key"] == "m:2026-11"
    assert shown["attempts"] == 0 and shown["progress"] is None


def test_jobs_show_and_list_refuse_bad_input(cli: Cli) -> None:
    assert error_line(cli("jobs", "show", "0" * 32), 1) == f"error: job '{'0' * 32}' not found"
    line = error_line(cli("jobs", "list", "--state", "lost"), 2)
    assert line == "error: state: must be one of queued, running, done, failed, got 'lost'"
    assert error_line(cli("jobs", "list", "--limit", "0"), 2).startswith("error: limit:")


def test_jobs_are_listed_while_the_transport_is_down_and_a_worker_says_why_it_cannot_start(
    cli: Cli,
) -> None:
    cli.env["SEARCH2O_JOBS__BACKEND"] = "redis"
    cli.env["SEARCH2O_JOBS__REDIS_URL"] = f"redis://:secret-pw@127.0.0.1:{free_port()}/0"
    assert json.loads(out(cli.ok("jobs", "list", "--json"))) == []
    line = error_line(cli("worker"), 1)
    assert line.startswith("error: cannot reach Redis at redis://:***@127.0.0.1:")
    assert "secret-pw" not in line
