"""Where conversation state lives: our encrypted store (the protocol is state/contract.py).

Every backend answers the same three calls (and ``close``), checked by the same conformance
suite (:mod:`search2o.state.conformance`):

* ``restore(conversation, user)`` → ``(state, version)``, or ``None`` before the first save;
* ``save(conversation, user, changes, expected_version)`` → the new version. A
  compare-and-swap: it succeeds only if the stored version is still ``expected_version`` (the
  one restored when the run started; 0 for no state), else
  :class:`~search2o.errors.ConflictError`; two follow-ups racing on one conversation give one
  success and one conflict, never a lost update;
* ``delete(conversation, user)``: the state is gone for good; later saves are refused with
  :class:`~search2o.errors.NotFoundError` and nothing is recreated.

A conversation belongs to one user; every call checks it, and another user's conversation is
answered exactly like a missing one (``NotFoundError``, same message).

:class:`DatabaseStateStore` keeps the state in our database, sealed with the conversation's data
key (:class:`~search2o.crypto.vault.Vault`). Table ``conversation_states`` holds one small
head row per conversation (``version``, ``snapshot_version``) and ``state_snapshots`` the sealed
snapshot as of ``snapshot_version`` (apart, so a save's update of the head never rewrites the
snapshot; SQLite rewrites whole rows); each save
appends one sealed row to ``state_changes`` (the :class:`~search2o.state.model.StateChanges`
of that version), so storage grows with what runs add, not with the square of the turn count.
A background compaction folds pending changes into a new snapshot and deletes them. Restore =
snapshot + replay of the changes after it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from types import TracebackType
from typing import Any, ClassVar

from sqlalchemy import delete, event, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.crypto.vault import Sealer, Vault
from search2o.errors import (
    InputError,
    IntegrityCheckError,
    StorageError,
)
from search2o.state.changes import StateChanges, _apply_in_place
from search2o.state.contract import (
    _DELETED,
    _ID,
    KIND_CHANGE,
    KIND_SNAPSHOT,
    check_expected_version,
    conversation_owner,
    missing_conversation,
    state_conflict,
)
from search2o.state.model import ConversationState
from search2o.storage import dialect
from search2o.storage.db import Database
from search2o.storage.models import Conversation, StateChange, StateSnapshot, utcnow
from search2o.storage.models import ConversationState as StateHead

__all__ = [
    "KIND_CHANGE",
    "KIND_SNAPSHOT",
    "DatabaseStateStore",
    "check_expected_version",
    "conversation_owner",
    "missing_conversation",
    "state_conflict",
]

logger = logging.getLogger(__name__)


_RESTORE_ATTEMPTS = 8


class DatabaseStateStore:
    """Our store: sealed snapshots and appended sealed changes in the database.

    Args:
        database: the database (tables ``conversation_states``, ``state_changes``).
        vault: seals and opens with each conversation's data key.
        compact_every: after a save that leaves more than this many changes pending, fold them
            into a snapshot in a background thread (0 = only :meth:`compact` does).

    Saving (``save``): ``UPDATE conversation_states SET version = version + 1 WHERE
    conversation_id = :c AND version = :expected``; no row updated means a conflict (or, when
    the conversation or its state is gone, not found). The first save inserts the head row with
    ``INSERT ... ON CONFLICT DO NOTHING``, so two first saves at once give one conflict too.
    Then one ``state_changes`` row is inserted, sealed as kind ``state_change`` with its version
    inside (a row moved to another version or conversation fails to open). With ``session=``
    the whole save is part of the caller's transaction.

    Deleting (``delete``) removes the snapshot and changes and leaves a tombstone head row
    (version -1), so a run still in flight can never save the state back; deleting the
    conversation row removes the tombstone with it (foreign keys cascade).

    Use as a context manager or call :meth:`close` to wait for background compactions.
    """

    joins_transaction: ClassVar[bool] = True
    keeps_transcript: ClassVar[bool] = False

    def __init__(self, database: Database, vault: Vault, compact_every: int = 64) -> None:
        if compact_every < 0:
            raise InputError("compact_every", f"must be >= 0, got {compact_every}")
        self._db = database
        self._vault = vault
        self.compact_every = compact_every
        self._lock = threading.Lock()
        self._queued: set[str] = set()
        self._futures: set[Future[None]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self._scheduler: Callable[[str], object] | None = None

    def use_scheduler(self, schedule: Callable[[str], object] | None) -> None:
        """Hand compactions to ``schedule(conversation)`` (the job queue) instead of a thread.

        ``None`` goes back to this process's own background thread (a CLI command, with no
        queue consumer). A scheduler that fails leaves the compaction to the thread.
        """
        self._scheduler = schedule

    # --- the protocol -------------------------------------------------------------------

    def restore(
        self, conversation: str, user: Principal, *, session: Session | None = None
    ) -> tuple[ConversationState, int] | None:
        """Return ``(state, version)``: the snapshot with the later changes replayed.

        ``None`` when nothing was saved yet or the state was deleted. A compaction that runs
        between the reads is detected (the changes after the snapshot are not contiguous) and
        the read is repeated.

        Raises:
            NotFoundError: the conversation is missing or another user's.
            IntegrityCheckError: a sealed row was altered or moved.
            StorageError: change rows are missing for good (the database was edited).

        """
        with self._db.within(session) as s:
            owner = conversation_owner(s, conversation, user)
            for _ in range(_RESTORE_ATTEMPTS):
                head = s.execute(
                    select(StateHead.version, StateHead.snapshot_version).where(
                        StateHead.conversation_id == conversation
                    )
                ).first()
                if head is None or head.version <= 0:
                    return None
                found, snapshot = self._snapshot(s, conversation, head.snapshot_version)
                rows = self._changes(s, conversation, head.snapshot_version, head.version)
                if rows is None or not found:
                    continue  # compacted meanwhile: read the new snapshot
                sealer = self._vault.sealer(s, conversation, owner)
                state = self._fold(sealer, snapshot, head.snapshot_version, rows)
                return state, int(head.version)
        raise StorageError(
            f"the state of conversation {conversation!r} is missing changes; "
            "restore the database from a backup"
        )

    def save(
        self,
        conversation: str,
        user: Principal,
        changes: StateChanges,
        expected_version: int,
        *,
        session: Session | None = None,
        base: ConversationState | None = None,
    ) -> int:
        """Append ``changes`` as version ``expected_version + 1`` (compare-and-swap).

        ``base`` is not needed here and ignored. See :meth:`StateStore.save` for the
        arguments.

        Returns:
            ``expected_version + 1``.

        Raises:
            InputError: a value is not JSON or ``expected_version`` is bad; nothing written.
            ConflictError: the stored version is not ``expected_version``.
            NotFoundError: missing, deleted (also while this save ran) or another user's.

        """
        expected = check_expected_version(expected_version)
        payload = changes.to_json()
        version = expected + 1
        with self._db.within(session) as s:
            owner = conversation_owner(s, conversation, user, lock=True)
            sealer = self._vault.sealer(s, conversation, owner)
            blob = sealer.seal(KIND_CHANGE, {"version": version, "changes": payload})
            snapshot_version = self._advance(s, conversation, expected)
            s.add(
                StateChange(
                    conversation_id=conversation, version=version, sealed=blob, created_at=utcnow()
                )
            )
            try:
                s.flush()
            except IntegrityError as exc:  # cannot happen while the head row is ours
                raise state_conflict(conversation, "the change row already exists") from exc
            if self.compact_every and version - snapshot_version > self.compact_every:
                event.listen(s, "after_commit", lambda _s: self._schedule(conversation), once=True)
        return version

    def delete(self, conversation: str, user: Principal, *, session: Session | None = None) -> None:
        """Delete the snapshot and changes; leave a tombstone that refuses later saves.

        Call it in the transaction that deletes the conversation (``session=``).

        Raises:
            NotFoundError: missing or another user's.

        """
        with self._db.within(session) as s:
            conversation_owner(s, conversation, user, lock=True)
            now = utcnow()
            values: dict[str, Any] = {
                "version": _DELETED,
                "snapshot_version": 0,
                "updated_at": now,
            }
            s.execute(
                dialect.insert(s, StateHead)
                .values(conversation_id=conversation, **values)
                .on_conflict_do_update(index_elements=["conversation_id"], set_=values)
            )
            s.execute(delete(StateChange).where(StateChange.conversation_id == conversation))
            s.execute(delete(StateSnapshot).where(StateSnapshot.conversation_id == conversation))

    def close(self) -> None:
        """Wait for running compactions and stop the background thread (idempotent)."""
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def __enter__(self) -> DatabaseStateStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- compaction ---------------------------------------------------------------------

    def compact(self, conversation: str) -> int:
        """Fold the pending changes of ``conversation`` into a new sealed snapshot.

        Safe against concurrent saves, restores, deletes and compactions: the snapshot is
        written only if ``snapshot_version`` is unchanged and the head has not been deleted,
        and only the folded change rows (versions up to the new snapshot) are deleted, in the
        same transaction. No ownership check: this is maintenance, not a user's request.

        Returns:
            How many change rows were folded (0 when there was nothing to do or another
            writer got there first).

        Raises:
            IntegrityCheckError: a sealed row was altered or moved.
            StorageError: the database failed.

        """
        if not _ID.fullmatch(conversation):
            return 0
        with self._db.session() as s:
            head = s.execute(
                select(
                    StateHead.version,
                    StateHead.snapshot_version,
                    Conversation.user_id,
                )
                .join(Conversation, Conversation.id == StateHead.conversation_id)
                .where(StateHead.conversation_id == conversation)
            ).first()
            if head is None or head.version <= head.snapshot_version:
                return 0
            found, snapshot = self._snapshot(s, conversation, head.snapshot_version)
            rows = self._changes(s, conversation, head.snapshot_version, head.version)
            if rows is None or not found:
                return 0
            sealer = self._vault.sealer(s, conversation, head.user_id)
            state = self._fold(sealer, snapshot, head.snapshot_version, rows)
            blob = sealer.seal(KIND_SNAPSHOT, {"version": head.version, "state": state.to_json()})
            result = s.execute(
                update(StateHead)
                .where(
                    StateHead.conversation_id == conversation,
                    StateHead.snapshot_version == head.snapshot_version,
                    StateHead.version >= head.version,
                )
                .values(snapshot_version=head.version)
                .execution_options(synchronize_session=False)
            )
            if _rowcount(result) == 0:
                return 0
            fields = {"version": head.version, "sealed": blob}
            s.execute(
                dialect.insert(s, StateSnapshot)
                .values(conversation_id=conversation, **fields)
                .on_conflict_do_update(index_elements=["conversation_id"], set_=fields)
            )
            s.execute(
                delete(StateChange).where(
                    StateChange.conversation_id == conversation,
                    StateChange.version <= head.version,
                )
            )
            return len(rows)

    def drain(self, timeout: float | None = None) -> None:
        """Wait until the background compactions scheduled so far have finished."""
        with self._lock:
            pending = list(self._futures)
        wait(pending, timeout=timeout)

    def pending_changes(self, conversation: str) -> int:
        """How many change rows of ``conversation`` wait to be folded (for tests and ops)."""
        with self._db.session() as s:
            head = s.execute(
                select(StateHead.version, StateHead.snapshot_version).where(
                    StateHead.conversation_id == conversation
                )
            ).first()
            return 0 if head is None else max(0, head.version - head.snapshot_version)

    def _schedule(self, conversation: str) -> None:
        if self._scheduler is not None:
            try:
                self._scheduler(conversation)
                return
            except Exception:  # the queue is down: compact here rather than not at all
                logger.exception("could not enqueue a compaction; compacting in this process")
        with self._lock:
            if self._closed or conversation in self._queued:
                return
            self._queued.add(conversation)
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="search2o-state-compaction"
                )
            future = self._executor.submit(self._compact_in_background, conversation)
            self._futures.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: Future[None]) -> None:
        with self._lock:
            self._futures.discard(future)

    def _compact_in_background(self, conversation: str) -> None:
        with self._lock:
            # Unqueue first: a save that lands while this one runs may schedule the next.
            self._queued.discard(conversation)
        try:
            folded = self.compact(conversation)
        except Exception:  # a failed compaction loses nothing; the next save retries it
            logger.warning(
                "state compaction failed",
                exc_info=True,
                extra={"fields": {"conversation_id": conversation}},
            )
            return
        logger.debug(
            "state compacted",
            extra={"fields": {"conversation_id": conversation, "folded": folded}},
        )

    # --- helpers ------------------------------------------------------------------------

    def _advance(self, s: Session, conversation: str, expected: int) -> int:
        """Move the head from ``expected`` to ``expected + 1``; return its snapshot version."""
        now = utcnow()
        row = s.execute(
            update(StateHead)
            .where(StateHead.conversation_id == conversation, StateHead.version == expected)
            .values(version=expected + 1, updated_at=now)
            .returning(StateHead.snapshot_version)
            .execution_options(synchronize_session=False)
        ).first()
        if row is not None:
            return int(row[0])
        if expected == 0:
            try:
                created = s.execute(
                    dialect.insert(s, StateHead)
                    .values(
                        conversation_id=conversation,
                        version=1,
                        snapshot_version=0,
                        updated_at=now,
                    )
                    .on_conflict_do_nothing(index_elements=["conversation_id"])
                    .returning(StateHead.conversation_id)
                ).first()
            except IntegrityError as exc:  # SQLite: the conversation was deleted meanwhile
                raise missing_conversation(conversation) from exc
            if created is not None:
                return 0
        raise self._refusal(s, conversation, expected)

    def _refusal(self, s: Session, conversation: str, expected: int) -> Exception:
        """Why the compare-and-swap failed: the conversation or state is gone, or it moved on."""
        if s.scalar(select(Conversation.id).where(Conversation.id == conversation)) is None:
            return missing_conversation(conversation)
        current = s.scalar(
            select(StateHead.version).where(StateHead.conversation_id == conversation)
        )
        if current == _DELETED:
            return missing_conversation(conversation)
        return state_conflict(
            conversation, f"at version {current or 0}, the run started from version {expected}"
        )

    @staticmethod
    def _snapshot(s: Session, conversation: str, version: int) -> tuple[bool, bytes | None]:
        """Return ``(found, sealed snapshot as of version)``; version 0 has none (``None``).

        ``found`` is false when the stored snapshot is of another version (a compaction ran
        between the head's read and this one): the caller reads again.
        """
        if version == 0:
            return True, None
        row = s.execute(
            select(StateSnapshot.version, StateSnapshot.sealed).where(
                StateSnapshot.conversation_id == conversation
            )
        ).first()
        if row is None or row.version != version:
            return False, None
        return True, bytes(row.sealed)

    @staticmethod
    def _changes(
        s: Session, conversation: str, after: int, through: int
    ) -> list[tuple[int, bytes]] | None:
        """Return the sealed changes ``after < version <= through`` (``None``: some missing)."""
        rows = s.execute(
            select(StateChange.version, StateChange.sealed)
            .where(
                StateChange.conversation_id == conversation,
                StateChange.version > after,
                StateChange.version <= through,
            )
            .order_by(StateChange.version)
        ).all()
        if [r.version for r in rows] != list(range(after + 1, through + 1)):
            return None
        return [(int(r.version), bytes(r.sealed)) for r in rows]

    @staticmethod
    def _fold(
        sealer: Sealer, snapshot: bytes | None, snapshot_version: int, rows: list[tuple[int, bytes]]
    ) -> ConversationState:
        """Open the snapshot and replay the changes onto it."""
        cid = sealer.conversation_id
        if snapshot is None:
            state = ConversationState()
        else:
            what = f"state snapshot of conversation {cid}"
            opened = sealer.open(KIND_SNAPSHOT, bytes(snapshot), what)
            if not isinstance(opened, dict) or opened.get("version") != snapshot_version:
                raise IntegrityCheckError(f"the {what} belongs to another version")
            state = _decode(ConversationState.from_json, opened.get("state"), what)
        for version, blob in rows:
            what = f"state change {version} of conversation {cid}"
            opened = sealer.open(KIND_CHANGE, blob, what)
            if not isinstance(opened, dict) or opened.get("version") != version:
                raise IntegrityCheckError(f"the {what} belongs to another version")
            _apply_in_place(state, _decode(StateChanges.from_json, opened.get("changes"), what))
        return state


def _decode(parse: Any, value: Any, what: str) -> Any:
    """Parse our own sealed JSON; a format error there is a storage problem, not bad input."""
    try:
        return parse(value)
    except InputError as exc:
        raise StorageError(f"the {what} cannot be read ({exc.message})") from exc


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)
