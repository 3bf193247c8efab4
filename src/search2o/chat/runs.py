"""Runs: every answer in flight has an id, and its events can be replayed and followed.

A run's events are numbered ``1, 2, ...`` (the SSE ``id``). They are kept in two places:

* in the memory of the process writing the run (:class:`LiveRuns`), so a follower there gets
  each event as it happens;
* in the database (:class:`RunStore`), in batches sealed under the conversation's data key (they
  hold conversation content), so a client that reconnects with ``Last-Event-ID`` — to any API
  process on the same database — gets every event after that number exactly once, then the
  rest as they are recorded (it polls every ``runs.poll_s``).

A stop request (``POST /v1/runs/{id}/stop``) is a flag on the run's row, so any process can set
it; the writing process reads it with its heartbeat and stops the answer, which is stored as
``interrupted``. A run whose heartbeat is older than ``runs.stale_s`` lost its process: the
sweeper (:meth:`RunStore.sweep`, at every start and every ``runs.sweep_interval_s``) marks it
``interrupted`` and stores the part of the answer recorded so far as an ``interrupted`` answer,
so a transcript never ends on a question without saying why, and an answer is never stored
twice: the run is linked to its conversation in the transaction that stores the question, and
notes its answer in the one that stores it (:meth:`RunStore.note_stored`), so this holds for a
process killed before the run recorded its first event or after the answer was stored.
Finished runs are removed with their events ``runs.keep_s`` after they end.

The sweeper and the writer race only when a live process has not renewed its heartbeat for
``stale_s`` (30 s by default, 30 heartbeats); both then store an answer. The writer's event loop
would have had to stall for that long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.chat.settings import RunSettings
from search2o.crypto.vault import Sealer, Vault
from search2o.errors import NotFoundError
from search2o.events import ConversationEvent, DeltaEvent, Event, event_from
from search2o.query.conversations import append_message
from search2o.storage.db import Database
from search2o.storage.models import Conversation, new_id, utcnow
from search2o.storage.run_models import Run, RunEvents

__all__ = ["FINAL_STATUSES", "LiveRuns", "RunInfo", "RunStore", "SweepReport"]

log = logging.getLogger("search2o.chat")

KIND = "run_events"
FINAL_STATUSES = frozenset({"complete", "failed", "interrupted"})
_ID_LENGTH = 32


@dataclass(frozen=True)
class RunInfo:
    """What a run's row says: owner, conversation, status, last event number, stop flag."""

    id: str
    user_id: int
    conversation_id: str | None
    status: str
    last_seq: int
    stop_requested: bool

    @property
    def finished(self) -> bool:
        """Whether the answer is over (complete, failed or interrupted)."""
        return self.status in FINAL_STATUSES


@dataclass(frozen=True)
class SweepReport:
    """What one sweep did: runs marked interrupted, finished runs removed."""

    interrupted: int
    removed: int


def _missing(run_id: str) -> NotFoundError:
    return NotFoundError(f"run {run_id!r} not found")


