"""Conversations and messages: list, read, rename, pin, delete, rate, trace — always as their owner.

Every function takes the caller's :class:`~search2o.accounts.Principal` and treats another
user's conversation or message exactly like a missing one (:class:`NotFoundError`, HTTP 404),
with the same message. The only exception is :meth:`Conversations.trace`, which admins may read
too. Conversations are created only by a turn (:mod:`search2o.query.turn`), never empty.

Content is sealed (:mod:`search2o.crypto.vault`): the title (kind ``title``), each message's
text and citations (kind ``message``), summaries and traces are stored only encrypted under the
conversation's data key. An expired conversation (see :class:`~search2o.config.
RetentionSettings`) is treated as missing on every path, before the sweeper removes it; reading
a conversation's messages counts as a use.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, delete, func, or_, select, true, update
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.crypto.vault import Sealer, Vault
from search2o.errors import InputError, NotFoundError
from search2o.query.feedback import COMMENT_KIND, Feedback, open_comment
from search2o.query.settings import RetentionSettings
from search2o.state.contract import StateStore
from search2o.storage.db import Database
from search2o.storage.models import (
    Conversation,
    ConversationKey,
    ConversationState,
    ConversationSummary,
    Message,
    RetrievalTrace,
    StateChange,
    StateSnapshot,
    utcnow,
)
from search2o.storage.run_models import Run, RunEvents

__all__ = [
    "ConversationInfo",
    "Conversations",
    "MessageInfo",
    "Rating",
    "append_message",
    "clean_title",
    "create_conversation",
    "delete_conversations",
    "expiry_cutoff",
    "live",
    "open_message",
    "owned_conversation",
    "touch_entry",
    "validate_title",
]

Rating = Literal["up", "down"]
MAX_TITLE_CHARS = 200
MAX_PAGE = 200
MAX_OFFSET = 1_000_000
# Conversation and message ids are 32 lower-case hex digits (uuid4().hex). Anything else cannot
# exist, so it is answered as missing without asking the database.
_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class ConversationInfo:
    """A conversation as listed: id, title, pinned flag, times (UTC), message count."""

    id: str
    title: str
    pinned: bool
    created_at: datetime
    last_used_at: datetime
    message_count: int

    @classmethod
    def of(cls, row: Conversation, sealer: Sealer) -> ConversationInfo:
        """Build from a stored row, opening its title with the conversation's ``sealer``."""
        title = sealer.open("title", row.title_sealed, f"title of conversation {row.id}")
        return cls(row.id, title, row.pinned, row.created_at, row.last_used_at, row.message_count)


@dataclass(frozen=True)
class MessageInfo:
    """One message: role ``user``/``assistant``, text, citations, status, rating, agent.

    ``rating_reasons`` and ``rating_comment`` come with a ``down`` rating
    (:func:`search2o.query.feedback.check_feedback`); only the message's owner reads them here.
    """

    id: str
    conversation_id: str
    role: str
    text: str
    citations: list[dict[str, Any]]
    status: str
    searched: bool
    rating: str | None
    agent: str | None
    created_at: datetime
    rating_reasons: list[str] = field(default_factory=list)
    rating_comment: str | None = None

    @classmethod
    def from_transcript(cls, conversation_id: str, message: dict[str, Any]) -> MessageInfo:
        """Build from a message of a state's transcript (state hooks keeping the conversation)."""
        return cls(
            str(message["id"]),
            conversation_id,
            str(message["role"]),
            str(message["text"]),
            list(message.get("citations") or []),
            str(message.get("status") or "complete"),
            bool(message.get("searched")),
            None,
            message.get("agent"),
            datetime.fromisoformat(str(message["created_at"])),
        )

    @classmethod
    def of(cls, row: Message, sealer: Sealer) -> MessageInfo:
        """Build from a stored row, opening its body with the conversation's ``sealer``."""
        text, citations = open_message(sealer, row)
        return cls(
            row.id,
            row.conversation_id,
            row.role,
            text,
            citations,
            row.status,
            row.searched,
            row.rating,
            row.agent,
            row.created_at,
            list(row.rating_reasons or []),
            open_comment(sealer, row),
        )


