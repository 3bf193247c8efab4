"""The job ledger's transitions: each one conditional SQL statement on the ``jobs`` table.

Every transition states in its ``WHERE`` clause the state it starts from, so two workers (or a
worker and the sweeper) racing on one job cannot both make it: the database applies one and the
other changes no row. This is what makes Huey's at-most-once delivery at-least-once and
run-once-at-a-time:

* **insert**: new ``queued`` rows (many in one statement); with a dedupe key, ``INSERT ...
  ON CONFLICT DO NOTHING`` (PostgreSQL docs, "INSERT ... ON CONFLICT"; SQLite docs, "UPSERT")
  and the existing row is returned.
* **claim**: ``queued`` and due, or ``running`` with an expired lease → ``running``,
  ``attempts + 1``, a new lease for this worker. A second delivery of the same message finds
  the row ``running`` with a live lease and changes nothing.
* **renew / progress / finish / fail / release**: only by the lease holder of *this* attempt
  (``lease_owner`` and ``attempts`` match, still ``running``), so a worker whose lease was
  taken over cannot overwrite the new attempt's outcome (a fencing token: Kleppmann,
  "How to do distributed locking", 2016).
* **sweep**: expired leases → ``queued`` again (or ``failed`` after the last attempt); due
  jobs nobody claimed for a while → their message is sent again; finished jobs past their
  retention → deleted.
* **final-failure hook**: the transition that fails a job for good (its last attempt raised,
  or its lease expired on it) inserts, *in the same transaction*, a ``jobs.final_failure``
  job naming it (dedupe key ``jobs.final_failure:<job id>``) when the job's kind has a hook
  (:mod:`search2o.jobs.registry`). The transition happens once, so the hook job exists once;
  a crash after the commit cannot lose it (the sweeper resends its message).

Times are the caller's UTC clock (``now``): hosts must agree within a small part of
``jobs.lease_s`` (NTP).
"""

from __future__ import annotations

import random
from collections.abc import Container, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from search2o.jobs.info import JobInfo
from search2o.storage import dialect
from search2o.storage.db import Database
from search2o.storage.job_models import Job

__all__ = [
    "FINAL_FAILURE",
    "HOOK_ATTEMPTS",
    "Claim",
    "Lease",
    "NewJob",
    "backoff_delay",
    "claim",
    "due_later",
    "expired_leases",
    "fail",
    "finish",
    "get",
    "insert",
    "insert_many",
    "list_jobs",
    "lost_messages",
    "purge_finished",
    "release",
    "renew",
    "report_progress",
    "requeue_expired",
    "touch_lost",
]


FINAL_FAILURE = "jobs.final_failure"
"""The kind of the job that runs a failed job's final-failure hook (payload ``{"job": id}``)."""
HOOK_ATTEMPTS = 3
"""Attempts of a final-failure hook job: a hook that keeps failing is logged and given up."""


@dataclass(frozen=True)
class Lease:
    """Who runs which attempt of a job: the fencing token of every later write."""

    job_id: str
    worker: str
    attempt: int


@dataclass(frozen=True)
class Claim:
    """A successful claim: the lease and what the handler needs."""

    lease: Lease
    kind: str
    max_attempts: int
    payload: dict[str, Any]
    owner_id: int | None


# The jitter's own generator (seeded from os.urandom): the process-wide ``random`` state belongs
# to whoever embeds us (a seeded simulation, a property-based test) and a job thread must not
# move it under them.
_JITTER = random.Random()


def backoff_delay(
    attempt: int, base_s: float, max_s: float, rng: random.Random | None = None
) -> float:
    """Return the delay in seconds before retrying after failed attempt ``attempt`` (1-based).

    Exponential backoff capped at ``max_s`` with "equal jitter": ``d = min(max_s, base_s *
    2**(attempt - 1))``, then ``d / 2 + uniform(0, d / 2)`` (Brooker, "Exponential Backoff And
    Jitter", AWS Architecture Blog, 2015), so jobs that failed together do not retry together
    and the delay never falls below half of ``d``.
    """
    exponent = min(max(attempt - 1, 0), 60)  # 2**60 s is beyond any cap; avoids overflow
    capped = min(max_s, base_s * 2.0**exponent)
    return capped / 2 + (rng or _JITTER).uniform(0, capped / 2)


@dataclass(frozen=True)
class NewJob:
    """A ``queued`` job to insert: a new random ``id``, the rest as the ``jobs`` columns."""

    id: str
    kind: str
    payload: dict[str, Any]
    dedupe_key: str | None
    owner_id: int | None
    max_attempts: int


