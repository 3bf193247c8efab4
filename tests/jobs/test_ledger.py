"""The ledger's transitions on SQLite and PostgreSQL: claims, fencing, backoff, the sweeper."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from search2o.jobs import ledger
from search2o.jobs.ledger import Lease, backoff_delay
from search2o.storage.db import Database
from search2o.storage.models import new_id, utcnow


def _queued(database: Database, max_attempts: int = 3, dedupe_key: str | None = None) -> str:
    job_id = new_id()
    ledger.insert(
        database,
        job_id=job_id,
        kind="k",
        payload={"document_id": 7},
        dedupe_key=dedupe_key,
        owner_id=None,
        max_attempts=max_attempts,
        now=utcnow(),
    )
    return job_id


def test_a_claim_is_taken_once_until_its_lease_expires(database: Database) -> None:
    job_id = _queued(database)
    now = utcnow()
    first = ledger.claim(database, job_id, "w1", 10, now)
    assert first is not None and first.lease == Lease(job_id, "w1", 1)
    assert first.payload == {"document_id": 7}
    assert ledger.claim(database, job_id, "w2", 10, now) is None  # a second delivery
    later = ledger.claim(database, job_id, "w2", 10, now + timedelta(seconds=11))
    assert later is not None and later.lease == Lease(job_id, "w2", 2)
    job = ledger.get(database, job_id)
    assert job is not None and job.state == "running" and job.lease_owner == "w2"


def test_a_worker_whose_lease_was_taken_over_cannot_write(database: Database) -> None:
    job_id = _queued(database)
    now = utcnow()
    old = ledger.claim(database, job_id, "w1", 1, now)
    new = ledger.claim(database, job_id, "w2", 10, now + timedelta(seconds=2))
    assert old is not None and new is not None
    assert not ledger.finish(database, old.lease, {"from": "w1"}, utcnow())
    assert not ledger.fail(database, old.lease, "late", None, utcnow())
    assert not ledger.report_progress(database, old.lease, {"done": 1}, 10, utcnow())
    assert not ledger.release(database, old.lease, utcnow())
    assert ledger.renew(database, [old.lease, new.lease], 10, utcnow()) == {job_id}
    assert ledger.finish(database, new.lease, {"from": "w2"}, utcnow())
    job = ledger.get(database, job_id)
    assert job is not None
    assert (job.state, job.result, job.attempts) == ("done", {"from": "w2"}, 2)
    assert job.lease_owner is None
    assert ledger.claim(database, job_id, "w3", 10, utcnow() + timedelta(days=1)) is None


def test_a_release_gives_the_job_back_without_counting_the_attempt(database: Database) -> None:
    job_id = _queued(database, max_attempts=1)
    claimed = ledger.claim(database, job_id, "w1", 10, utcnow())
    assert claimed is not None
    assert ledger.release(database, claimed.lease, utcnow())
    job = ledger.get(database, job_id)
    assert job is not None and (job.state, job.attempts, job.lease_owner) == ("queued", 0, None)
    again = ledger.claim(database, job_id, "w2", 10, utcnow())  # its only attempt is still there
    assert again is not None and again.lease.attempt == 1


def test_a_failed_attempt_is_retried_at_its_time_then_fails_for_good(database: Database) -> None:
    job_id = _queued(database, max_attempts=2)
    now = utcnow()
    first = ledger.claim(database, job_id, "w1", 10, now)
    assert first is not None
    retry_at = now + timedelta(seconds=30)
    assert ledger.fail(database, first.lease, "ProviderError: down", retry_at, now)
    job = ledger.get(database, job_id)
    assert job is not None and (job.state, job.error) == ("queued", "ProviderError: down")
    assert ledger.due_later(database, job_id, now) == retry_at
    assert ledger.claim(database, job_id, "w1", 10, now + timedelta(seconds=29)) is None
    second = ledger.claim(database, job_id, "w1", 10, retry_at)
    assert second is not None and second.lease.attempt == 2
    assert ledger.fail(database, second.lease, "ProviderError: still down", None, retry_at)
    job = ledger.get(database, job_id)
    assert job is not None
    assert (job.state, job.attempts, job.error) == ("failed", 2, "ProviderError: still down")
    assert job.finished_at is not None
    assert ledger.claim(database, job_id, "w1", 10, retry_at + timedelta(days=1)) is None


def test_the_sweeper_requeues_expired_leases_and_fails_the_last_attempt(
    database: Database,
) -> None:
    retried, last = _queued(database, max_attempts=2), _queued(database, max_attempts=1)
    now = utcnow()
    for job_id in (retried, last):
        assert ledger.claim(database, job_id, "dead", 1, now) is not None
    assert ledger.expired_leases(database, now, 10) == []
    later = now + timedelta(seconds=2)
    assert sorted(ledger.expired_leases(database, later, 10)) == sorted([retried, last])
    assert ledger.requeue_expired(database, retried, later) == ("queued", None)
    assert ledger.requeue_expired(database, last, later) == ("failed", None)
    assert ledger.requeue_expired(database, retried, later) is None  # a second sweeper
    failed = ledger.get(database, last)
    assert failed is not None and failed.state == "failed"
    assert failed.error == "the worker running its last attempt stopped (its lease expired)"


def test_lost_messages_are_found_once_per_quiet_period(database: Database) -> None:
    job_id = _queued(database)
    now = utcnow()
    assert ledger.lost_messages(database, now, 60, 10) == []
    later = now + timedelta(seconds=61)
    assert ledger.lost_messages(database, later, 60, 10) == [job_id]
    assert ledger.touch_lost(database, job_id, later, 60)
    assert not ledger.touch_lost(database, job_id, later, 60)  # another sweeper: already resent
    assert ledger.lost_messages(database, later, 60, 10) == []


def test_finished_jobs_are_purged_after_their_retention(database: Database) -> None:
    done, running = _queued(database), _queued(database)
    now = utcnow()
    claim = ledger.claim(database, done, "w", 10, now)
    assert claim is not None and ledger.finish(database, claim.lease, None, now)
    assert ledger.claim(database, running, "w", 10, now) is not None
    assert ledger.purge_finished(database, now, 10) == 0
    assert ledger.purge_finished(database, now + timedelta(seconds=1), 10) == 1
    assert ledger.get(database, done) is None and ledger.get(database, running) is not None


def test_a_taken_dedupe_key_returns_the_first_job(database: Database) -> None:
    first = _queued(database, dedupe_key="slot:1")
    job, created = ledger.insert(
        database,
        job_id=new_id(),
        kind="k",
        payload={"other": True},
        dedupe_key="slot:1",
        owner_id=None,
        max_attempts=3,
        now=utcnow(),
    )
    assert not created and job.id == first and job.payload == {"document_id": 7}
    assert len(ledger.list_jobs(database)) == 1


def test_many_jobs_go_in_at_once_each_key_once(database: Database) -> None:
    taken = _queued(database, dedupe_key="slot:1")
    jobs = [
        ledger.NewJob(new_id(), "k", {"n": 1}, "slot:1", None, 3),  # taken before
        ledger.NewJob(new_id(), "k", {"n": 2}, "slot:2", None, 3),
        ledger.NewJob(new_id(), "k", {"n": 3}, None, None, 3),
        ledger.NewJob(new_id(), "k", {"n": 4}, "slot:2", None, 3),  # an earlier one's key
        ledger.NewJob(new_id(), "k", {"n": 5}, None, None, 5),
    ]
    stored = ledger.insert_many(database, jobs, now=utcnow())
    assert [created for _, created in stored] == [False, True, True, False, True]
    assert [job.id for job, _ in stored] == [taken, jobs[1].id, jobs[2].id, jobs[1].id, jobs[4].id]
    assert [job.payload for job, _ in stored] == [
        {"document_id": 7},
        {"n": 2},
        {"n": 3},
        {"n": 2},
        {"n": 5},
    ]
    assert stored[4][0].max_attempts == 5 and stored[4][0].state == "queued"
    assert len(ledger.list_jobs(database)) == 4
    assert ledger.insert_many(database, [], now=utcnow()) == []


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 8])
def test_backoff_grows_exponentially_with_equal_jitter_and_a_cap(attempt: int) -> None:
    rng = random.Random(attempt)
    full = min(60.0, 2.0 * 2 ** (attempt - 1))
    delays = [backoff_delay(attempt, 2.0, 60.0, rng) for _ in range(200)]
    assert all(full / 2 <= d <= full for d in delays)
    assert max(delays) - min(delays) > full / 4  # jittered, not constant


def test_backoff_never_overflows() -> None:
    assert backoff_delay(10_000, 1.0, 30.0) <= 30.0