def _missing_conversation(conversation_id: str) -> NotFoundError:
    return NotFoundError(f"conversation {conversation_id!r} not found")


def _missing_message(message_id: str) -> NotFoundError:
    return NotFoundError(f"message {message_id!r} not found")


def expiry_cutoff(retention: RetentionSettings | None, plan: str) -> datetime | None:
    """Return the instant before which an unpinned conversation of ``plan`` is expired.

    ``None`` means its conversations never expire (unlimited plan, or no retention given).
    """
    days = retention.days_for(plan) if retention is not None else None
    return None if days is None else utcnow() - timedelta(days=days)


def live(cutoff: datetime | None) -> ColumnElement[bool]:
    """Return the SQL condition "pinned, or used at or after ``cutoff``"."""
    if cutoff is None:
        return true()
    return or_(Conversation.pinned.is_(True), Conversation.last_used_at >= cutoff)


def owned_conversation(
    session: Session,
    principal: Principal,
    conversation_id: str,
    retention: RetentionSettings | None = None,
) -> Conversation:
    """Return the caller's conversation ``conversation_id``, if it has not expired.

    Raises:
        NotFoundError: it does not exist, belongs to someone else, or expired under
            ``retention`` (all with the same message).

    """
    if not _ID.fullmatch(conversation_id):
        raise _missing_conversation(conversation_id)
    row = session.get(Conversation, conversation_id)
    if row is None or row.user_id != principal.user_id:
        raise _missing_conversation(conversation_id)
    cutoff = expiry_cutoff(retention, principal.plan)
    if cutoff is not None and not row.pinned and row.last_used_at < cutoff:
        raise _missing_conversation(conversation_id)
    return row


def create_conversation(
    session: Session, vault: Vault, principal: Principal, title: str
) -> tuple[Conversation, Sealer]:
    """Create a conversation of ``principal`` with its data key and sealed ``title``."""
    conversation = Conversation(user_id=principal.user_id, title_sealed=b"")
    session.add(conversation)
    session.flush()
    sealer = vault.create(session, conversation.id, principal.user_id)
    conversation.title_sealed = sealer.seal("title", title)
    return conversation, sealer


def open_message(sealer: Sealer, row: Message) -> tuple[str, list[dict[str, Any]]]:
    """Return a stored message's ``(text, citations)``.

    Raises:
        IntegrityCheckError: the body was altered or belongs to another conversation.

    """
    body = sealer.open("message", row.body, f"message {row.id}")
    return str(body["text"]), list(body["citations"])


def delete_conversations(session: Session, conversation_ids: Iterable[str]) -> int:
    """Delete conversations with everything under them; return how many were deleted.

    Children go first, explicitly (nothing relies on the backend's cascade): traces, runs and
    their events, messages, summary, agent state and its changes, the data key.
    """
    ids = list(conversation_ids)
    if not ids:
        return 0
    message_ids = select(Message.id).where(Message.conversation_id.in_(ids))
    session.execute(delete(RetrievalTrace).where(RetrievalTrace.message_id.in_(message_ids)))
    run_ids = select(Run.id).where(Run.conversation_id.in_(ids))
    session.execute(delete(RunEvents).where(RunEvents.run_id.in_(run_ids)))
    session.execute(delete(Run).where(Run.conversation_id.in_(ids)))
    session.execute(delete(Message).where(Message.conversation_id.in_(ids)))
    for table in (
        ConversationSummary,
        StateChange,
        StateSnapshot,
        ConversationState,
        ConversationKey,
    ):
        session.execute(delete(table).where(table.conversation_id.in_(ids)))
    result = session.execute(delete(Conversation).where(Conversation.id.in_(ids)))
    return int(getattr(result, "rowcount", 0) or 0)