def insert(
    database: Database,
    *,
    job_id: str,
    kind: str,
    payload: dict[str, Any],
    dedupe_key: str | None,
    owner_id: int | None,
    max_attempts: int,
    now: datetime,
    session: Session | None = None,
) -> tuple[JobInfo, bool]:
    """Insert one ``queued`` job: :func:`insert_many` of one.

    Returns:
        ``(job, created)``: ``created`` is false when the dedupe key was already taken.

    Raises:
        StorageError: the database failed.

    """
    job = NewJob(job_id, kind, payload, dedupe_key, owner_id, max_attempts)
    return insert_many(database, [job], now=now, session=session)[0]


def insert_many(
    database: Database,
    jobs: Sequence[NewJob],
    *,
    now: datetime,
    session: Session | None = None,
) -> list[tuple[JobInfo, bool]]:
    """Insert ``queued`` jobs in two statements; a taken ``dedupe_key`` returns its job instead.

    One multi-row ``INSERT ... ON CONFLICT (dedupe_key) DO NOTHING`` (PostgreSQL docs,
    "INSERT ... ON CONFLICT"; SQLite docs, "UPSERT"; keys that are ``NULL`` never conflict)
    and one ``SELECT`` of the rows, so a burst's jobs cost two round trips, not two per job.
    A job whose key an earlier job of ``jobs`` carries is not inserted: it is that job. With
    ``session``, the rows are written in that transaction (committed with the caller's other
    writes, or rolled back with them); else in a transaction of its own.

    Returns:
        ``(job, created)`` per job of ``jobs``, in order: ``created`` is false when the dedupe
        key was already taken (the returned job is the one holding it).

    Raises:
        StorageError: the database failed.
        sqlalchemy.exc.IntegrityError: an ``owner_id`` that is no user's.

    """
    if not jobs:
        return []
    rows: list[dict[str, Any]] = []
    keys: set[str] = set()
    for job in jobs:
        if job.dedupe_key is not None:
            if job.dedupe_key in keys:
                continue
            keys.add(job.dedupe_key)
        rows.append(
            {
                "id": job.id,
                "kind": job.kind,
                "dedupe_key": job.dedupe_key,
                "state": "queued",
                "attempts": 0,
                "max_attempts": job.max_attempts,
                "run_after": now,
                "payload": job.payload,
                "owner_id": job.owner_id,
                "created_at": now,
                "updated_at": now,
            }
        )
    with database.within(session) as writing:
        # The Table, not the mapped class: a plain executemany (SQLAlchemy docs, "Sending
        # Multiple Parameters"), batched into multi-row VALUES by the drivers' insertmanyvalues.
        statement = dialect.insert(writing, Job.__table__).on_conflict_do_nothing(
            index_elements=["dedupe_key"]
        )
        writing.execute(statement, rows)
        unkeyed = [row["id"] for row in rows if row["dedupe_key"] is None]
        found = list(
            writing.scalars(
                select(Job).where(or_(Job.id.in_(unkeyed), Job.dedupe_key.in_(sorted(keys))))
            )
        )
        by_id = {row.id: JobInfo.of(row) for row in found}
        by_key = {info.dedupe_key: info for info in by_id.values() if info.dedupe_key}
        result = []
        for job in jobs:
            info = by_id[job.id] if job.dedupe_key is None else by_key[job.dedupe_key]
            result.append((info, info.id == job.id))
        return result


def claim(
    database: Database, job_id: str, worker: str, lease_s: float, now: datetime
) -> Claim | None:
    """Take job ``job_id`` for ``worker`` if it may run now; ``None`` when it may not.

    It may run when it is ``queued`` with ``run_after`` passed, or ``running`` with an expired
    lease, and has attempts left. The claim starts attempt ``attempts + 1`` with a lease until
    ``now + lease_s``.
    """
    statement = (
        update(Job)
        .where(
            Job.id == job_id,
            Job.attempts < Job.max_attempts,
            or_(
                and_(Job.state == "queued", Job.run_after <= now),
                and_(Job.state == "running", Job.lease_expires_at < now),
            ),
        )
        .values(
            state="running",
            attempts=Job.attempts + 1,
            lease_owner=worker,
            lease_expires_at=now + timedelta(seconds=lease_s),
            started_at=func.coalesce(Job.started_at, now),
            updated_at=now,
        )
        .returning(Job.kind, Job.attempts, Job.max_attempts, Job.payload, Job.owner_id)
        .execution_options(synchronize_session=False)
    )
    with database.session() as session:
        row = session.execute(statement).first()
    if row is None:
        return None
    kind, attempts, max_attempts, payload, owner_id = row
    return Claim(Lease(job_id, worker, attempts), kind, max_attempts, dict(payload), owner_id)


