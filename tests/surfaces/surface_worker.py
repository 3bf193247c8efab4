"""A real worker process running a messenger's jobs: ``python -m tests.surfaces.surface_worker``.

Its one argument is JSON: the data folder, database URL, server port, the ``jobs`` section and
one messenger's section (secrets in clear), as :func:`surface_worker` writes it from the
server's settings. It runs the jobs as ``search2o worker`` does (the answers come from the
server's chat model, over the API), so a test can SIGKILL it in the middle of an answer. It
prints ``ready`` once consuming.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import select, update

from search2o.config import Settings
from search2o.jobs import ledger
from search2o.jobs.ledger import FINAL_FAILURE
from search2o.logs import configure_logging
from search2o.runtime import Runtime
from search2o.storage.db import Database
from search2o.storage.delivery_models import SurfaceDelivery
from search2o.storage.job_models import Job
from tests.jobs.conftest import wait_until


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v.get_secret_value() if isinstance(v, SecretStr) else v
        for k, v in values.items()
        if v is not None
    }


@contextlib.contextmanager
def surface_worker(settings: Settings, surface: str) -> Iterator[subprocess.Popen[str]]:
    """Run a worker process with ``settings`` (``surface``'s section); kill it at the end."""
    config = {
        "data_dir": str(settings.data_dir),
        "database_url": settings.resolved_database_url,
        "port": settings.port,
        "surface": surface,
        "section": _plain(getattr(settings, surface).model_dump()),
        "jobs": _plain(settings.jobs.model_dump()),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.surfaces.surface_worker", json.dumps(config, default=str)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().startswith("ready")
        yield worker
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
        if worker.stdout is not None:
            worker.stdout.close()


def make_last_attempt(database: Database, kind: str) -> None:
    """Make the running attempt of each ``kind`` job its last one (``max_attempts = attempts``).

    What four crashes in a row would do, without waiting out four leases.
    """
    with database.session() as session:
        session.execute(
            update(Job)
            .where(Job.kind == kind, Job.state == "running")
            .values(max_attempts=Job.attempts)
        )


def kill_on_last_attempt(
    runtime: Runtime, surface: str, ask: Callable[[], object], partial: Callable[[], bool]
) -> None:
    """SIGKILL a worker process on the last attempt of an answer, then sweep in ``runtime``.

    ``ask`` sends the question, ``partial`` tells when the answer's first words are shown;
    once their message's id is stored too (the kill falls after the write that lets any
    attempt edit it), the attempt is made the last, the worker killed, and ``runtime``'s
    consumer started: its sweeper finds the lease expired and gives the job up.
    """
    with surface_worker(runtime.settings, surface) as worker:
        ask()
        wait_until(partial, 30, "the partial answer")
        wait_until(lambda: _reply_stored(runtime.database, surface), 30, "its stored id")
        make_last_attempt(runtime.database, f"{surface}.answer")
        worker.kill()  # nobody is left to say anything
        worker.wait(timeout=10)
    runtime.jobs.start_consumer(1)


def _reply_stored(database: Database, surface: str) -> bool:
    with database.session() as session:
        keys = list(
            session.scalars(
                select(SurfaceDelivery.reply_key).where(SurfaceDelivery.surface == surface)
            )
        )
    return bool(keys) and all(keys)


def hook_ran_once(runtime: Runtime) -> None:
    """Wait until exactly one final-failure hook job ran; then a second more for strays."""

    def done() -> bool:
        hooks = ledger.list_jobs(runtime.database, kind=FINAL_FAILURE)
        return len(hooks) == 1 and hooks[0].state == "done"

    wait_until(done, 20, "the final-failure hook")
    time.sleep(1.0)
    assert len(ledger.list_jobs(runtime.database, kind=FINAL_FAILURE)) == 1


def main() -> None:
    config = json.loads(sys.argv[1])
    configure_logging("INFO", "text")
    settings = Settings(
        data_dir=Path(config["data_dir"]),
        database_url=config["database_url"],
        auth_mode="token",
        port=config["port"],
        jobs=config["jobs"],
        **{config["surface"]: config["section"]},
    )
    runtime = Runtime(settings)
    queue = runtime.jobs

    def announce() -> None:
        while not queue.consuming:
            time.sleep(0.01)
        print("ready", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    queue.run_worker(1)


if __name__ == "__main__":
    main()