class RunStore:
    """The database side of runs (see the module docstring).

    Args:
        database: where ``runs`` and ``run_events`` live.
        vault: seals events under the conversation's data key.
        settings: the ``runs`` settings.

    """

    def __init__(self, database: Database, vault: Vault, settings: RunSettings) -> None:
        self._db = database
        self._vault = vault
        self.settings = settings

    # --- writing ----------------------------------------------------------------------------

    def create(self, principal: Principal, agent: str | None = None) -> str:
        """Register a new run of ``principal``; return its id."""
        run_id = new_id()
        with self._db.session() as session:
            session.add(Run(id=run_id, user_id=principal.user_id, agent=agent))
        return run_id

    def note_stored(self, run_id: str, session: Session, conversation_id: str, role: str) -> None:
        """Note in ``session`` that the run's question (``role`` ``user``) or answer is stored.

        The engines call it through ``on_stored`` (:meth:`search2o.query.turn.TurnEngine.run`,
        :meth:`search2o.agents.runner.AgentRunner.run`) inside the transaction storing that
        message, so the note commits with it. The question links the run to its conversation,
        so :meth:`sweep` finds the conversation of every question a run took; the answer sets
        ``finished_at`` (the status stays ``running`` until the run's last event is recorded,
        for its followers), so a sweep after a death between the two adds no second answer.
        """
        values: dict[str, object] = (
            {"conversation_id": conversation_id} if role == "user" else {"finished_at": utcnow()}
        )
        session.execute(update(Run).where(Run.id == run_id).values(**values))

    def record(
        self,
        run_id: str,
        owner_id: int,
        conversation_id: str | None,
        events: list[tuple[int, Event]],
    ) -> bool:
        """Store a batch of events (may be empty: a heartbeat); return whether stop was asked.

        The batch is sealed as one record. ``conversation_id`` is the run's conversation, known
        from its first event (the run itself is linked to it by :meth:`note_stored` when the
        question is stored); before it is known nothing is stored but the heartbeat.
        """
        with self._db.session() as session:
            row = session.get(Run, run_id)
            if row is None:  # its conversation was deleted meanwhile
                return True
            if events and conversation_id is not None:
                sealer = self._vault.sealer(session, conversation_id, owner_id)
                payload = [[seq, event.kind, event.data] for seq, event in events]
                session.add(
                    RunEvents(
                        run_id=run_id,
                        first_seq=events[0][0],
                        last_seq=events[-1][0],
                        sealed=sealer.seal(KIND, payload),
                    )
                )
                row.last_seq = events[-1][0]
            row.heartbeat_at = utcnow()
            return bool(row.stop_requested)

    def finish(self, run_id: str, status: str) -> None:
        """Mark a running run finished with ``status`` (a no-op if it already is)."""
        with self._db.session() as session:
            session.execute(
                update(Run)
                .where(Run.id == run_id, Run.status == "running")
                .values(status=status, finished_at=utcnow())
            )

    # --- reading ----------------------------------------------------------------------------

    def info(self, principal: Principal, run_id: str) -> RunInfo:
        """Return the caller's run ``run_id``.

        Raises:
            NotFoundError: missing, expired, or another user's (the same answer).

        """
        with self._db.session() as session:
            return _info(self._owned(session, principal, run_id))

    def events_after(
        self, principal: Principal, run_id: str, after: int
    ) -> tuple[list[tuple[int, Event]], RunInfo]:
        """Return the recorded events numbered above ``after``, in order, and the run's row.

        Raises:
            NotFoundError: as :meth:`info`.

        """
        with self._db.session() as session:
            row = self._owned(session, principal, run_id)
            info = _info(row)
            if row.conversation_id is None or row.last_seq <= after:
                return [], info
            sealer = self._vault.sealer(session, row.conversation_id, row.user_id)
            return list(self._stored(session, sealer, run_id, after)), info

    def request_stop(self, principal: Principal, run_id: str) -> RunInfo:
        """Ask the process writing the run to stop it (any process may ask).

        Raises:
            NotFoundError: as :meth:`info`.

        """
        with self._db.session() as session:
            row = self._owned(session, principal, run_id)
            if row.status == "running":
                row.stop_requested = True
            return _info(row)

    # --- sweeping ---------------------------------------------------------------------------

    def sweep(self, now: datetime | None = None) -> SweepReport:
        """Interrupt runs whose process is gone; remove runs finished ``keep_s`` ago.

        An interrupted run's recorded deltas become its conversation's answer, with status
        ``interrupted`` (an empty text when nothing was recorded).
        """
        clock = now or utcnow()
        interrupted = self.interrupt_orphans(now=clock)
        expired = clock - timedelta(seconds=self.settings.keep_s)
        with self._db.session() as session:
            old = select(Run.id).where(Run.status.in_(FINAL_STATUSES), Run.finished_at < expired)
            ids = list(session.scalars(old))
            if ids:
                session.execute(delete(RunEvents).where(RunEvents.run_id.in_(ids)))
                session.execute(delete(Run).where(Run.id.in_(ids)))
        if interrupted or ids:
            log.info(
                "runs swept",
                extra={"fields": {"interrupted": interrupted, "removed": len(ids)}},
            )
        return SweepReport(interrupted, len(ids))

    def interrupt_orphans(
        self, conversation_id: str | None = None, now: datetime | None = None
    ) -> int:
        """Interrupt the runs whose heartbeat is older than ``stale_s``; return how many.

        ``conversation_id`` limits it to one conversation: the chat service calls it before a
        new question joins one, so the answer of a run that died there comes before that
        question, not whenever the next sweep runs.
        """
        stale = (now or utcnow()) - timedelta(seconds=self.settings.stale_s)
        query = select(Run.id).where(Run.status == "running", Run.heartbeat_at < stale)
        if conversation_id is not None:
            query = query.where(Run.conversation_id == conversation_id)
        with self._db.session() as session:
            orphans = list(session.scalars(query))
        return sum(self._interrupt(orphan, stale) for orphan in orphans)

    def _interrupt(self, run_id: str, stale: datetime) -> int:
        with self._db.session() as session:
            orphan = (Run.id == run_id, Run.status == "running", Run.heartbeat_at < stale)
            answered = session.execute(
                update(Run)
                .where(*orphan, Run.finished_at.is_not(None))
                .values(status="interrupted")
            )
            if getattr(answered, "rowcount", 0):
                return 1  # its answer is in the conversation: only its last events were lost
            claimed = session.execute(
                update(Run).where(*orphan).values(status="interrupted", finished_at=utcnow())
            )
            if not getattr(claimed, "rowcount", 0):
                return 0  # it finished, or another sweeper took it
            row = session.get(Run, run_id)
            if row is None or row.conversation_id is None:
                return 1
            conversation = session.get(Conversation, row.conversation_id)
            if conversation is None or conversation.kept_by_hooks:
                # The hooks keep that transcript, and a run that never saved left nothing in it
                # (a failed agent run writes nothing there either).
                return 1
            sealer = self._vault.sealer(session, conversation.id, conversation.user_id)
            text = "".join(
                e.text
                for _, e in self._stored(session, sealer, run_id, 0)
                if isinstance(e, DeltaEvent)
            )
            append_message(
                session,
                conversation,
                sealer,
                role="assistant",
                text=text,
                status="interrupted",
                agent=row.agent,
            )
            return 1

    # --- helpers ----------------------------------------------------------------------------

    def _owned(self, session: Session, principal: Principal, run_id: str) -> Run:
        if len(run_id) != _ID_LENGTH or not run_id.isalnum():
            raise _missing(run_id)
        row = session.get(Run, run_id)
        if row is None or row.user_id != principal.user_id:
            raise _missing(run_id)
        return row

    @staticmethod
    def _stored(
        session: Session, sealer: Sealer, run_id: str, after: int
    ) -> Iterator[tuple[int, Event]]:
        batches = session.scalars(
            select(RunEvents)
            .where(RunEvents.run_id == run_id, RunEvents.last_seq > after)
            .order_by(RunEvents.first_seq)
        )
        for batch in batches:
            for seq, kind, data in sealer.open(KIND, batch.sealed, f"events of run {run_id}"):
                if seq > after:
                    yield int(seq), event_from(kind, data)