def due_later(database: Database, job_id: str, now: datetime) -> datetime | None:
    """Return ``run_after`` of a ``queued`` job that is not due yet (else ``None``)."""
    with database.session() as session:
        return session.scalar(
            select(Job.run_after).where(
                Job.id == job_id, Job.state == "queued", Job.run_after > now
            )
        )


def _held(lease: Lease) -> Any:
    return and_(
        Job.id == lease.job_id,
        Job.state == "running",
        Job.lease_owner == lease.worker,
        Job.attempts == lease.attempt,
    )


def _apply(database: Database, lease: Lease, **values: Any) -> bool:
    statement = (
        update(Job)
        .where(_held(lease))
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    with database.session() as session:
        return (getattr(session.execute(statement), "rowcount", 0) or 0) == 1


def renew(database: Database, leases: Sequence[Lease], lease_s: float, now: datetime) -> set[str]:
    """Extend each lease to ``now + lease_s``; return the ids of jobs whose lease was lost."""
    lost: set[str] = set()
    expires = now + timedelta(seconds=lease_s)
    with database.session() as session:
        for lease in leases:
            statement = (
                update(Job)
                .where(_held(lease))
                .values(lease_expires_at=expires)
                .execution_options(synchronize_session=False)
            )
            if (getattr(session.execute(statement), "rowcount", 0) or 0) != 1:
                lost.add(lease.job_id)
    return lost


def report_progress(
    database: Database, lease: Lease, progress: dict[str, Any], lease_s: float, now: datetime
) -> bool:
    """Store ``progress`` and extend the lease; ``False`` when the lease was lost."""
    return _apply(
        database,
        lease,
        progress=progress,
        lease_expires_at=now + timedelta(seconds=lease_s),
        updated_at=now,
    )


def finish(database: Database, lease: Lease, result: Any, now: datetime) -> bool:
    """Mark the attempt's job ``done`` with ``result``; ``False`` when the lease was lost."""
    return _apply(
        database,
        lease,
        state="done",
        result=result,
        error=None,
        lease_owner=None,
        lease_expires_at=None,
        finished_at=now,
        updated_at=now,
    )


def fail(
    database: Database,
    lease: Lease,
    error: str,
    retry_at: datetime | None,
    now: datetime,
    *,
    hook_job: str | None = None,
) -> bool:
    """Record a failed attempt: ``queued`` again at ``retry_at``, or ``failed`` when ``None``.

    Args:
        hook_job: with ``retry_at`` ``None``, the id of the ``jobs.final_failure`` job to
            insert in the same transaction (the kind has a final-failure hook).

    Returns:
        ``False`` when the lease was lost (nothing was changed).

    """
    if retry_at is not None:
        return _apply(
            database,
            lease,
            state="queued",
            error=error,
            run_after=retry_at,
            lease_owner=None,
            lease_expires_at=None,
            updated_at=now,
        )
    statement = (
        update(Job)
        .where(_held(lease))
        .values(
            state="failed",
            error=error,
            lease_owner=None,
            lease_expires_at=None,
            finished_at=now,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    with database.session() as session:
        failed = (getattr(session.execute(statement), "rowcount", 0) or 0) == 1
        if failed and hook_job is not None:
            _insert_hook(session, hook_job, lease.job_id, now)
        return failed


def _insert_hook(session: Session, hook_job: str, failed_job: str, now: datetime) -> None:
    """Insert the ``jobs.final_failure`` job of ``failed_job`` (once: its dedupe key)."""
    session.execute(
        dialect.insert(session, Job)
        .values(
            id=hook_job,
            kind=FINAL_FAILURE,
            dedupe_key=f"{FINAL_FAILURE}:{failed_job}",
            state="queued",
            attempts=0,
            max_attempts=HOOK_ATTEMPTS,
            run_after=now,
            payload={"job": failed_job},
            owner_id=None,
            created_at=now,
            updated_at=now,
        )
        .on_conflict_do_nothing(index_elements=["dedupe_key"])
    )


def release(database: Database, lease: Lease, now: datetime) -> bool:
    """Give the job back unfinished (the worker stops): ``queued``, due now, attempt uncounted."""
    return _apply(
        database,
        lease,
        state="queued",
        attempts=Job.attempts - 1,
        run_after=now,
        lease_owner=None,
        lease_expires_at=None,
        updated_at=now,
    )


def expired_leases(database: Database, now: datetime, limit: int) -> list[str]:
    """Return up to ``limit`` ids of ``running`` jobs whose lease expired before ``now``."""
    with database.session() as session:
        return list(
            session.scalars(
                select(Job.id)
                .where(Job.state == "running", Job.lease_expires_at < now)
                .order_by(Job.lease_expires_at)
                .limit(limit)
            )
        )


def requeue_expired(
    database: Database,
    job_id: str,
    now: datetime,
    *,
    hooked: Container[str] = frozenset(),
    hook_job: str | None = None,
) -> tuple[str, str | None] | None:
    """Take back a job whose worker stopped renewing its lease.

    With attempts left it becomes ``queued`` (due now); after its last attempt it ends
    ``failed`` saying the worker stopped, and when its kind is in ``hooked`` the
    ``jobs.final_failure`` job ``hook_job`` is inserted in the same transaction.

    Returns:
        ``(new state, id of the hook job inserted or None)``, or ``None`` when the job was no
        longer running on an expired lease (another sweeper took it first).

    """
    stale = and_(Job.id == job_id, Job.state == "running", Job.lease_expires_at < now)
    with database.session() as session:
        requeued = session.execute(
            update(Job)
            .where(stale, Job.attempts < Job.max_attempts)
            .values(
                state="queued",
                run_after=now,
                lease_owner=None,
                lease_expires_at=None,
                updated_at=now,
            )
            .execution_options(synchronize_session=False)
        )
        if (getattr(requeued, "rowcount", 0) or 0) == 1:
            return "queued", None
        failed = session.execute(
            update(Job)
            .where(stale, Job.attempts >= Job.max_attempts)
            .values(
                state="failed",
                error="the worker running its last attempt stopped (its lease expired)",
                lease_owner=None,
                lease_expires_at=None,
                finished_at=now,
                updated_at=now,
            )
            .returning(Job.kind)
            .execution_options(synchronize_session=False)
        ).first()
        if failed is None:
            return None
        if hook_job is not None and failed[0] in hooked:
            _insert_hook(session, hook_job, job_id, now)
            return "failed", hook_job
        return "failed", None


def lost_messages(database: Database, now: datetime, lost_after_s: float, limit: int) -> list[str]:
    """Return ids of ``queued`` jobs due for ``lost_after_s`` and untouched as long."""
    cutoff = now - timedelta(seconds=lost_after_s)
    with database.session() as session:
        return list(
            session.scalars(
                select(Job.id)
                .where(Job.state == "queued", Job.run_after <= cutoff, Job.updated_at <= cutoff)
                .order_by(Job.run_after)
                .limit(limit)
            )
        )


def touch_lost(database: Database, job_id: str, now: datetime, lost_after_s: float) -> bool:
    """Mark a lost job as just resent (so one sweeper resends it); ``False`` if it moved."""
    cutoff = now - timedelta(seconds=lost_after_s)
    statement = (
        update(Job)
        .where(Job.id == job_id, Job.state == "queued", Job.updated_at <= cutoff)
        .values(updated_at=now)
        .execution_options(synchronize_session=False)
    )
    with database.session() as session:
        return (getattr(session.execute(statement), "rowcount", 0) or 0) == 1


def purge_finished(database: Database, before: datetime, limit: int) -> int:
    """Delete up to ``limit`` ``done``/``failed`` jobs finished before ``before``."""
    with database.session() as session:
        ids = list(
            session.scalars(
                select(Job.id)
                .where(Job.state.in_(("done", "failed")), Job.finished_at < before)
                .limit(limit)
            )
        )
        if ids:
            session.execute(
                delete(Job).where(Job.id.in_(ids)).execution_options(synchronize_session=False)
            )
        return len(ids)


def get(database: Database, job_id: str) -> JobInfo | None:
    """Return job ``job_id``, or ``None``."""
    with database.session() as session:
        row = session.get(Job, job_id)
        return JobInfo.of(row) if row is not None else None


def states(database: Database, job_ids: Sequence[str]) -> dict[str, str]:
    """Return the state of each of ``job_ids`` that exists, in one query per 500 ids."""
    found: dict[str, str] = {}
    with database.session() as session:
        for start in range(0, len(job_ids), 500):
            rows = session.execute(
                select(Job.id, Job.state).where(Job.id.in_(job_ids[start : start + 500]))
            )
            found.update((job_id, state) for job_id, state in rows)
    return found


def list_jobs(
    database: Database,
    *,
    owner_id: int | None = None,
    any_owner: bool = True,
    state: str | None = None,
    kind: str | None = None,
    limit: int = 50,
) -> list[JobInfo]:
    """Return up to ``limit`` jobs, newest first, filtered by owner, state and kind.

    ``any_owner`` false restricts to jobs of ``owner_id`` (``None``: the system's jobs).
    """
    query = select(Job).order_by(Job.created_at.desc(), Job.id).limit(limit)
    if not any_owner:
        query = query.where(
            Job.owner_id == owner_id if owner_id is not None else Job.owner_id.is_(None)
        )
    if state is not None:
        query = query.where(Job.state == state)
    if kind is not None:
        query = query.where(Job.kind == kind)
    with database.session() as session:
        return [JobInfo.of(row) for row in session.scalars(query)]
