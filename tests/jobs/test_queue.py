"""JobQueue's rules on SQLite and PostgreSQL (SQLite transport): input, owners, outcomes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, func, select

from search2o import accounts
from search2o.errors import ConfigError, ConflictError, InputError, NotFoundError
from search2o.jobs import JobQueue, JobRegistry, JobRequest, SweepReport
from search2o.jobs.settings import JobSettings
from search2o.jobs.transport import DELIVER_TASK
from search2o.storage.db import Database
from search2o.storage.job_models import Job
from search2o.storage.models import User, utcnow
from tests.jobs.conftest import FAST, wait_until
from tests.jobs.kinds import build_registry, create_tables, runs


@pytest.fixture
def queue(database: Database, tmp_path: Path) -> Iterator[JobQueue]:
    create_tables(database)
    with JobQueue(
        JobSettings(**FAST), database, build_registry(database), data_dir=tmp_path
    ) as opened:
        yield opened


def _count(database: Database) -> int:
    with database.session() as session:
        return int(session.scalar(select(func.count()).select_from(Job)) or 0)


def _user(database: Database, email: str) -> int:
    with database.session() as session:
        return accounts.create_user(session, email).id


@pytest.mark.parametrize(
    ("kind", "payload", "options", "field", "reason"),
    [
        ("nope", {}, {}, "kind", "is not a registered job kind"),
        ("test.effect", {"x": float("nan")}, {}, "payload.x", "finite number"),
        ("test.effect", {"x": "a\x00b"}, {}, "payload.x", "NUL"),
        ("test.effect", {"x": b"bytes"}, {}, "payload.x", "not JSON"),
        ("test.effect", {"x": ["\ud800"]}, {}, "payload.x[0]", "lone surrogate"),
        ("test.effect", {1: "int key"}, {}, "payload", "key that is not a string"),
        ("test.effect", {"x": "y" * 20_000}, {}, "payload", "jobs.max_payload_bytes"),
        ("test.effect", {}, {"dedupe_key": " "}, "dedupe_key", "must not be empty"),
        ("test.effect", {}, {"dedupe_key": "k" * 256}, "dedupe_key", "255"),
        ("test.effect", {}, {"max_attempts": 101}, "max_attempts", "1-100"),
        ("test.effect", {}, {"max_attempts": 0}, "max_attempts", "1-100"),
        ("test.effect", {}, {"owner": 4242}, "owner", "no user has id 4242"),
        ("test.effect", {}, {"owner": 0}, "owner", "user id"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_stores_nothing(
    queue: JobQueue,
    kind: str,
    payload: Any,
    options: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    with pytest.raises(InputError) as caught:
        queue.enqueue(kind, payload, **options)
    assert caught.value.field == field
    assert reason in caught.value.reason
    assert _count(queue.database) == 0


def test_a_payload_that_is_not_an_object_is_refused(queue: JobQueue) -> None:
    with pytest.raises(InputError, match="payload: must be a JSON object"):
        queue.enqueue("test.effect", ["a", "list"])  # type: ignore[arg-type]
    assert _count(queue.database) == 0


def test_a_dedupe_key_of_another_kind_or_owner_is_a_conflict(queue: JobQueue) -> None:
    ann, bob = _user(queue.database, "ann@example.com"), _user(queue.database, "bob@example.com")
    first = queue.enqueue("test.effect", dedupe_key="upload:1", owner=ann)
    with pytest.raises(ConflictError, match="another kind or owner"):
        queue.enqueue("test.effect", dedupe_key="upload:1", owner=bob)
    with pytest.raises(ConflictError, match="another kind or owner"):
        queue.enqueue("test.fail", dedupe_key="upload:1", owner=ann)
    assert queue.enqueue("test.effect", dedupe_key="upload:1", owner=ann).id == first.id
    assert _count(queue.database) == 1


def test_many_jobs_are_enqueued_at_once_or_none_on_bad_input(queue: JobQueue) -> None:
    good = JobRequest("test.effect", {"document_id": 1}, dedupe_key="upload:1")
    bad = JobRequest("test.effect", {}, max_attempts=0)
    with pytest.raises(InputError) as caught:
        queue.enqueue_many([good, bad])
    assert caught.value.field == "max_attempts"
    assert _count(queue.database) == 0
    twin = JobRequest("test.effect", {"document_id": 2}, dedupe_key="upload:1")
    jobs = queue.enqueue_many([good, JobRequest("test.effect", {"steps": 1}), twin])
    assert jobs[0].id == jobs[2].id != jobs[1].id and jobs[2].payload == {"document_id": 1}
    assert _count(queue.database) == 2
    queue.start_consumer(workers=1)
    for job in jobs[:2]:  # each new job's message was sent: both run
        assert queue.wait(job.id, 30).state == "done"


def test_another_users_job_is_not_found_like_a_missing_one(queue: JobQueue) -> None:
    ann, bob = _user(queue.database, "ann@example.com"), _user(queue.database, "bob@example.com")
    job = queue.enqueue("test.effect", {"document_id": 3}, owner=ann)
    assert queue.get(job.id, owner=ann).id == job.id
    assert queue.get(job.id).id == job.id  # the server itself
    missing = "0" * 32
    with pytest.raises(NotFoundError) as theirs:
        queue.get(job.id, owner=bob)
    with pytest.raises(NotFoundError) as absent:
        queue.get(missing, owner=bob)
    assert theirs.value.message == absent.value.message.replace(missing, job.id)
    for malformed in ("", "x" * 32, "../etc", "A" * 32, "0" * 33):
        with pytest.raises(NotFoundError):
            queue.get(malformed)
    assert [j.id for j in queue.list_jobs(owner=ann)] == [job.id]
    assert queue.list_jobs(owner=bob) == []
    public = queue.get(job.id, owner=ann).to_public()
    assert public["state"] == "queued" and "payload" not in public and "lease_owner" not in public


def test_a_users_jobs_go_with_the_user(queue: JobQueue) -> None:
    ann = _user(queue.database, "ann@example.com")
    job = queue.enqueue("test.effect", owner=ann)
    with queue.database.session() as session:
        session.execute(delete(User).where(User.id == ann))
    with pytest.raises(NotFoundError):
        queue.get(job.id)


@pytest.mark.parametrize(
    ("options", "field"), [({"state": "lost"}, "state"), ({"limit": 0}, "limit")]
)
def test_listing_refuses_an_unknown_state_or_limit(
    queue: JobQueue, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InputError) as caught:
        queue.list_jobs(**options)
    assert caught.value.field == field


def test_bad_input_in_a_handler_fails_the_job_at_once(queue: JobQueue) -> None:
    queue.start_consumer(1)
    job = queue.wait(queue.enqueue("test.fail", {"bad_input": True}).id, 30)
    assert (job.state, job.attempts) == ("failed", 1)
    assert job.error == "InputError: payload.file: is not a file we can read"


def test_a_foreign_errors_message_stays_in_the_worker_log(queue: JobQueue) -> None:
    queue.start_consumer(1)
    job = queue.wait(queue.enqueue("test.fail", {"foreign": True}, max_attempts=1).id, 30)
    assert job.state == "failed"
    assert job.error == f"RuntimeError in the job handler (the worker log has job {job.id})"
    assert "hunter2" not in (job.error or "")


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"size": 70_000}, "jobs.max_result_bytes"),
        ({"bad": "nan"}, "result.when: must be a finite number"),
        ({"bad": "set"}, "result.ids: is a set, which is not JSON"),
    ],
)
def test_a_result_that_cannot_be_stored_fails_the_job(
    queue: JobQueue, payload: dict[str, Any], reason: str
) -> None:
    queue.start_consumer(1)
    job = queue.wait(queue.enqueue("test.result", payload).id, 30)
    assert (job.state, job.attempts, job.result) == ("failed", 1, None)
    assert job.error is not None and job.error.startswith("InputError: result")
    assert reason in job.error


def test_a_job_of_a_kind_this_worker_does_not_know_fails_saying_so(
    queue: JobQueue, tmp_path: Path
) -> None:
    newer = build_registry(queue.database)
    newer.add("reports.monthly", lambda ctx, payload: None)
    with JobQueue(queue.settings, queue.database, newer, data_dir=tmp_path) as producer:
        job = producer.enqueue("reports.monthly", max_attempts=1)
    queue.start_consumer(1)
    failed = queue.wait(job.id, 30)
    assert failed.state == "failed"
    assert failed.error == (
        "ConfigError: no handler for job kind 'reports.monthly' in this worker (an older version?)"
    )


def test_progress_is_reported_and_kept(queue: JobQueue) -> None:
    queue.start_consumer(1)
    job = queue.wait(queue.enqueue("test.effect", {"steps": 5}).id, 30)
    assert job.state == "done"
    assert job.progress is not None and job.progress.to_json() == {
        "done": 5,
        "total": 5,
        "message": "step 5",
    }
    assert job.to_public()["progress"] == {"done": 5, "total": 5, "message": "step 5"}
    assert job.result == {"effect": job.id, "attempt": 1}
    assert [a for a, _, _ in runs(queue.database, job.id)] == [1]


def test_a_second_consumer_start_is_a_conflict_and_workers_are_bounded(queue: JobQueue) -> None:
    with pytest.raises(InputError, match="workers: must be 1-64"):
        queue.start_consumer(0)
    queue.start_consumer(1)
    with pytest.raises(ConflictError):
        queue.start_consumer(1)
    assert queue.stop_consumer(1) == []
    assert not queue.consuming


def test_a_periodic_kind_faster_than_the_tick_is_refused(
    database: Database, tmp_path: Path
) -> None:
    registry = JobRegistry()
    registry.add("too.often", lambda ctx, payload: None, every_s=0.5)
    with pytest.raises(ConfigError, match=r"more often than jobs\.tick_s"):
        JobQueue(JobSettings(**FAST), database, registry, data_dir=tmp_path)


@pytest.mark.parametrize(
    ("name", "options", "needle"),
    [
        ("Bad Name", {}, "must be 1-100 characters"),
        ("ok", {"max_attempts": 0}, "max_attempts"),
        ("ok", {"every_s": 0}, "every_s"),
    ],
)
def test_the_registry_refuses_bad_kinds(name: str, options: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        JobRegistry().add(name, lambda ctx, payload: None, **options)


def test_a_kind_is_registered_once() -> None:
    registry = JobRegistry()
    registry.add("one", lambda ctx, payload: None)
    with pytest.raises(ConfigError, match="registered twice"):
        registry.add("one", lambda ctx, payload: None)


def test_a_retry_is_scheduled_at_its_utc_time_whatever_the_local_time_zone(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time as time_module

    monkeypatch.setenv("TZ", "Asia/Tokyo")  # UTC+9: a naive time read as local is 9 h off
    time_module.tzset()
    try:
        slow = queue.settings.model_copy(update={"backoff_base_s": 60.0, "backoff_max_s": 60.0})
        queue.settings = slow
        queue.start_consumer(1)
        job = queue.enqueue("test.fail", max_attempts=2)
        retry = wait_until(
            lambda: (j := queue.get(job.id)).state == "queued" and j.attempts == 1 and j,
            30,
            "the first failure",
        )
        queue.stop_consumer(2)
        # A delayed message waits in the queue until a worker moves it to Huey's schedule.
        waiting = queue.huey.pending() + queue.huey.scheduled()
        (scheduled,) = [m for m in waiting if type(m).__name__ == DELIVER_TASK]
        assert scheduled.eta is not None
        eta = scheduled.eta.replace(tzinfo=UTC)
        assert abs((eta - retry.run_after).total_seconds()) < 1
        assert [a for a, _, _ in runs(queue.database, job.id)] == [1]  # not retried at once
    finally:
        monkeypatch.delenv("TZ")
        time_module.tzset()


def test_a_sweep_repairs_once_and_reports_what_it_did(queue: JobQueue) -> None:
    from search2o.jobs import ledger

    dead = queue.enqueue("test.effect")
    now = utcnow()
    assert ledger.claim(queue.database, dead.id, "dead-worker", 1, now) is not None
    lost = queue.enqueue("test.effect")
    later = now + timedelta(seconds=queue.settings.lost_after_s + 5)
    assert queue.sweep(later) == SweepReport(requeued=1, failed=0, resent=1, purged=0)
    assert queue.sweep(later) == SweepReport()  # a second sweeper finds nothing left
    assert queue.get(dead.id).state == "queued" and queue.get(dead.id).attempts == 1
    for job_id in (dead.id, lost.id):
        claim = ledger.claim(queue.database, job_id, "w", 10, later)
        assert claim is not None and ledger.finish(queue.database, claim.lease, None, later)
    purge_at = later + timedelta(days=queue.settings.keep_finished_days, seconds=1)
    assert queue.sweep(purge_at).purged == 2
    assert queue.list_jobs() == []


def test_every_ended_job_gives_freed_memory_back(
    queue: JobQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a job freed (an ingest's model batches, its rows) is returned to the system once
    # the job ends, done or failed; bench/ingest_memory.py measures the effect on a server.
    calls: list[str] = []
    monkeypatch.setattr(
        "search2o.jobs.delivery.release_free_memory", lambda: bool(calls.append("released"))
    )
    queue.start_consumer(1)
    done = queue.wait(queue.enqueue("test.effect", {}).id, 30)
    assert done.state == "done"
    wait_until(lambda: len(calls) >= 1, 10, "memory released after a done job")
    failed = queue.wait(queue.enqueue("test.fail", {"bad_input": True}).id, 30)
    assert failed.state == "failed"
    wait_until(lambda: len(calls) >= 2, 10, "memory released after a failed job")
