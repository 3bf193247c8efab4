"""Group commit of the messengers' acknowledgements: a burst's questions in few transactions.

A messenger waits for our acknowledgement (Slack: 3 s, "Events API"). Each question is one
delivery record and its answer job, written in one transaction before the acknowledgement
(:func:`~search2o.surfaces.answering.take_question`). Under a burst those transactions ran one
after another (SQLite has one writer; a PostgreSQL commit waits for its WAL flush), so the
sixtieth question of a burst waited for fifty-nine commits, and then for its job's message to
the transport.

Here the questions that arrive while a transaction is being written wait for it and go into
the next one together: group commit, as databases do with their own log (J. Gray, A. Reuter,
*Transaction Processing: Concepts and Techniques*, 1993, §9.4.7; PostgreSQL's
``commit_delay``). There is no timer: the first question of a quiet moment is written at once,
alone; only questions that would have waited anyway share a commit. The callers take turns as
the writer (leader/follower): no thread of its own writes.

After the commit every caller of the batch is answered first; the jobs' messages to the
transport are sent afterwards, by one sending thread (:meth:`JobQueue.send_all`; a message never
sent is sent by the sweeper after ``jobs.lost_after_s``).

A batch that fails is not the callers' failure: each of its questions is then taken alone
(:func:`~search2o.surfaces.answering.take_question`), so one bad question fails only its own
caller, and a failure to enqueue still leaves no record behind (the messenger's retry is taken
as new).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from search2o.jobs.info import JobInfo
from search2o.jobs.queue import JobQueue
from search2o.surfaces.answering import (
    Outcome,
    check_shared_database,
    log_taken,
    record_questions,
    take_question,
)
from search2o.surfaces.deliveries import DeliveryStore, Inbound

__all__ = ["GroupCommit"]

log = logging.getLogger("search2o.surfaces")


@dataclass(eq=False)
class _Question:
    """One caller's question, waiting for a batch's commit or for its turn to write one."""

    inbound: Inbound
    woken: threading.Event = field(default_factory=threading.Event)
    lead: bool = False
    outcome: Outcome | None = None
    error: BaseException | None = None


class GroupCommit:
    """Record questions and enqueue their answer jobs, many per transaction (module docstring).

    Args:
        store: the delivery records.
        queue: the job queue, on the same database as ``store``.
        kind: the answer job's kind (``slack.answer``, ``telegram.answer``, ...).
        max_batch: the most questions in one transaction (1-1000).

    Raises:
        ConfigError: ``store`` and ``queue`` are on different databases.
        ValueError: ``max_batch`` is out of range.

    Thread-safe: :meth:`take` is called from the ingress threads at once.
    """

    def __init__(
        self, store: DeliveryStore, queue: JobQueue, kind: str, *, max_batch: int = 100
    ) -> None:
        check_shared_database(store, queue)
        if not 1 <= max_batch <= 1000:
            raise ValueError(f"max_batch must be 1-1000, got {max_batch}")
        self.store = store
        self.queue = queue
        self.kind = kind
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._pending: list[_Question] = []
        self._writing = False
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{kind}-send")
        #: transactions written, and questions in them (for tests and the logs)
        self.batches = 0
        self.questions = 0

    def take(self, inbound: Inbound) -> Outcome:
        """Record ``inbound`` once and enqueue its answer job; return when both are committed.

        Returns:
            ``Outcome("answered", id)`` for a new question, ``Outcome("duplicate", id)`` for
            one recorded before (its job is enqueued again under the same dedupe key: a no-op).

        Raises:
            InputError: the job was refused (an unregistered kind); nothing was recorded.
            StorageError: the database failed; nothing was recorded.

        """
        mine = _Question(inbound)
        with self._lock:
            self._pending.append(mine)
            leading = not self._writing
            self._writing = True
        if not leading:
            mine.woken.wait()
        if mine.lead or leading:
            self._write_batch()
        if mine.error is not None:
            raise mine.error
        assert mine.outcome is not None
        return mine.outcome

    def close(self) -> None:
        """Send the messages still waiting, then stop the sending thread."""
        self._sender.shutdown(wait=True)

    def _write_batch(self) -> None:
        """Write the oldest waiting questions in one transaction, then pass the turn on."""
        with self._lock:
            batch = self._pending[: self.max_batch]
            del self._pending[: self.max_batch]
        sends: list[JobInfo] = []
        try:
            self._write(batch, sends)
        finally:
            for question in batch:
                if question.outcome is None and question.error is None:  # interrupted
                    question.error = RuntimeError("the batch's transaction was interrupted")
            self.batches += 1
            self.questions += len(batch)
            with self._lock:
                following = self._pending[0] if self._pending else None
                if following is None:
                    self._writing = False
                else:
                    following.lead = True
            for question in batch:  # answered before their jobs' messages are sent
                question.woken.set()
            if following is not None:
                following.woken.set()
        if sends:
            try:
                self._sender.submit(self.queue.send_all, sends)
            except RuntimeError:  # closed: send them here
                self.queue.send_all(sends)

    def _write(self, batch: list[_Question], sends: list[JobInfo]) -> None:
        """Record ``batch`` and enqueue its jobs in one transaction; on failure, each alone."""
        try:
            with self.store.database.session(urgent=True) as session:
                inbounds = [q.inbound for q in batch]
                outcomes = record_questions(
                    session, self.store, self.queue, self.kind, inbounds, sends
                )
        except Exception:
            sends.clear()  # rolled back: those jobs do not exist
            if len(batch) > 1:
                log.warning("a batch of %d questions failed; taking each alone", len(batch))
            for question in batch:
                self._alone(question)
            return
        for question, outcome in zip(batch, outcomes, strict=True):
            question.outcome = outcome
            log_taken(question.inbound, outcome)

    def _alone(self, question: _Question) -> None:
        """Take one question in a transaction of its own, keeping its error for its caller."""
        try:
            question.outcome = take_question(self.store, self.queue, self.kind, question.inbound)
        except Exception as exc:  # raised again in the caller's thread
            question.error = exc