def clean_title(title: str) -> str:
    """Return a model-written title without control characters, whitespace collapsed, ≤ 200."""
    text = "".join(" " if unicodedata.category(c) in ("Cc", "Cs") else c for c in title)
    return " ".join(text.split())[:MAX_TITLE_CHARS]


def validate_title(title: str) -> str:
    """Return ``title`` with whitespace collapsed.

    Raises:
        InputError: empty, longer than 200 characters, or containing control characters
            (field ``title``).

    """
    if any(unicodedata.category(c) in ("Cc", "Cs") and c not in "\t\n\r" for c in title):
        raise InputError("title", "must not contain control characters or invalid Unicode")
    text = " ".join(title.split())
    if not text:
        raise InputError("title", "must not be empty")
    if len(text) > MAX_TITLE_CHARS:
        raise InputError("title", f"is {len(text)} characters long; the limit is {MAX_TITLE_CHARS}")
    if not text.isprintable():
        raise InputError("title", "must not contain control characters or invalid Unicode")
    return text


def append_message(
    session: Session,
    conversation: Conversation,
    sealer: Sealer,
    *,
    text: str,
    citations: list[dict[str, Any]] | None = None,
    page: dict[str, Any] | None = None,
    **values: Any,
) -> Message:
    """Add a message (sealed ``text`` and ``citations``) at the conversation's next position.

    ``page`` (a user message's page context, :meth:`search2o.query.page.Page.stored`) is
    sealed in the same body, so it lives and dies with the message and never sits in a column.

    The position comes from an atomic ``UPDATE ... RETURNING`` of ``message_count``, which also
    marks the conversation used, so two turns appending to one conversation at once never take
    the same position. ``values`` are the other :class:`Message` columns (``role``...).

    Raises:
        NotFoundError: the conversation was deleted meanwhile.

    """
    seq = session.execute(
        update(Conversation)
        .where(Conversation.id == conversation.id)
        .values(message_count=Conversation.message_count + 1, last_used_at=utcnow())
        .returning(Conversation.message_count)
    ).scalar_one_or_none()
    if seq is None:
        raise _missing_conversation(conversation.id)
    content: dict[str, Any] = {"text": text, "citations": citations or []}
    if page is not None:
        content["page"] = page
    body = sealer.seal("message", content)
    message = Message(conversation_id=conversation.id, seq=seq, body=body, **values)
    session.add(message)
    session.flush()
    return message


def touch_entry(session: Session, conversation: Conversation, messages: int = 0) -> None:
    """Mark a conversation used now and count ``messages`` more in it (kept elsewhere).

    For conversations whose messages the state hooks keep: the entry's ``message_count`` and
    ``last_used_at`` still follow the conversation, so lists and retention work the same.

    Raises:
        NotFoundError: the conversation was deleted meanwhile.

    """
    done = session.execute(
        update(Conversation)
        .where(Conversation.id == conversation.id)
        .values(message_count=Conversation.message_count + messages, last_used_at=utcnow())
        .returning(Conversation.id)
    ).scalar_one_or_none()
    if done is None:
        raise _missing_conversation(conversation.id)


