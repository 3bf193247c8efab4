"""Reading jobs from the ledger alone: no transport needed (the CLI, an API process).

:meth:`JobQueue.get <search2o.jobs.queue.JobQueue.get>` and ``list_jobs`` are these functions
on the queue's database; they also work while the transport (Redis) is down.
"""

from __future__ import annotations

import re

from search2o.errors import InputError, NotFoundError
from search2o.jobs import ledger
from search2o.jobs.info import JOB_STATES, JobInfo
from search2o.storage.db import Database

__all__ = ["MAX_LIST", "find_job", "find_jobs"]

_JOB_ID = re.compile(r"^[0-9a-f]{32}$")
MAX_LIST = 1000
"""Most jobs one listing returns."""


def find_job(database: Database, job_id: str, owner: int | None = None) -> JobInfo:
    """Return job ``job_id``.

    Args:
        owner: a user id: the job must belong to that user, else it is "not found" like a
            missing one; ``None``: no check (the server itself, admins, the CLI).

    Raises:
        NotFoundError: no such job (or not ``owner``'s; or a malformed id).
        StorageError: the database failed.

    """
    job = ledger.get(database, job_id) if _JOB_ID.match(job_id or "") else None
    if job is None or (owner is not None and job.owner_id != owner):
        raise NotFoundError(f"job {job_id[:64]!r} not found")
    return job


def find_jobs(
    database: Database,
    *,
    owner: int | None = None,
    state: str | None = None,
    kind: str | None = None,
    limit: int = 50,
) -> list[JobInfo]:
    """Return up to ``limit`` (1-1000) jobs, newest first.

    Args:
        owner: only this user's jobs; ``None``: every job.
        state: only jobs in this state (``queued``, ``running``, ``done``, ``failed``).
        kind: only jobs of this kind.

    Raises:
        InputError: an unknown state or a limit outside 1-1000.
        StorageError: the database failed.

    """
    if state is not None and state not in JOB_STATES:
        raise InputError("state", f"must be one of {', '.join(JOB_STATES)}, got {state!r}")
    if not 1 <= limit <= MAX_LIST:
        raise InputError("limit", f"must be 1-{MAX_LIST}, got {limit}")
    return ledger.list_jobs(
        database, owner_id=owner, any_owner=owner is None, state=state, kind=kind, limit=limit
    )
