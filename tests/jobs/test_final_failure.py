"""Final-failure hooks on SQLite, PostgreSQL and Redis: called once when a job is given up.

Whether the last attempt raised or its worker died (the lease expired and sweepers found it),
the kind's ``on_final_failure(payload, reason)`` runs exactly once, as a ``jobs.final_failure``
job of its own; a hook that itself fails is logged and given up after its own few attempts.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from search2o.errors import InputError, ProviderError
from search2o.jobs import JobContext, JobInfo, JobRegistry, ledger
from search2o.jobs.ledger import FINAL_FAILURE, HOOK_ATTEMPTS
from search2o.storage.models import utcnow
from tests.jobs.conftest import BACKENDS, QueueEnv, wait_until

pytestmark = BACKENDS


class Hook:
    """A final-failure hook that records its calls (and raises while ``failing``)."""

    def __init__(self, failing: bool = False) -> None:
        self.calls: list[tuple[dict[str, Any], str]] = []
        self.failing = failing
        self.lock = threading.Lock()

    def __call__(self, payload: dict[str, Any], reason: str) -> None:
        with self.lock:
            self.calls.append((payload, reason))
        if self.failing:
            raise RuntimeError("the messenger is down too")


def registry_with(hook: Hook) -> JobRegistry:
    registry = JobRegistry()

    def broken(ctx: JobContext, payload: dict[str, Any]) -> None:
        if payload.get("bad"):
            raise InputError("payload.bad", "cannot be processed")
        raise ProviderError("the upstream refused")

    registry.add("test.broken", broken, max_attempts=2, on_final_failure=hook)
    registry.add("test.quiet", lambda ctx, payload: None)
    registry.add("test.sleepy", lambda ctx, payload: time.sleep(30), on_final_failure=hook)
    return registry


def hook_jobs(env: QueueEnv) -> list[JobInfo]:
    return ledger.list_jobs(env.database, kind=FINAL_FAILURE)


def test_a_last_attempt_that_raises_calls_the_hook_once_with_the_error(
    queue_env: QueueEnv,
) -> None:
    hook = Hook()
    queue = queue_env.open(registry_with(hook))
    queue.start_consumer(2)
    job = queue.enqueue("test.broken", {"delivery": 7})
    bad = queue.enqueue("test.broken", {"delivery": 8, "bad": True})
    assert queue.wait(job.id, 30).state == "failed"
    assert queue.wait(bad.id, 30).attempts == 1  # bad input: failed at once, hooked too
    wait_until(lambda: len(hook.calls) == 2, 30, "both hooks")
    for hooked in hook_jobs(queue_env):
        assert queue.wait(hooked.id, 30).state == "done"
    time.sleep(1.0)  # nothing else comes
    assert sorted(hook.calls, key=lambda c: c[0]["delivery"]) == [
        ({"delivery": 7}, "ProviderError: the upstream refused"),
        ({"delivery": 8, "bad": True}, "InputError: payload.bad: cannot be processed"),
    ]
    assert len(hook_jobs(queue_env)) == 2


def test_an_expired_last_lease_calls_the_hook_once_however_many_sweep(
    queue_env: QueueEnv,
) -> None:
    hook = Hook()
    queues = [queue_env.open(registry_with(hook)) for _ in range(4)]
    job = queues[0].enqueue("test.sleepy", {"delivery": 9}, max_attempts=1)
    quiet = queues[0].enqueue("test.quiet", max_attempts=1)
    now = utcnow()
    # the workers that took them died: their leases end and nobody renews them
    for each in (job, quiet):
        assert ledger.claim(queue_env.database, each.id, "dead:1:x", 1, now) is not None
    later = now + timedelta(seconds=5)
    barrier = threading.Barrier(len(queues))
    failed: list[int] = []

    def sweep(n: int) -> None:
        barrier.wait()
        failed.append(queues[n].sweep(later).failed)

    threads = [threading.Thread(target=sweep, args=(n,)) for n in range(len(queues))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sum(failed) == 2  # each job failed by one sweeper
    (hooked,) = hook_jobs(queue_env)  # a kind without a hook gets no hook job
    assert hooked.payload == {"job": job.id}
    queues[1].start_consumer(1)
    assert queues[1].wait(hooked.id, 30).state == "done"
    assert hook.calls == [
        ({"delivery": 9}, "the worker running its last attempt stopped (its lease expired)")
    ]


def test_a_hook_that_fails_is_logged_and_given_up(
    queue_env: QueueEnv, caplog: pytest.LogCaptureFixture
) -> None:
    hook = Hook(failing=True)
    queue = queue_env.open(registry_with(hook))
    queue.start_consumer(1)
    caplog.set_level(logging.WARNING, logger="search2o.jobs")
    job = queue.enqueue("test.broken", {"delivery": 10}, max_attempts=1)
    assert queue.wait(job.id, 30).state == "failed"
    (hooked,) = wait_until(lambda: hook_jobs(queue_env), 30, "the hook job")
    done = queue.wait(hooked.id, 30)
    assert done.state == "failed" and done.attempts == HOOK_ATTEMPTS
    assert done.error is not None and done.error.startswith("RuntimeError in the job handler")
    time.sleep(1.5)
    assert len(hook.calls) == HOOK_ATTEMPTS  # never retried forever
    assert len(hook_jobs(queue_env)) == 1  # a failed hook has no hook of its own
    logged = [r for r in caplog.records if getattr(r, "fields", {}).get("kind") == FINAL_FAILURE]
    assert [r.getMessage() for r in logged][-1] == "job failed"
