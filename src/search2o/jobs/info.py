"""What a job looks like to its callers: :class:`JobInfo`, its state and progress; a request.

States::

    queued ──claim──▶ running ──success──▶ done
      ▲                  │
      └──retry/backoff───┤ (an exception, attempts left; or the lease expired)
                         └──no attempts left / bad input──▶ failed
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from search2o.storage.job_models import Job

__all__ = ["JOB_STATES", "JobInfo", "JobProgress", "JobRequest", "JobState"]

JobState = Literal["queued", "running", "done", "failed"]
JOB_STATES: tuple[JobState, ...] = ("queued", "running", "done", "failed")


@dataclass(frozen=True)
class JobRequest:
    """One job to enqueue: :meth:`search2o.jobs.queue.JobQueue.enqueue`'s arguments.

    ``kind`` a registered kind; ``payload`` a JSON object of ids and names; ``dedupe_key``
    makes the enqueue idempotent; ``owner`` a user id; ``max_attempts`` 1-100 (default: the
    kind's, else ``jobs.max_attempts``).
    """

    kind: str
    payload: dict[str, Any] | None = None
    dedupe_key: str | None = None
    owner: int | None = None
    max_attempts: int | None = None


@dataclass(frozen=True)
class JobProgress:
    """How far a running job got: ``done`` of ``total`` units (``None``: unknown) and a note."""

    done: int
    total: int | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return ``{"done", "total", "message"}`` (the stored and public form)."""
        return {"done": self.done, "total": self.total, "message": self.message}

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> JobProgress | None:
        """Read the stored form back (``None`` stays ``None``)."""
        if not value:
            return None
        total = value.get("total")
        message = value.get("message")
        return cls(
            int(value.get("done", 0)),
            int(total) if total is not None else None,
            str(message) if message is not None else None,
        )


@dataclass(frozen=True)
class JobInfo:
    """A snapshot of one job's ledger row.

    Attributes:
        id: 32 hex digits.
        kind: the registered kind.
        state: ``queued``, ``running``, ``done`` or ``failed``.
        attempts: attempts started so far (a released lease does not count).
        max_attempts: attempts before ``failed``.
        run_after: the earliest start of the next attempt (UTC).
        progress: the last progress the handler reported, if any.
        result: the handler's JSON result once ``done``.
        error: the last attempt's error (``failed``, or ``queued`` for a retry).
        owner_id: the user the job belongs to (``None``: the system's).
        dedupe_key: the key that makes a second enqueue a no-op, if any.
        payload: the JSON object given at enqueue (ids and names only).
        lease_owner: the worker holding the lease while ``running``.
        lease_expires_at: when that lease ends unless renewed.

    """

    id: str
    kind: str
    state: JobState
    attempts: int
    max_attempts: int
    run_after: datetime
    progress: JobProgress | None
    result: Any
    error: str | None
    owner_id: int | None
    dedupe_key: str | None
    payload: dict[str, Any]
    lease_owner: str | None
    lease_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, row: Job) -> JobInfo:
        """Build the snapshot of a ledger row."""
        state: JobState = row.state if row.state in JOB_STATES else "failed"  # type: ignore[assignment]
        return cls(
            id=row.id,
            kind=row.kind,
            state=state,
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            run_after=row.run_after,
            progress=JobProgress.from_json(row.progress),
            result=row.result,
            error=row.error,
            owner_id=row.owner_id,
            dedupe_key=row.dedupe_key,
            payload=dict(row.payload or {}),
            lease_owner=row.lease_owner,
            lease_expires_at=row.lease_expires_at,
            created_at=row.created_at,
            updated_at=row.updated_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
        )

    @property
    def finished(self) -> bool:
        """``True`` once the job is ``done`` or ``failed`` (nothing more will run)."""
        return self.state in ("done", "failed")

    def to_public(self) -> dict[str, Any]:
        """Return what a client may see (``GET /v1/jobs/{id}``): no payload, lease or key.

        Shape: ``{"id", "kind", "state", "attempts", "max_attempts", "progress": {"done",
        "total", "message"} | null, "result", "error", "created_at", "started_at",
        "finished_at"}`` with times as ISO 8601 UTC strings (or ``null``).
        """

        def iso(value: datetime | None) -> str | None:
            return value.isoformat() if value is not None else None

        return {
            "id": self.id,
            "kind": self.kind,
            "state": self.state,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "progress": self.progress.to_json() if self.progress else None,
            "result": self.result,
            "error": self.error,
            "created_at": iso(self.created_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
        }
