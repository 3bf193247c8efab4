"""One consumer's deliveries: claim a job, run its handler under a lease, record the outcome.

A :class:`Deliveries` belongs to one start of a consumer (a fresh worker id, the fencing token
of its leases, per start). :meth:`Deliveries.run` is what a Huey worker thread executes for the
message "deliver job <id>":

1. claim the ledger row (:func:`search2o.jobs.ledger.claim`); no claim = a duplicate or early
   delivery, dropped (an early one is put back for its time);
2. run the kind's handler with a :class:`~search2o.jobs.context.JobContext`, while
   :meth:`Deliveries.heartbeat` renews the leases of every running attempt every
   ``lease_s / 3``;
3. record ``done`` with the JSON result, or a retry at ``now + backoff``, or ``failed`` with
   the error: our errors' messages, never a third-party message (it may hold a URL with
   credentials or a document's text; it goes to the worker log). A final failure of a kind
   with a final-failure hook inserts its ``jobs.final_failure`` job in the same transaction
   and sends it (:mod:`search2o.jobs.registry`).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from search2o.errors import ConfigError, InputError, Search2oError
from search2o.heap import release_free_memory
from search2o.jobs import ledger
from search2o.jobs.context import JobContext, JobInterrupted, JobLeaseLost
from search2o.jobs.registry import JobRegistry
from search2o.jobs.settings import JobSettings
from search2o.jobs.values import check_json
from search2o.storage.db import Database
from search2o.storage.models import new_id, utcnow
from search2o.textrules import strip_nul

__all__ = ["Deliveries", "Send", "describe_error", "new_worker_id"]

log = logging.getLogger("search2o.jobs")

Send = Callable[[str, "datetime | None"], bool]
"""Hands the transport "deliver job <id>" (at a UTC time, or now); ``False`` if it failed."""


def new_worker_id() -> str:
    """Return ``host:pid:random``, the lease owner of one consumer start."""
    return f"{socket.gethostname()[:100]}:{os.getpid()}:{secrets.token_hex(4)}"


def describe_error(exc: BaseException, job_id: str, max_chars: int) -> str:
    """Return the error stored with a job for ``exc``, at most ``max_chars`` characters.

    A :class:`~search2o.errors.Search2oError` keeps its message (written for people, without
    secrets: :mod:`search2o.errors`); any other exception only its class, pointing at the
    worker log, which has the traceback.
    """
    if isinstance(exc, Search2oError):
        text = f"{type(exc).__name__}: {exc}"
    else:
        text = f"{type(exc).__name__} in the job handler (the worker log has job {job_id})"
    return strip_nul(text)[:max_chars]


class Deliveries:
    """The deliveries of one consumer start.

    Args:
        settings: the ``jobs`` settings (lease, backoff, bounds).
        database: the ledger's database.
        registry: the kinds this consumer runs.
        send: how to hand a job id back to the transport (retries, releases).

    Attributes:
        worker_id: the lease owner of every attempt this start runs.
        stopping: set when the consumer stops (handlers see it as ``ctx.stopping``).

    """

    def __init__(
        self, settings: JobSettings, database: Database, registry: JobRegistry, send: Send
    ) -> None:
        self.settings = settings
        self.database = database
        self.registry = registry
        self.worker_id = new_worker_id()
        self.stopping = threading.Event()
        self._send = send
        self._lock = threading.Lock()
        self._running: dict[str, JobContext] = {}

    def running(self) -> list[JobContext]:
        """Return the contexts of the attempts running now."""
        with self._lock:
            return list(self._running.values())

    def run(self, job_id: str) -> bool:
        """Run one delivery of job ``job_id``; return whether it was claimed and run here.

        Never raises: Huey's worker must go on.
        """
        try:
            return self._run(job_id)
        except Exception:
            log.exception(
                "job delivery failed; the sweeper retries it", extra={"fields": {"job": job_id}}
            )
            return True

    def heartbeat(self) -> None:
        """Renew the lease of every running attempt once; mark those found taken over."""
        running = self.running()
        if not running:
            return
        lost = ledger.renew(
            self.database, [c.lease for c in running], self.settings.lease_s, utcnow()
        )
        for ctx in running:
            if ctx.job_id in lost:
                ctx.mark_lost()

    def release_running(self) -> list[str]:
        """Give back every running attempt's job (``queued``, uncounted); return their ids.

        What the handlers still return afterwards is dropped (their leases are gone).
        """
        released = []
        for ctx in self.running():
            ctx.mark_lost()
            if ledger.release(self.database, ctx.lease, utcnow()):
                released.append(ctx.job_id)
                self._send(ctx.job_id, None)
        return released

    def _run(self, job_id: str) -> bool:
        now = utcnow()
        claim = ledger.claim(self.database, job_id, self.worker_id, self.settings.lease_s, now)
        if claim is None:
            # Duplicate delivery, finished, or early (a message resent before its retry time):
            # an early one is put back for its time, the others are dropped.
            due = ledger.due_later(self.database, job_id, now)
            if due is not None:
                self._send(job_id, due)
            return False
        ctx = JobContext(
            database=self.database,
            lease=claim.lease,
            kind=claim.kind,
            max_attempts=claim.max_attempts,
            owner_id=claim.owner_id,
            lease_s=self.settings.lease_s,
            stopping=self.stopping,
        )
        with self._lock:
            self._running[job_id] = ctx
        started = time.perf_counter()
        try:
            kind = self.registry.get(claim.kind)
            if kind is None:
                raise ConfigError(
                    f"no handler for job kind {claim.kind!r} in this worker (an older version?)"
                )
            result = kind.handler(ctx, claim.payload)
            check_json(
                result,
                "result",
                max_bytes=self.settings.max_result_bytes,
                setting="jobs.max_result_bytes",
            )
            ctx.flush()
        except JobLeaseLost:
            log.warning("job lease lost; its new attempt decides", extra=_fields(ctx))
        except JobInterrupted:
            if ledger.release(self.database, ctx.lease, utcnow()):
                self._send(job_id, None)
            log.info("job released by its handler", extra=_fields(ctx))
        except Exception as exc:
            self._attempt_failed(ctx, exc)
        else:
            if ctx.lease_lost or not ledger.finish(self.database, ctx.lease, result, utcnow()):
                log.warning("job finished after its lease was lost", extra=_fields(ctx))
            else:
                elapsed = round((time.perf_counter() - started) * 1000, 1)
                log.info("job done", extra=_fields(ctx, ms=elapsed))
        finally:
            with self._lock:
                self._running.pop(job_id, None)
            release_free_memory()  # what an ingest's model batches and rows freed goes back
        return True

    def _attempt_failed(self, ctx: JobContext, exc: Exception) -> None:
        error = describe_error(exc, ctx.job_id, self.settings.max_error_chars)
        now = utcnow()
        # Bad input stays bad: retrying cannot fix it (errors.InputError).
        final = isinstance(exc, InputError) or ctx.attempt >= ctx.max_attempts
        retry_at = None
        if not final:
            delay = ledger.backoff_delay(
                ctx.attempt, self.settings.backoff_base_s, self.settings.backoff_max_s
            )
            retry_at = now + timedelta(seconds=delay)
        hook = new_id() if final and ctx.kind in self.registry.hooked() else None
        if ctx.lease_lost or not ledger.fail(
            self.database, ctx.lease, error, retry_at, now, hook_job=hook
        ):
            log.warning("job failed after its lease was lost", extra=_fields(ctx))
            return
        if retry_at is not None:
            self._send(ctx.job_id, retry_at)
        elif hook is not None:
            self._send(hook, None)
        log.log(
            logging.ERROR if final else logging.WARNING,
            "job failed" if final else "job attempt failed; retrying",
            exc_info=not isinstance(exc, Search2oError),
            extra=_fields(ctx, error=error, retry_at=retry_at.isoformat() if retry_at else None),
        )


def _fields(ctx: JobContext, **more: Any) -> dict[str, Any]:
    return {
        "fields": {
            "job": ctx.job_id,
            "kind": ctx.kind,
            "attempt": ctx.attempt,
            "worker": ctx.worker_id,
            **more,
        }
    }
