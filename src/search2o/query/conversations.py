"""Conversations and messages: list, read, rename, pin, delete, rate, trace — always as their owner.

Every function takes the caller's :class:`~search2o.accounts.Principal` and treats another
user's conversation or message exactly like a missing one (:class:`NotFoundError`, HTTP 404),
with the same message. The only exception is :meth:`Conversations.trace`, which admins may read
too. Conversations are created only by a turn (:mod:`search2o.query.turn`), never empty.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.errors import InputError, NotFoundError
from search2o.storage.db import Database
from search2o.storage.models import (
    Conversation,
    ConversationSummary,
    Message,
    RetrievalTrace,
    utcnow,
)

__all__ = [
    "ConversationInfo",
    "Conversations",
    "MessageInfo",
    "Rating",
    "append_message",
    "owned_conversation",
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
    def of(cls, row: Conversation) -> ConversationInfo:
        """Build from a stored row."""
        return cls(
            row.id, row.title, row.pinned, row.created_at, row.last_used_at, row.message_count
        )


@dataclass(frozen=True)
class MessageInfo:
    """One message: role ``user``/``assistant``, text, citations, status, rating, agent."""

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

    @classmethod
    def of(cls, row: Message) -> MessageInfo:
        """Build from a stored row."""
        return cls(
            row.id,
            row.conversation_id,
            row.role,
            row.text,
            list(row.citations),
            row.status,
            row.searched,
            row.rating,
            row.agent,
            row.created_at,
        )


def _missing_conversation(conversation_id: str) -> NotFoundError:
    return NotFoundError(f"conversation {conversation_id!r} not found")


def _missing_message(message_id: str) -> NotFoundError:
    return NotFoundError(f"message {message_id!r} not found")


def owned_conversation(
    session: Session, principal: Principal, conversation_id: str
) -> Conversation:
    """Return the caller's conversation ``conversation_id``.

    Raises:
        NotFoundError: it does not exist or belongs to someone else (same message).

    """
    if not _ID.fullmatch(conversation_id):
        raise _missing_conversation(conversation_id)
    row = session.get(Conversation, conversation_id)
    if row is None or row.user_id != principal.user_id:
        raise _missing_conversation(conversation_id)
    return row


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


def append_message(session: Session, conversation: Conversation, **values: Any) -> Message:
    """Add a message at the conversation's next position and mark the conversation used.

    The position comes from an atomic ``UPDATE ... RETURNING`` of ``message_count``, so two
    turns appending to one conversation at once never take the same position.

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
    message = Message(conversation_id=conversation.id, seq=seq, **values)
    session.add(message)
    session.flush()
    return message


class Conversations:
    """The conversation and message operations of the API and CLI.

    Args:
        database: the open database.

    """

    def __init__(self, database: Database) -> None:
        self._db = database

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
                .where(Conversation.user_id == principal.user_id)
                .order_by(
                    Conversation.pinned.desc(), Conversation.last_used_at.desc(), Conversation.id
                )
                .limit(limit)
                .offset(offset)
            )
            return [ConversationInfo.of(row) for row in rows]

    def latest(self, principal: Principal) -> ConversationInfo | None:
        """Return the caller's most recently used conversation, pinned or not, if any."""
        with self._db.session() as session:
            row = session.scalars(
                select(Conversation)
                .where(Conversation.user_id == principal.user_id)
                .order_by(Conversation.last_used_at.desc())
                .limit(1)
            ).first()
            return None if row is None else ConversationInfo.of(row)

    def get(self, principal: Principal, conversation_id: str) -> ConversationInfo:
        """Return one conversation of the caller.

        Raises:
            NotFoundError: missing or another user's.

        """
        with self._db.session() as session:
            return ConversationInfo.of(owned_conversation(session, principal, conversation_id))

    def messages(self, principal: Principal, conversation_id: str) -> list[MessageInfo]:
        """Return the conversation's messages in order.

        Raises:
            NotFoundError: missing or another user's.

        """
        with self._db.session() as session:
            row = owned_conversation(session, principal, conversation_id)
            return [MessageInfo.of(m) for m in row.messages]

    def update(
        self,
        principal: Principal,
        conversation_id: str,
        *,
        title: str | None = None,
        pinned: bool | None = None,
    ) -> ConversationInfo:
        """Rename and/or pin or unpin a conversation; validation happens before any change.

        Raises:
            InputError: a bad title (see :func:`validate_title`).
            NotFoundError: missing or another user's.

        """
        clean = validate_title(title) if title is not None else None
        with self._db.session() as session:
            row = owned_conversation(session, principal, conversation_id)
            if clean is not None:
                row.title = clean
            if pinned is not None:
                row.pinned = pinned
            session.flush()
            return ConversationInfo.of(row)

    def delete(self, principal: Principal, conversation_id: str) -> None:
        """Delete a conversation with its messages, ratings, traces and summary.

        Raises:
            NotFoundError: missing or another user's.

        """
        with self._db.session() as session:
            row = owned_conversation(session, principal, conversation_id)
            message_ids = select(Message.id).where(Message.conversation_id == row.id)
            # Explicit deletes, children first: nothing relies on the backend's cascade.
            session.execute(
                delete(RetrievalTrace).where(RetrievalTrace.message_id.in_(message_ids))
            )
            session.execute(delete(Message).where(Message.conversation_id == row.id))
            session.execute(
                delete(ConversationSummary).where(ConversationSummary.conversation_id == row.id)
            )
            session.execute(delete(Conversation).where(Conversation.id == row.id))

    def _owned_message(self, session: Session, principal: Principal, message_id: str) -> Message:
        if not _ID.fullmatch(message_id):
            raise _missing_message(message_id)
        message = session.get(Message, message_id)
        if message is None:
            raise _missing_message(message_id)
        owner = session.scalar(
            select(Conversation.user_id).where(Conversation.id == message.conversation_id)
        )
        if owner != principal.user_id:
            raise _missing_message(message_id)
        return message

    def rate(self, principal: Principal, message_id: str, rating: Rating | None) -> MessageInfo:
        """Set (``up``/``down``) or clear (``None``) the rating of an assistant message.

        Raises:
            InputError: the message is the user's own turn (field ``message_id``).
            NotFoundError: missing or in another user's conversation.

        """
        with self._db.session() as session:
            message = self._owned_message(session, principal, message_id)
            if message.role != "assistant":
                raise InputError("message_id", "only an assistant answer can be rated")
            message.rating = rating
            message.rated_at = utcnow() if rating is not None else None
            session.flush()
            return MessageInfo.of(message)

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
            return dict(row.trace)

    def count(self, principal: Principal) -> int:
        """Return how many conversations the caller has."""
        with self._db.session() as session:
            return int(
                session.scalar(
                    select(func.count())
                    .select_from(Conversation)
                    .where(Conversation.user_id == principal.user_id)
                )
                or 0
            )
