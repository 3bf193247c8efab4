"""Fixtures of the job queue tests: a real Redis, queues on each backend, worker processes.

``BACKENDS`` parametrises a test over the three transports with the database each pairs with
at its scale: ``sqlite`` (SQLite file + ``SqliteHuey``), ``postgres`` (PostgreSQL +
``PostgresHuey``) and ``redis`` (PostgreSQL + ``RedisHuey`` on a ``redis-server`` started for
the session with ``--save "" --appendonly no`` in a temporary folder).
"""

from __future__ import annotations

import os
import queue as stdlib_queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from search2o.jobs import JobQueue, JobRegistry
from search2o.jobs.settings import JobSettings
from search2o.storage.db import Database
from tests.jobs.kinds import build_registry, create_tables
from tests.ops.processes import redis_url_fixture

ROOT = Path(__file__).resolve().parents[2]

BACKENDS = pytest.mark.parametrize(
    ("database_url", "transport"),
    [("sqlite", "sqlite"), ("postgresql", "postgres"), ("postgresql", "redis")],
    indirect=["database_url"],
    ids=["sqlite", "postgres", "redis"],
)

# Short leases and ticks so a dead worker is noticed within a second or two, never long sleeps.
FAST = {
    "lease_s": 1.0,
    "tick_s": 1,
    "sweep_interval_s": 0.5,
    "lost_after_s": 3.0,
    "backoff_base_s": 0.4,
    "backoff_max_s": 5.0,
    "poll_max_s": 0.05,
    "shutdown_timeout_s": 2.0,
}


def wait_until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Return ``check()`` once it is truthy; fail saying ``what`` did not happen in time."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout_s:g} s")
        time.sleep(0.02)


redis_url = redis_url_fixture("the job queue suite")


@dataclass
class QueueEnv:
    """Queues on one backend: their settings, database, and what a worker process needs."""

    transport: str
    database: Database
    settings: JobSettings
    data_dir: Path
    opened: list[JobQueue] = field(default_factory=list)

    def open(self, registry: JobRegistry | None = None, **overrides: Any) -> JobQueue:
        """A queue with the test kinds (closed at the end of the test)."""
        settings = self.settings.model_copy(update=overrides) if overrides else self.settings
        kinds = registry if registry is not None else build_registry(self.database)
        opened = JobQueue(settings, self.database, kinds, data_dir=self.data_dir)
        self.opened.append(opened)
        return opened

    def environment(self, **overrides: Any) -> dict[str, str]:
        """The environment of a worker process using the same database and transport."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SEARCH2O_")}
        env.update(
            {
                "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
                "SEARCH2O_DATABASE_URL": self.database.url.render_as_string(hide_password=False),
                "SEARCH2O_DATA_DIR": str(self.data_dir),
                "SEARCH2O_LOG_LEVEL": "WARNING",
            }
        )
        values = {**self.settings.model_dump(exclude_none=True), **overrides}
        for name, value in values.items():
            raw = value.get_secret_value() if hasattr(value, "get_secret_value") else value
            env[f"SEARCH2O_JOBS__{name.upper()}"] = str(raw)
        return env

    def close(self) -> None:
        for opened in self.opened:
            opened.close()


@pytest.fixture
def queue_env(
    request: pytest.FixtureRequest, database_url: str, transport: str, tmp_path: Path
) -> Iterator[QueueEnv]:
    """Queues on ``transport`` over a fresh database (see ``BACKENDS``)."""
    extra: dict[str, Any] = {}
    if transport == "redis":
        extra["redis_url"] = request.getfixturevalue("redis_url")
    settings = JobSettings(
        backend=transport, queue_name=f"t{uuid.uuid4().hex[:12]}", **FAST, **extra
    )
    database = Database(database_url)
    create_tables(database)
    env = QueueEnv(transport, database, settings, tmp_path / "data")
    try:
        yield env
    finally:
        env.close()
        database.close()


class WorkerProcess:
    """``python -m tests.jobs.worker_process`` (or another command) with its output read."""

    def __init__(self, env: dict[str, str], command: list[str] | None = None) -> None:
        self.process = subprocess.Popen(
            command or [sys.executable, "-m", "tests.jobs.worker_process"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: stdlib_queue.Queue[str] = stdlib_queue.Queue()
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_errors, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)

    def line(self, prefix: str, timeout_s: float = 90) -> str:
        """Return the next stdout line starting with ``prefix`` (fail after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (self.process.poll() is not None and self._lines.empty()):
                pytest.fail(
                    f"worker printed no {prefix!r} line; exit {self.process.poll()}; "
                    f"stderr: {''.join(self.stderr)[-3000:]}"
                )
            try:
                text = self._lines.get(timeout=min(left, 0.2))
            except stdlib_queue.Empty:
                continue
            if text.startswith(prefix):
                return text

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout_s: float = 30) -> int:
        return self.process.wait(timeout=timeout_s)

    def stop(self) -> None:
        """Kill the process if it still runs; close its pipes."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        for reader in self._readers:
            reader.join(10)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def worker_process() -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker processes; any still running at the end is killed."""
    started: list[WorkerProcess] = []

    def start(env: dict[str, str], command: list[str] | None = None) -> WorkerProcess:
        process = WorkerProcess(env, command)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
