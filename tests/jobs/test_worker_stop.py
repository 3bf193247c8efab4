"""A worker process told to stop (SIGTERM) finishes its job in time or gives it back.

Backend-independent logic (the ledger's release), run on the embedded SQLite backend.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest

from tests.jobs.conftest import QueueEnv, WorkerProcess, wait_until
from tests.jobs.kinds import effects, runs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.parametrize(
        ("database_url", "transport"), [("sqlite", "sqlite")], indirect=["database_url"]
    ),
]


def _started(queue_env: QueueEnv, job_id: str) -> list[tuple[int, str, float]]:
    return wait_until(lambda: runs(queue_env.database, job_id), 60, "the first attempt")


def test_sigterm_lets_the_running_job_finish_within_the_shutdown_timeout(
    queue_env: QueueEnv, worker_process: Callable[..., WorkerProcess]
) -> None:
    producer = queue_env.open()
    worker = worker_process(queue_env.environment(shutdown_timeout_s=30))
    worker_id = worker.line("ready").split()[1]
    job = producer.enqueue("test.effect", {"hold_s": 1.5})
    _started(queue_env, job.id)
    worker.signal(signal.SIGTERM)
    assert worker.line("released") == "released -"
    assert worker.wait() == 0
    done = producer.get(job.id)
    assert (done.state, done.attempts) == ("done", 1)
    assert [(a, w) for a, w, _ in runs(queue_env.database, job.id)] == [(1, worker_id)]


def test_sigterm_releases_a_job_still_running_after_the_timeout(
    queue_env: QueueEnv, worker_process: Callable[..., WorkerProcess]
) -> None:
    producer = queue_env.open()
    worker = worker_process(queue_env.environment(shutdown_timeout_s=0.5))
    worker.line("ready")
    job = producer.enqueue("test.effect", {"hold_s": 120})
    _started(queue_env, job.id)
    signalled = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.line("released") == f"released {job.id}"
    assert worker.wait() == 0
    assert time.monotonic() - signalled < 20  # not the 120 s of the job, nor a lease expiry
    released = producer.get(job.id)
    assert (released.state, released.attempts, released.lease_owner) == ("queued", 0, None)
    consumer = queue_env.open()
    consumer.start_consumer(1)
    done = consumer.wait(job.id, 30)
    assert (done.state, done.attempts) == ("done", 1)  # the released attempt did not count
    assert [a for a, _, _ in runs(queue_env.database, job.id)] == [1, 1]
    assert effects(queue_env.database, job.id) == 1


def test_a_handler_that_watches_stopping_hands_its_job_back_at_once(
    queue_env: QueueEnv, worker_process: Callable[..., WorkerProcess]
) -> None:
    producer = queue_env.open()
    worker = worker_process(queue_env.environment(shutdown_timeout_s=60))
    worker.line("ready")
    job = producer.enqueue("test.effect", {"hold_s": 120, "cooperate": True})
    _started(queue_env, job.id)
    signalled = time.monotonic()
    worker.signal(signal.SIGTERM)
    worker.line("released")
    assert worker.wait() == 0
    assert time.monotonic() - signalled < 20  # well before the 60 s shutdown timeout
    released = producer.get(job.id)
    assert (released.state, released.attempts) == ("queued", 0)