class Conversations:
    """The conversation and message operations of the API and CLI.

    Args:
        database: the open database.
        vault: the data keys that open the conversations' sealed content.
        retention: when conversations expire (``None``: never).
        state_store: the agent state store; a user's delete deletes the state there too (with
            enterprise hooks, that calls the hook's ``delete_conversation``).

    """

    def __init__(
        self,
        database: Database,
        vault: Vault,
        retention: RetentionSettings | None = None,
        state_store: StateStore | None = None,
    ) -> None:
        self._db = database
        self._vault = vault
        self._retention = retention
        self._state = state_store

    def _info(self, session: Session, row: Conversation) -> ConversationInfo:
        return ConversationInfo.of(row, self._vault.sealer(session, row.id, row.user_id))

    def _owned(self, session: Session, principal: Principal, conversation_id: str) -> Conversation:
        return owned_conversation(session, principal, conversation_id, self._retention)

    def _live(self, principal: Principal) -> ColumnElement[bool]:
        return live(expiry_cutoff(self._retention, principal.plan))

    def list_conversations(
        self, principal: Principal, limit: int = 50, offset: int = 0
    ) -> list[ConversationInfo]:
        """Return the caller's conversations: pinned first, then most recently used first.

        Raises:
            InputError: ``limit`` outside 1..200 or ``offset`` outside 0..1,000,000.

        """
        if not 1 <= limit <= MAX_PAGE:
            raise InputError("limit", f"must be between 1 and {MAX_PAGE}, got {limit}")
        if not 0 <= offset <= MAX_OFFSET:
            raise InputError("offset", f"must be between 0 and {MAX_OFFSET}, got {offset}")
        with self._db.session() as session:
            rows = session.scalars(
                select(Conversation)
                .where(Conversation.user_id == principal.user_id, self._live(principal))
                .order_by(
                    Conversation.pinned.desc(), Conversation.last_used_at.desc(), Conversation.id
                )
                .limit(limit)
                .offset(offset)
            )
            return [self._info(session, row) for row in rows]

    def latest(self, principal: Principal) -> ConversationInfo | None:
        """Return the caller's most recently used conversation, pinned or not, if any."""
        with self._db.session() as session:
            row = session.scalars(
                select(Conversation)
                .where(Conversation.user_id == principal.user_id, self._live(principal))
                .order_by(Conversation.last_used_at.desc())
                .limit(1)
            ).first()
            return None if row is None else self._info(session, row)

    def get(self, principal: Principal, conversation_id: str) -> ConversationInfo:
        """Return one conversation of the caller (a read: it counts as a use).

        Raises:
            NotFoundError: missing, expired or another user's.

        """
        with self._db.session() as session:
            row = self._owned(session, principal, conversation_id)
            row.last_used_at = utcnow()
            return self._info(session, row)

    def messages(self, principal: Principal, conversation_id: str) -> list[MessageInfo]:
        """Return the conversation's messages in order (a read: it counts as a use).

        A conversation the state hooks keep (``kept_by_hooks``) is read from the hook's
        ``restore``, with the owner's email; its messages cannot be rated or traced here.

        Raises:
            NotFoundError: missing, expired or another user's.
            IntegrityCheckError: a stored message was altered.
            HookError: the state hook failed.

        """
        with self._db.session() as session:
            row = self._owned(session, principal, conversation_id)
            row.last_used_at = utcnow()
            sealer = self._vault.sealer(session, row.id, row.user_id)
            ours = [MessageInfo.of(m, sealer) for m in row.messages]
            hooked = row.kept_by_hooks
        if not hooked or self._state is None:
            return ours
        # The state hooks keep this conversation's transcript: ask them (as its owner).
        restored = self._state.restore(conversation_id, principal)
        kept = restored[0].transcript if restored is not None else []
        return ours + [MessageInfo.from_transcript(conversation_id, m) for m in kept]

    def update(
        self,
        principal: Principal,
        conversation_id: str,
        *,
        title: str | None = None,
        pinned: bool | None = None,
    ) -> ConversationInfo:
        """Rename and/or pin or unpin a conversation; validation happens before any change.

        Unpinning counts as a use, so an old conversation does not expire at once; renaming and
        pinning do not change which conversation was used last.

        Raises:
            InputError: a bad title (see :func:`validate_title`).
            NotFoundError: missing or another user's.

        """
        clean = validate_title(title) if title is not None else None
        with self._db.session() as session:
            row = self._owned(session, principal, conversation_id)
            sealer = self._vault.sealer(session, row.id, row.user_id)
            if clean is not None:
                row.title_sealed = sealer.seal("title", clean)
            if pinned is False and row.pinned:
                # Retention restarts from the unpinning, not from a use long ago: an old
                # conversation must not vanish at the next sweep because it was unpinned.
                row.last_used_at = utcnow()
            if pinned is not None:
                row.pinned = pinned
            session.flush()
            return ConversationInfo.of(row, sealer)

    def delete(self, principal: Principal, conversation_id: str) -> None:
        """Delete a conversation with everything under it (:func:`delete_conversations`).

        The agent state goes first, in the same transaction: when an enterprise hook keeps it,
        the hook's ``delete_conversation`` is called, and if it fails nothing is deleted.

        Raises:
            NotFoundError: missing, expired or another user's.
            HookError: the enterprise hook failed (nothing was deleted).

        """
        with self._db.session() as session:
            row = self._owned(session, principal, conversation_id)
            if self._state is not None:
                self._state.delete(row.id, principal, session=session)
            delete_conversations(session, [row.id])
        self._vault.forget(conversation_id)

    def _owned_message(self, session: Session, principal: Principal, message_id: str) -> Message:
        if not _ID.fullmatch(message_id):
            raise _missing_message(message_id)
        message = session.get(Message, message_id)
        if message is None:
            raise _missing_message(message_id)
        try:
            self._owned(session, principal, message.conversation_id)
        except NotFoundError:
            raise _missing_message(message_id) from None
        return message

    def _message_sealer(self, session: Session, message: Message) -> Sealer:
        owner = session.scalar(
            select(Conversation.user_id).where(Conversation.id == message.conversation_id)
        )
        if owner is None:
            raise _missing_message(message.id)
        return self._vault.sealer(session, message.conversation_id, owner)

    def rate(
        self, principal: Principal, message_id: str, rating: Rating | Feedback | None
    ) -> MessageInfo:
        """Set (``up``/``down``) or clear (``None``) the rating of an assistant message.

        A :class:`~search2o.query.feedback.Feedback` (checked by
        :func:`~search2o.query.feedback.check_feedback`) sets the reasons and the comment
        (sealed) with the rating; a bare rating has none. Every rating replaces the previous
        one with its reasons and comment, so clearing clears them too.

        Raises:
            InputError: the message is the user's own turn (field ``message_id``).
            NotFoundError: missing or in another user's conversation.

        """
        with self._db.session() as session:
            message = self._owned_message(session, principal, message_id)
            if message.role != "assistant":
                raise InputError("message_id", "only an assistant answer can be rated")
            feedback = rating if isinstance(rating, Feedback) else Feedback(rating)
            sealer = self._message_sealer(session, message)
            message.rating = feedback.rating
            message.rated_at = utcnow() if feedback.rating is not None else None
            message.rating_reasons = list(feedback.reasons) or None
            message.rating_comment = (
                None if feedback.comment is None else sealer.seal(COMMENT_KIND, feedback.comment)
            )
            session.flush()
            return MessageInfo.of(message, sealer)

    def trace(self, principal: Principal, message_id: str) -> dict[str, Any]:
        """Return the retrieval trace of an answer; its owner and admins may read it.

        Raises:
            NotFoundError: no such message, not readable by the caller, or an answer that
                kept no trace (a user message).

        """
        with self._db.session() as session:
            if principal.is_admin:
                message = session.get(Message, message_id) if _ID.fullmatch(message_id) else None
                if message is None:
                    raise _missing_message(message_id)
            else:
                message = self._owned_message(session, principal, message_id)
            row = session.get(RetrievalTrace, message.id)
            if row is None:
                raise NotFoundError(f"message {message_id!r} has no retrieval trace")
            sealer = self._message_sealer(session, message)
            trace: dict[str, Any] = sealer.open("trace", row.sealed, f"trace of {message.id}")
            return trace

    def count(self, principal: Principal) -> int:
        """Return how many conversations the caller has."""
        with self._db.session() as session:
            return int(
                session.scalar(
                    select(func.count())
                    .select_from(Conversation)
                    .where(Conversation.user_id == principal.user_id, self._live(principal))
                )
                or 0
            )