def _info(row: Run) -> RunInfo:
    return RunInfo(
        row.id, row.user_id, row.conversation_id, row.status, row.last_seq, row.stop_requested
    )


@dataclass
class _Live:
    owner_id: int
    events: list[tuple[int, Event]] = field(default_factory=list)
    waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = field(default_factory=list)
    finished: bool = False


class LiveRuns:
    """The events of the runs this process writes, for followers in this process.

    Thread-safe: the writer publishes from its event loop, followers wait on theirs.
    """

    def __init__(self) -> None:
        self._runs: dict[str, _Live] = {}
        self._lock = threading.Lock()

    def open(self, run_id: str, owner_id: int) -> None:
        """Start keeping the events of ``run_id``."""
        with self._lock:
            self._runs[run_id] = _Live(owner_id)

    def publish(self, run_id: str, seq: int, event: Event) -> None:
        """Add an event and wake every follower."""
        with self._lock:
            live = self._runs.get(run_id)
            if live is None:
                return
            live.events.append((seq, event))
            live.finished = live.finished or event.final
            waiters, live.waiters = live.waiters, []
        for loop, waiter in waiters:
            loop.call_soon_threadsafe(waiter.set)

    def close(self, run_id: str) -> None:
        """Forget ``run_id`` (its events are in the database)."""
        with self._lock:
            live = self._runs.pop(run_id, None)
        if live is not None:
            for loop, waiter in live.waiters:
                loop.call_soon_threadsafe(waiter.set)

    def after(
        self, run_id: str, owner_id: int, seq: int
    ) -> tuple[list[tuple[int, Event]], bool] | None:
        """Return the events above ``seq`` and whether the run ended, or ``None`` if not here.

        A run of another owner is ``None`` too: the caller then asks the database, which says
        "not found" the same way for both.
        """
        with self._lock:
            live = self._runs.get(run_id)
            if live is None or live.owner_id != owner_id:
                return None
            return [(n, e) for n, e in live.events if n > seq], live.finished

    async def wait(self, run_id: str, timeout: float) -> None:
        """Wait until the run publishes again (or ``timeout`` seconds pass)."""
        waiter = asyncio.Event()
        with self._lock:
            live = self._runs.get(run_id)
            if live is None:
                return
            live.waiters.append((asyncio.get_running_loop(), waiter))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiter.wait(), timeout)


def conversation_of(event: Event) -> str | None:
    """Return the conversation id a ``conversation`` event names (else ``None``)."""
    return event.conversation_id if isinstance(event, ConversationEvent) else None
