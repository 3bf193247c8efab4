"""The contract of every state store: :class:`StateStore`, the versions it checks, its errors.

:class:`~search2o.state.store.DatabaseStateStore` (ours) and
:class:`~search2o.state.hooks.HookStateStore` (an enterprise's) both keep it: a conversation's
owner is checked first (:func:`conversation_owner`), a save names the version it read
(:func:`check_expected_version`) and a stale one is a conflict (:func:`state_conflict`).
"""

from __future__ import annotations

import logging
import re
from typing import Any, ClassVar, Protocol, runtime_checkable

from sqlalchemy import select
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.errors import (
    ConflictError,
    InputError,
    NotFoundError,
)
from search2o.state.changes import StateChanges
from search2o.state.model import ConversationState
from search2o.storage.models import Conversation

__all__ = [
    "KIND_CHANGE",
    "KIND_SNAPSHOT",
    "StateStore",
    "check_expected_version",
    "conversation_owner",
    "missing_conversation",
    "state_conflict",
]

logger = logging.getLogger("search2o.state.store")  # the store's log name, kept


KIND_SNAPSHOT = "state"
"""Associated-data kind of a sealed snapshot ``{"version": n, "state": <state JSON>}``."""


KIND_CHANGE = "state_change"
"""Associated-data kind of a sealed change ``{"version": n, "changes": <changes JSON>}``."""


_DELETED = -1  # head version of a conversation whose state was deleted: saves are refused


_ID = re.compile(r"^[0-9a-f]{32}$")


_MAX_VERSION = 2**31 - 2


@runtime_checkable
class StateStore(Protocol):
    """Keeps the conversation state of the Agent Engine (one protocol for every backend).

    Attributes:
        joins_transaction: ``True`` when ``save(..., session=s)`` writes inside ``s`` (so it
            commits or rolls back with the run's messages and memories); ``False`` when the
            state goes elsewhere (hooks): call ``save`` last, just before committing.
        keeps_transcript: ``True`` when an agent conversation's messages belong in the state
            (the enterprise keeps the whole conversation; we keep only its entry).

    """

    joins_transaction: ClassVar[bool]
    keeps_transcript: ClassVar[bool]

    def restore(
        self, conversation: str, user: Principal, *, session: Session | None = None
    ) -> tuple[ConversationState, int] | None:
        """Return the state of ``conversation`` and its version, or ``None`` before any save.

        Raises:
            NotFoundError: the conversation is missing or ``user``'s is not it (stores that can
                tell; a hook may answer ``None`` instead).

        """
        ...

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
        """Apply ``changes`` if the stored version is still ``expected_version``.

        Args:
            conversation: the conversation id (32 hex digits).
            user: the caller; must own the conversation.
            changes: what the run adds.
            expected_version: the version restored when the run started (0: no state).
            session: a transaction to write in (stores with ``joins_transaction``).
            base: the state restored at ``expected_version``; stores that send the whole
                state (hooks) use it instead of restoring again.

        Returns:
            The new version (greater than ``expected_version``).

        Raises:
            InputError: a value is not JSON (``conv.<name>``, ...), or ``expected_version``
                is not an integer >= 0. Nothing is written.
            ConflictError: the state changed meanwhile. Nothing is written.
            NotFoundError: the conversation is missing, deleted or another user's.
            HookError: a hook failed, timed out or replied badly. Nothing is written.

        """
        ...

    def delete(self, conversation: str, user: Principal, *, session: Session | None = None) -> None:
        """Delete the state of ``conversation`` for good (the user deletes the conversation).

        Raises:
            NotFoundError: missing or another user's.

        """
        ...

    def close(self) -> None:
        """Release what the store holds (threads, connections); idempotent."""
        ...


def missing_conversation(conversation: str) -> NotFoundError:
    """Return the one error for a missing, deleted or foreign conversation."""
    return NotFoundError(f"conversation {conversation!r} not found")


def state_conflict(conversation: str, detail: str) -> ConflictError:
    """Return the one error for the losing side of a race on a conversation's state.

    It speaks to the person who sent the message (the API answers it as 409, the chat stream
    as an ``error`` event); ``detail`` (versions, which store refused) is logged, not shown.
    """
    logger.info(
        "state conflict",
        extra={"fields": {"conversation": conversation, "detail": detail}},
    )
    return ConflictError(
        "this conversation changed meanwhile (another answer in it was saved first); "
        "send your message again"
    )


def check_expected_version(expected_version: Any) -> int:
    """Return ``expected_version`` if it is an ``int`` from 0 to 2**31 - 2.

    The upper bound keeps the next version inside a 32-bit ``INTEGER`` column.

    Raises:
        InputError: field ``expected_version`` otherwise (``bool`` is refused too).

    """
    if (
        not isinstance(expected_version, int)
        or isinstance(expected_version, bool)
        or not 0 <= expected_version <= _MAX_VERSION
    ):
        raise InputError(
            "expected_version",
            f"must be an integer from 0 to {_MAX_VERSION} (the version restored, 0 for none), "
            f"got {expected_version!r}",
        )
    return expected_version


def conversation_owner(
    session: Session, conversation: str, user: Principal, *, lock: bool = False
) -> int:
    """Return the owner's user id of ``conversation`` after checking it is ``user``.

    Args:
        session: the transaction to read in.
        conversation: the conversation id.
        user: the caller.
        lock: on PostgreSQL, hold ``FOR KEY SHARE`` on the conversation row until the
            transaction ends, so a concurrent delete waits for this save (or this save sees
            it deleted); SQLite serialises writers anyway.

    Raises:
        NotFoundError: malformed id, missing, or another user's (same message).

    """
    if not isinstance(conversation, str) or not _ID.fullmatch(conversation):
        raise missing_conversation(str(conversation))
    query = select(Conversation.user_id).where(Conversation.id == conversation)
    if lock:
        query = query.with_for_update(read=True, key_share=True)
    owner = session.scalar(query)
    if owner is None or owner != user.user_id:
        raise missing_conversation(conversation)
    return int(owner)
