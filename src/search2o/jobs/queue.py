"""The job queue: enqueue, look up, and consume jobs, at least once, with idempotent handlers.

:class:`JobQueue` ties the ledger (:mod:`search2o.jobs.ledger`, the ``jobs`` table: what a job
is and whether it may run) to the transport (:mod:`search2o.jobs.transport`, Huey: which worker
hears about it and when). An enqueue inserts the ledger row, then hands Huey a message holding
only the job id. A delivery claims the row with a conditional ``UPDATE``, runs the kind's
handler with a lease renewed in the background, and records ``done`` with the result, or a
retry after exponential backoff, or ``failed`` with the error. Anything the transport loses (a
message, a worker killed mid-job) is found by the sweeper in the ledger and sent again, so
delivery is at-least-once: handlers must be idempotent (:mod:`search2o.jobs.registry`).

Every consumer's Huey scheduler fires the periodic *tick* every ``jobs.tick_s``; the tick runs
the sweeper (every ``jobs.sweep_interval_s``) and enqueues each periodic kind with the dedupe
key ``<kind>:<slot start>``; however many consumers tick, one enqueue per slot wins.

Lifecycle (one for every backend): the constructor opens the transport; :meth:`start_consumer`
runs worker threads inside this process (``search2o serve``), :meth:`run_worker` does so in the
foreground until SIGTERM or SIGINT (``search2o worker``); :meth:`close` (or ``with``) stops the
consumer and closes the transport.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from search2o.errors import ConfigError, ConflictError, InputError
from search2o.jobs import ledger
from search2o.jobs.delivery import Deliveries
from search2o.jobs.info import JobInfo, JobRequest
from search2o.jobs.lookup import find_job, find_jobs
from search2o.jobs.registry import JobRegistry
from search2o.jobs.settings import JobSettings
from search2o.jobs.transport import DELIVER_TASK, TICK_TASK, QueueConsumer, open_huey
from search2o.jobs.values import check_json
from search2o.stop_signals import stop_on_signals
from search2o.storage.db import Database
from search2o.storage.models import new_id, utcnow
from search2o.textrules import check_text

__all__ = ["JobQueue", "SweepReport"]

log = logging.getLogger("search2o.jobs")

_SWEEP_BATCH = 500
_PURGE_BATCHES = 20
_MAX_DEDUPE_CHARS = 255
# First wait of an idle SQLite worker; Huey's consumer multiplies it by 1.15 per empty look
# up to jobs.poll_max_s (Huey docs, "Consumer options": -d, -b, -m).
_POLL_INITIAL_S = 0.01
_POLL_BACKOFF = 1.15
_IDLE_EXIT_S = 1.5


@dataclass(frozen=True)
class SweepReport:
    """What one sweep did.

    Attributes:
        requeued: running jobs whose lease expired, queued again.
        failed: running jobs whose lease expired on their last attempt, now ``failed``.
        resent: due queued jobs whose message was lost, sent again.
        purged: finished jobs deleted after ``jobs.keep_finished_days``.

    """

    requeued: int = 0
    failed: int = 0
    resent: int = 0
    purged: int = 0


class JobQueue:
    """The job queue of one process over the ledger in ``database`` and the configured transport.

    Args:
        settings: the ``jobs`` settings section.
        database: the open database holding the ``jobs`` table.
        registry: the kinds this process may enqueue and run.
        data_dir: where the ``sqlite`` transport keeps ``jobs.db`` by default.

    Raises:
        ConfigError: a periodic kind runs more often than ``jobs.tick_s``, or ``postgres``
            without a PostgreSQL database.
        StorageError: the transport cannot be opened (SQLite file, PostgreSQL, Redis).

    Thread-safe: enqueue and look-ups may run from any thread while the consumer runs.
    """

    def __init__(
        self,
        settings: JobSettings,
        database: Database,
        registry: JobRegistry | None = None,
        *,
        data_dir: Path,
    ) -> None:
        self.settings = settings
        self.database = database
        self.registry = registry if registry is not None else JobRegistry()
        for kind in self.registry.periodic():
            if kind.every_s is not None and kind.every_s < settings.tick_s:
                raise ConfigError(
                    f"job kind {kind.name!r} runs every {kind.every_s:g} s, more often than "
                    f"jobs.tick_s ({settings.tick_s} s) fires periodic jobs"
                )
        self.huey = open_huey(settings, database, data_dir)
        """The Huey instance (its signals and storage are Huey's public API)."""
        self._deliver_task = self.huey.task(name=DELIVER_TASK)(self._deliver)
        self.huey.periodic_task(_every_tick, name=TICK_TASK)(self._tick)
        self._consumer: QueueConsumer | None = None
        self._deliveries: Deliveries | None = None
        self._heartbeat: threading.Thread | None = None
        self._heartbeat_stop = threading.Event()
        self._next_sweep = 0.0
        self._inline: Deliveries | None = None  # run_here's, when this process does not consume
        self._inline_lock, self._inline_stop = threading.Lock(), threading.Event()

    # --- producing and reading ----------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        dedupe_key: str | None = None,
        owner: int | None = None,
        max_attempts: int | None = None,
        session: Session | None = None,
        sends: list[JobInfo] | None = None,
    ) -> JobInfo:
        """Add a job of ``kind``; with a ``dedupe_key`` already used, return that job (a no-op).

        Args:
            kind: a kind registered in this queue's registry.
            payload: a JSON object of ids and names (never user content: it is stored in
                plain text), at most ``jobs.max_payload_bytes``.
            dedupe_key: makes the enqueue idempotent: the same key returns the first job,
                whatever its state, for as long as its row is kept (``jobs.keep_finished_days``
                after it finished). Put the owner in per-user keys.
            owner: the user id the job belongs to (:meth:`get` answers only them).
            max_attempts: 1-100; default: the kind's, else ``jobs.max_attempts``.
            session: a transaction of this queue's database to write the row in, committed
                by the caller with its own writes (a surface's delivery record and its job:
                one commit, both or neither); default: a transaction of its own.
            sends: with ``session``: a new job is appended here instead of having its message
                sent at the commit; the caller hands each to :meth:`send` once committed (the
                messengers' group commit answers first, then sends). A job never sent is
                sent by the sweeper after ``jobs.lost_after_s``.

        Returns:
            The job as stored (``queued`` unless it is an earlier job with the same key).

        Raises:
            InputError: an unknown kind or owner, or a bad payload, key or ``max_attempts``;
                nothing was stored.
            ConflictError: ``dedupe_key`` belongs to a job of another kind or owner.
            StorageError: the database failed.

        The message to the transport is sent after the row is committed (with ``session``:
        when that session commits; never when it rolls back); when sending fails the job is
        still kept and the sweeper sends it after ``jobs.lost_after_s``.
        """
        request = JobRequest(kind, payload, dedupe_key, owner, max_attempts)
        return self.enqueue_many([request], session=session, sends=sends)[0]

    def enqueue_many(
        self,
        requests: list[JobRequest],
        *,
        session: Session | None = None,
        sends: list[JobInfo] | None = None,
    ) -> list[JobInfo]:
        """Add many jobs in one multi-row insert (:func:`search2o.jobs.ledger.insert_many`).

        Each request as :meth:`enqueue`'s arguments, ``session`` and ``sends`` as there; a
        request whose dedupe key an earlier one of ``requests`` carries returns that job. The
        messengers' group commit enqueues a burst's answer jobs so: two statements, not two per
        job.

        Returns:
            The jobs as stored, one per request, in order.

        Raises:
            InputError: a request names an unknown kind or owner, or has a bad payload, key or
                ``max_attempts`` (the field is named); nothing was stored.
            ConflictError: a ``dedupe_key`` belongs to a job of another kind or owner (the
                others' jobs are stored, and sent unless ``session`` is given, whose caller
                decides whether to commit).
            StorageError: the database failed.

        """
        rows = [self._checked(request) for request in requests]
        try:
            stored = ledger.insert_many(self.database, rows, now=utcnow(), session=session)
        except IntegrityError as exc:  # the owner's foreign key: ids are random, keys upserted
            owners = ", ".join(sorted({str(r.owner) for r in requests if r.owner is not None}))
            raise InputError("owner", f"no user has id {owners}") from exc
        created: list[JobInfo] = []
        conflict: ConflictError | None = None
        for request, (job, new) in zip(requests, stored, strict=True):
            if new:
                created.append(job)
            elif job.kind != request.kind or job.owner_id != request.owner:
                conflict = conflict or ConflictError(
                    f"dedupe_key {request.dedupe_key!r} is taken by a job of another kind or owner"
                )
        if session is None:  # committed: the other jobs exist, so they are sent
            self.send_all(created)
        elif sends is not None:
            sends.extend(created)
        elif created:
            # A message for a row that may still roll back would be refused by the ledger
            # anyway, but sending it only after the commit keeps the message's meaning.
            event.listen(session, "after_commit", lambda _s: self.send_all(created), once=True)
        if conflict is not None:
            raise conflict
        return [job for job, _ in stored]

    def _checked(self, request: JobRequest) -> ledger.NewJob:
        """Return ``request``'s row to insert, or raise ``InputError`` naming the bad field."""
        registered = self.registry.get(request.kind)
        if registered is None:
            known = ", ".join(self.registry.names()) or "none"
            raise InputError(
                "kind", f"{request.kind!r} is not a registered job kind (known: {known})"
            )
        body = {} if request.payload is None else request.payload
        if not isinstance(body, dict):
            raise InputError("payload", "must be a JSON object")
        check_json(
            body,
            "payload",
            max_bytes=self.settings.max_payload_bytes,
            setting="jobs.max_payload_bytes",
        )
        dedupe_key = request.dedupe_key
        if dedupe_key is not None:
            dedupe_key = check_text(dedupe_key, "dedupe_key", max_chars=_MAX_DEDUPE_CHARS)
        attempts = (
            request.max_attempts
            if request.max_attempts is not None
            else registered.max_attempts or self.settings.max_attempts
        )
        if not 1 <= attempts <= 100:
            raise InputError("max_attempts", f"must be 1-100, got {attempts}")
        owner = request.owner
        if owner is not None and owner < 1:
            raise InputError("owner", f"must be a user id (>= 1), got {owner}")
        return ledger.NewJob(new_id(), request.kind, body, dedupe_key, owner, attempts)

    def send(self, job: JobInfo) -> None:
        """Send a newly committed job's message (one enqueued with ``sends``) and log it.

        A failure to send is logged, not raised: the job is kept and the sweeper sends it
        after ``jobs.lost_after_s``.
        """
        self._send(job.id)
        log.info("job queued", extra={"fields": {"job": job.id, "kind": job.kind}})

    def send_all(self, jobs: list[JobInfo]) -> None:
        """:meth:`send` each of ``jobs`` in order (a committed batch's new jobs)."""
        for job in jobs:
            self.send(job)

    def get(self, job_id: str, owner: int | None = None) -> JobInfo:
        """Return job ``job_id``, owner-checked: :func:`search2o.jobs.lookup.find_job`."""
        return find_job(self.database, job_id, owner)

    def states(self, job_ids: list[str]) -> dict[str, str]:
        """Return the state of each existing job of ``job_ids`` (one light query per 500)."""
        return ledger.states(self.database, job_ids)

    def list_jobs(
        self,
        *,
        owner: int | None = None,
        state: str | None = None,
        kind: str | None = None,
        limit: int = 50,
    ) -> list[JobInfo]:
        """Return up to ``limit`` jobs, newest first: :func:`search2o.jobs.lookup.find_jobs`."""
        return find_jobs(self.database, owner=owner, state=state, kind=kind, limit=limit)

    def run_here(self, job_id: str) -> bool:
        """Run job ``job_id`` in the calling thread if it may start now; return whether it ran.

        For a producer waiting on jobs it enqueued (a sync's batches): it works instead of
        waiting. The job is claimed through the ledger like any delivery (no consumer runs it
        too) and its lease is renewed every ``lease_s / 3`` while it runs.
        """
        with self._inline_lock:
            if self._deliveries is None and self._inline is None:
                self._inline = Deliveries(self.settings, self.database, self.registry, self._send)
                beat = (self._inline, self._inline_stop)
                threading.Thread(target=self._renew_leases, args=beat, daemon=True).start()
            deliveries = self._deliveries or self._inline
        assert deliveries is not None
        return deliveries.run(job_id)

    def wait(self, job_id: str, timeout_s: float, poll_s: float = 0.05) -> JobInfo:
        """Return job ``job_id`` once it is ``done`` or ``failed``, polling the ledger.

        Raises:
            NotFoundError: no such job.
            TimeoutError: it did not finish within ``timeout_s`` seconds.

        """
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.get(job_id)
            if job.finished:
                return job
            if time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job.state} after {timeout_s:g} s")
            time.sleep(poll_s)

    # --- the sweeper ----------------------------------------------------------------------------

    def sweep(self, now: datetime | None = None) -> SweepReport:
        """Repair what the transport lost, once; safe to run anywhere, any number at a time.

        Requeues running jobs whose lease expired (their worker died; ``failed`` after the
        last attempt, with the kind's final-failure hook job inserted and sent), resends due
        queued jobs that nobody claimed for ``jobs.lost_after_s`` (a lost message), and
        deletes jobs finished more than ``jobs.keep_finished_days`` ago.
        Every change is a conditional update, so concurrent sweepers do each repair once.

        Raises:
            StorageError: the database failed.

        """
        instant = now or utcnow()
        requeued = failed = resent = 0
        hooked = self.registry.hooked()
        for job_id in ledger.expired_leases(self.database, instant, _SWEEP_BATCH):
            outcome = ledger.requeue_expired(
                self.database, job_id, instant, hooked=hooked, hook_job=new_id()
            )
            if outcome is None:
                continue
            state, hook = outcome
            if state == "queued":
                requeued += 1
                self._send(job_id)
            else:
                failed += 1
                if hook is not None:  # its final-failure hook runs as a job of its own
                    self._send(hook)
        lost_after = self.settings.lost_after_s
        for job_id in ledger.lost_messages(self.database, instant, lost_after, _SWEEP_BATCH):
            if ledger.touch_lost(self.database, job_id, instant, lost_after):
                resent += 1
                self._send(job_id)
        purged = 0
        if self.settings.keep_finished_days > 0:
            before = instant - timedelta(days=self.settings.keep_finished_days)
            # Batches of 500, at most 20 per sweep: a backlog is worked off over a few sweeps
            # without holding the database for long.
            for _ in range(_PURGE_BATCHES):
                deleted = ledger.purge_finished(self.database, before, _SWEEP_BATCH)
                purged += deleted
                if deleted < _SWEEP_BATCH:
                    break
        report = SweepReport(requeued, failed, resent, purged)
        if requeued or failed or resent or purged:
            log.info("jobs swept", extra={"fields": report.__dict__})
        return report

    # --- consuming ------------------------------------------------------------------------------

    @property
    def consuming(self) -> bool:
        """``True`` while this queue's consumer threads run."""
        return self._consumer is not None

    @property
    def worker_id(self) -> str | None:
        """The lease owner of the running consumer (``host:pid:random``), else ``None``."""
        return self._deliveries.worker_id if self._deliveries is not None else None

    def start_consumer(self, workers: int | None = None) -> None:
        """Start ``workers`` consumer threads and the scheduler in this process (non-blocking).

        Args:
            workers: 1-64 threads; default ``jobs.server_workers`` (what ``search2o serve``
                runs), or 1 when that is 0.

        Raises:
            InputError: ``workers`` outside 1-64.
            ConflictError: the consumer already runs.

        """
        count = workers if workers is not None else (self.settings.server_workers or 1)
        if not 1 <= count <= 64:
            raise InputError("workers", f"must be 1-64, got {count}")
        if self._consumer is not None:
            raise ConflictError("the job consumer of this queue already runs")
        # A fresh worker id (the fencing token of its leases) for every start.
        deliveries = Deliveries(self.settings, self.database, self.registry, self._send)
        self._deliveries = deliveries
        self._heartbeat_stop.clear()
        consumer = QueueConsumer(
            self.huey,
            tick_s=self.settings.tick_s,
            workers=count,
            periodic=True,
            initial_delay=_POLL_INITIAL_S,
            backoff=_POLL_BACKOFF,
            max_delay=self.settings.poll_max_s,
            scheduler_interval=1,
            worker_type="thread",
            check_worker_health=False,
        )
        consumer.start()
        self._consumer = consumer
        self._heartbeat = threading.Thread(
            target=self._renew_leases,
            args=(deliveries,),
            name="search2o-jobs-heartbeat",
            daemon=True,
        )
        self._heartbeat.start()
        log.info(
            "job consumer started",
            extra={
                "fields": {
                    "worker": deliveries.worker_id,
                    "threads": count,
                    "backend": self.settings.backend,
                }
            },
        )

    def stop_consumer(self, timeout_s: float | None = None) -> list[str]:
        """Stop the consumer: let running jobs finish for ``timeout_s``, then release them.

        Sets :attr:`JobContext.stopping` for running handlers, stops taking messages, waits up
        to ``timeout_s`` (default ``jobs.shutdown_timeout_s``) for running jobs, then gives
        back the leases of those still running (``queued``, the attempt not counted) so another
        worker runs them without waiting for the lease to expire. A no-op when not running.

        Returns:
            The ids of the jobs released.

        """
        consumer, self._consumer = self._consumer, None
        deliveries = self._deliveries
        if consumer is None or deliveries is None:
            return []
        wait_s = self.settings.shutdown_timeout_s if timeout_s is None else timeout_s
        deliveries.stopping.set()
        consumer.stop_flag.set()
        # Idle threads leave within the transport's blocking read (1 s) or one poll; a thread
        # running a job gets the rest of wait_s.
        deadline = time.monotonic() + max(wait_s, _IDLE_EXIT_S)
        for thread in consumer.threads():
            thread.join(max(0.0, deadline - time.monotonic()))
        self._heartbeat_stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join(5)
            self._heartbeat = None
        released = deliveries.release_running()
        self._deliveries = None
        log.info(
            "job consumer stopped",
            extra={"fields": {"worker": deliveries.worker_id, "released": released}},
        )
        return released

    def run_worker(
        self, workers: int | None = None, stop: threading.Event | None = None
    ) -> list[str]:
        """Consume in the foreground until ``stop`` is set (``search2o worker``).

        Without ``stop``, until SIGTERM or SIGINT: then it must run in the main thread (it
        installs the signal handlers, restored on return). On the stop it stops as
        :meth:`stop_consumer` does: running jobs get ``jobs.shutdown_timeout_s`` to finish, the
        rest are released.

        Args:
            workers: 1-64 threads; default ``jobs.workers``.
            stop: an event the caller sets to stop (``search2o worker`` sets it from its
                :class:`~search2o.stop_signals.StopGuard`); ``None``: a signal sets one.

        Returns:
            The ids of the jobs released at the stop.

        Raises:
            InputError: ``workers`` outside 1-64.

        """
        if stop is None:
            with stop_on_signals() as signalled:
                return self.run_worker(workers, signalled)
        try:
            self.start_consumer(workers if workers is not None else self.settings.workers)
            while not stop.wait(0.5):
                pass
            return self.stop_consumer()
        finally:
            self.stop_consumer(0)

    def close(self) -> None:
        """Stop the consumer (as :meth:`stop_consumer`), then close the transport."""
        self.stop_consumer()
        self._inline_stop.set()
        storage = self.huey.storage
        storage.close()
        pool = getattr(storage, "pool", None)  # Redis: its connection pool
        if pool is not None:
            pool.disconnect()

    def __enter__(self) -> JobQueue:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- inside the consumer --------------------------------------------------------------------

    def _send(self, job_id: str, eta: datetime | None = None) -> bool:
        """Hand the transport the message "deliver ``job_id``" (at ``eta``, UTC, if given)."""
        try:
            if eta is None:
                self._deliver_task(job_id)
            else:
                # Aware: Huey reads a naive eta as local time (huey.utils.normalize_time).
                self._deliver_task.schedule(args=(job_id,), eta=eta.astimezone(UTC))
        except Exception:
            log.warning(
                "job message not sent; the sweeper sends it again",
                exc_info=True,
                extra={"fields": {"job": job_id}},
            )
            return False
        return True

    def _renew_leases(self, deliveries: Deliveries, stop: threading.Event | None = None) -> None:
        """Heartbeat thread: renew the running attempts' leases every ``lease_s / 3``."""
        while not (stop or self._heartbeat_stop).wait(self.settings.lease_s / 3):
            try:
                deliveries.heartbeat()
            except Exception:
                log.warning("job leases not renewed; retrying", exc_info=True)

    def _deliver(self, job_id: str) -> None:
        """Huey task: run one delivery of job ``job_id`` in this consumer."""
        deliveries = self._deliveries
        if deliveries is None or deliveries.stopping.is_set():
            # Dequeued while stopping: hand the message back rather than start the job.
            self._send(job_id)
            return
        deliveries.run(job_id)

    def _tick(self) -> None:
        """Huey periodic task: sweep when due, enqueue each periodic kind for its slot."""
        try:
            now = utcnow()
            if time.monotonic() >= self._next_sweep:
                self._next_sweep = time.monotonic() + self.settings.sweep_interval_s
                self.sweep(now)
            for kind in self.registry.periodic():
                assert kind.every_s is not None
                slot = _slot_start(now, kind.every_s).isoformat()
                self.enqueue(kind.name, {"slot": slot}, dedupe_key=f"{kind.name}:{slot}")
        except Exception:
            log.exception("job tick failed; the next tick retries")


def _every_tick(timestamp: datetime) -> bool:
    """Huey's periodic test: fire at every pass of the scheduler (every ``jobs.tick_s``)."""
    return True


def _slot_start(now: datetime, every_s: float) -> datetime:
    """Return the start of the ``every_s``-second slot holding ``now`` (slots from the epoch)."""
    seconds = now.timestamp()
    return datetime.fromtimestamp(seconds - seconds % every_s, tz=UTC)
