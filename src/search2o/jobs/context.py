"""What a handler gets besides its payload: :class:`JobContext` (progress, lease, stop signal)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from search2o.jobs import ledger
from search2o.jobs.ledger import Lease
from search2o.storage.db import Database
from search2o.storage.models import utcnow

__all__ = ["JobContext", "JobInterrupted", "JobLeaseLost"]

_PROGRESS_EVERY_S = 0.5
"""Progress is written at most this often (the last report of a run is always written)."""
_MAX_MESSAGE_CHARS = 200


class JobLeaseLost(Exception):  # noqa: N818 - it names an event, like StopIteration
    """The attempt's lease was taken over (it expired): stop, another attempt runs the job.

    Raised by :meth:`JobContext.progress` and :meth:`JobContext.heartbeat`; the queue drops
    whatever the attempt returns afterwards.
    """


class JobInterrupted(Exception):  # noqa: N818
    """Raised by a handler that stops early because the worker is stopping.

    The queue gives the job back (``queued``, the attempt not counted) and another worker runs
    it from the start, so the handler must leave nothing it cannot redo.
    """


class JobContext:
    """One attempt of one job, as its handler sees it.

    Attributes:
        job_id: the job's id (key idempotent effects by it).
        kind: the job's kind.
        attempt: 1 for the first attempt, then 2, 3, ...
        max_attempts: the attempt after which a failure is final.
        owner_id: the user the job belongs to, or ``None``.
        worker_id: the worker running this attempt.
        stopping: set when the worker is stopping; a long handler may check it and raise
            :class:`JobInterrupted` to hand the job back at once instead of being waited for.

    The lease is renewed in the background while the handler runs; :meth:`progress` also
    renews it.
    """

    def __init__(
        self,
        *,
        database: Database,
        lease: Lease,
        kind: str,
        max_attempts: int,
        owner_id: int | None,
        lease_s: float,
        stopping: threading.Event,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._database = database
        self.lease = lease
        self.job_id = lease.job_id
        self.kind = kind
        self.attempt = lease.attempt
        self.max_attempts = max_attempts
        self.owner_id = owner_id
        self.worker_id = lease.worker
        self.stopping = stopping
        self._lease_s = lease_s
        self._clock = clock
        self._lost = threading.Event()
        self._last_write = -_PROGRESS_EVERY_S
        self._pending: dict[str, Any] | None = None

    @property
    def database(self) -> Database:
        """The ledger's database (the job runner's own kinds read the ledger with it)."""
        return self._database

    @property
    def lease_lost(self) -> bool:
        """``True`` once the lease was found taken over (the attempt's outcome is dropped)."""
        return self._lost.is_set()

    def mark_lost(self) -> None:
        """Record that the lease was taken over (called by the queue's heartbeat)."""
        self._lost.set()

    def progress(self, done: int, total: int | None = None, message: str | None = None) -> None:
        """Report that ``done`` of ``total`` units are done (``total`` ``None``: unknown).

        Written at most every 0.5 s (the report reaching ``total`` at once); ``message`` is cut
        to 200 characters. Each write renews the lease.

        Raises:
            JobLeaseLost: the lease was taken over; stop working.

        """
        if self._lost.is_set():
            raise JobLeaseLost(self.job_id)
        note = message[:_MAX_MESSAGE_CHARS].replace("\x00", "") if message else None
        self._pending = {"done": int(done), "total": total, "message": note}
        final = total is not None and done >= total
        if final or self._clock() - self._last_write >= _PROGRESS_EVERY_S:
            self.flush()

    def flush(self) -> None:
        """Write the last reported progress now, if any is pending.

        Raises:
            JobLeaseLost: the lease was taken over.

        """
        if self._pending is None:
            return
        pending, self._pending = self._pending, None
        self._last_write = self._clock()
        if not ledger.report_progress(self._database, self.lease, pending, self._lease_s, utcnow()):
            self._lost.set()
            raise JobLeaseLost(self.job_id)

    def heartbeat(self) -> None:
        """Renew the lease now (the queue also does it every ``lease_s / 3``).

        Raises:
            JobLeaseLost: the lease was taken over.

        """
        if self._lost.is_set() or ledger.renew(
            self._database, [self.lease], self._lease_s, utcnow()
        ):
            self._lost.set()
            raise JobLeaseLost(self.job_id)
