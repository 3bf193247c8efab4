"""The job queue conformance suite, on SQLite, PostgreSQL and Redis.

The same four promises on every transport: a duplicate dedupe key is a no-op; a worker killed
with SIGKILL mid-job is swept and the job runs again with its effect happening once; a
periodic job runs once per slot across three consumers; a job that keeps failing ends
``failed`` with its error after its retries, spaced by backoff.
"""

from __future__ import annotations

import itertools
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest
from huey import signals as huey_signals

from search2o.jobs import JobInfo, JobQueue
from search2o.jobs.transport import TICK_TASK
from tests.jobs.conftest import BACKENDS, FAST, QueueEnv, WorkerProcess, wait_until
from tests.jobs.kinds import FAILURE, build_registry, effects, runs

pytestmark = BACKENDS


def test_a_duplicate_dedupe_key_is_a_no_op(queue_env: QueueEnv) -> None:
    producers = [queue_env.open(), queue_env.open()]
    barrier = threading.Barrier(8)
    results: list[JobInfo] = []

    def enqueue(n: int) -> None:
        barrier.wait()
        job = producers[n % 2].enqueue("test.effect", {"n": n}, dedupe_key="import:42")
        results.append(job)

    threads = [threading.Thread(target=enqueue, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 8
    assert len({job.id for job in results}) == 1
    first = results[0].id
    assert len(producers[0].list_jobs(kind="test.effect")) == 1
    consumer = queue_env.open()
    consumer.start_consumer(2)
    done = consumer.wait(first, 30)
    assert done.state == "done" and done.attempts == 1
    again = producers[1].enqueue("test.effect", {"n": 99}, dedupe_key="import:42")
    assert again.id == first and again.state == "done"
    assert again.payload == done.payload  # the first payload stays; the second changed nothing
    other = producers[0].enqueue("test.effect", {"n": 100}, dedupe_key="import:43")
    consumer.wait(other.id, 30)  # a later job ran: the duplicate had its chance to run too
    assert [attempt for attempt, _, _ in runs(queue_env.database, first)] == [1]
    assert effects(queue_env.database, first) == 1
    assert len(producers[0].list_jobs(kind="test.effect")) == 2


@pytest.mark.slow
def test_a_worker_killed_mid_job_is_swept_and_its_effect_happens_once(
    queue_env: QueueEnv, worker_process: Callable[..., WorkerProcess]
) -> None:
    producer = queue_env.open()
    worker = worker_process(queue_env.environment())
    killed_id = worker.line("ready").split()[1]
    job = producer.enqueue("test.effect", {"hold_s": 120})
    started = wait_until(lambda: runs(queue_env.database, job.id), 60, "the first attempt")
    assert started[0][:2] == (1, killed_id)
    worker.signal(signal.SIGKILL)
    assert worker.wait() == -signal.SIGKILL
    running = producer.get(job.id)
    assert running.state == "running" and running.lease_owner == killed_id
    assert effects(queue_env.database, job.id) == 1  # the effect happened before the kill

    rescuer = queue_env.open()
    rescuer.start_consumer(1)
    done = rescuer.wait(job.id, 30)
    assert done.state == "done", done
    assert done.attempts == 2
    assert done.result == {"effect": job.id, "attempt": 2}
    attempts = runs(queue_env.database, job.id)
    assert [(a, w) for a, w, _ in attempts] == [(1, killed_id), (2, rescuer.worker_id)]
    assert effects(queue_env.database, job.id) == 1  # ran twice, happened once


def test_a_periodic_job_runs_once_per_slot_across_three_consumers(queue_env: QueueEnv) -> None:
    # A lease long enough that load never expires it: a lost lease runs a job again (at least
    # once, tested on its own above), which is not what this test counts.
    consumers = [
        queue_env.open(build_registry(queue_env.database, periodic=True), lease_s=10.0)
        for _ in "abc"
    ]
    fired = {id(c): 0 for c in consumers}
    lock = threading.Lock()

    def counter(consumer: JobQueue) -> Callable[..., None]:
        def on_enqueued(signal_name: str, task: Any, *args: Any) -> None:
            if type(task).__name__ == TICK_TASK:
                with lock:
                    fired[id(consumer)] += 1

        return on_enqueued

    for consumer in consumers:
        consumer.huey.signal(huey_signals.SIGNAL_ENQUEUED)(counter(consumer))
        consumer.start_consumer(1)
    # Every consumer's scheduler fires the tick at least 4 times, over at least two slots.
    wait_until(lambda: min(fired.values()) >= 4, 30, "four ticks of every consumer")
    jobs = wait_until(
        lambda: [j for j in consumers[0].list_jobs(kind="test.periodic") if j.finished] or None,
        30,
        "a finished periodic job",
    )
    for consumer in consumers:
        consumer.stop_consumer(5)
    jobs = consumers[0].list_jobs(kind="test.periodic")
    slots = [job.payload["slot"] for job in jobs]
    assert len(slots) == len(set(slots)) >= 2, slots  # one job per slot, several slots
    assert all(job.dedupe_key == f"test.periodic:{job.payload['slot']}" for job in jobs)
    for job in jobs:
        assert len(runs(queue_env.database, job.id)) == (1 if job.state == "done" else 0), job
    done = [job for job in jobs if job.state == "done"]
    assert done and effects(queue_env.database, kind="test.periodic") == len(done)


def test_a_job_that_keeps_failing_ends_failed_with_its_error_after_backoff(
    queue_env: QueueEnv,
) -> None:
    consumer = queue_env.open()
    consumer.start_consumer(2)
    job = consumer.enqueue("test.fail", max_attempts=3)
    failed = consumer.wait(job.id, 60)
    assert failed.state == "failed"
    assert failed.attempts == 3
    assert failed.error == f"ProviderError: {FAILURE}"
    assert failed.finished_at is not None and failed.result is None
    started = [at for _, _, at in runs(queue_env.database, job.id)]
    assert len(started) == 3
    for attempt, (before, after) in enumerate(itertools.pairwise(started), start=1):
        # Equal jitter never waits less than half the exponential delay of that attempt.
        floor = min(FAST["backoff_max_s"], FAST["backoff_base_s"] * 2 ** (attempt - 1)) / 2
        assert after - before >= floor - 0.01, (attempt, after - before)
