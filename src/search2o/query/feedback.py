"""Feedback triage for admins: the rated answers of every user, most recently rated first.

Only what triage needs leaves the store: the answer's id (its retrieval trace is readable by
admins through :meth:`~search2o.query.conversations.Conversations.trace`), the rating, when,
whose, and whether a trace exists. No sealed content (titles, messages) is opened here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import select

from search2o.accounts import Principal
from search2o.errors import InputError, PermissionDeniedError
from search2o.storage.db import Database
from search2o.storage.models import Conversation, Message, RetrievalTrace, User

__all__ = ["MAX_FEEDBACK", "FeedbackItem", "list_feedback"]

MAX_FEEDBACK = 500
"""The most rated answers one request returns."""


@dataclass(frozen=True)
class FeedbackItem:
    """One rated answer (see the module docstring)."""

    message_id: str
    conversation_id: str
    user_email: str
    rating: str
    rated_at: datetime
    searched: bool
    agent: str | None
    has_trace: bool


def list_feedback(
    database: Database,
    principal: Principal,
    rating: Literal["up", "down"] | None = "down",
    limit: int = 100,
) -> list[FeedbackItem]:
    """Return rated answers, most recently rated first.

    Args:
        database: the open database.
        principal: the caller; must be an admin.
        rating: only this rating; ``None`` for both.
        limit: 1..:data:`MAX_FEEDBACK`.

    Raises:
        PermissionDeniedError: the caller is not an admin.
        InputError: ``limit`` out of range (field ``limit``).

    """
    if not principal.is_admin:
        raise PermissionDeniedError("only admins triage feedback")
    if not 1 <= limit <= MAX_FEEDBACK:
        raise InputError("limit", f"must be between 1 and {MAX_FEEDBACK}, got {limit}")
    statement = (
        select(
            Message.id,
            Message.conversation_id,
            User.email,
            Message.rating,
            Message.rated_at,
            Message.searched,
            Message.agent,
            RetrievalTrace.message_id.is_not(None).label("has_trace"),
        )
        .join(Conversation, Conversation.id == Message.conversation_id)
        .join(User, User.id == Conversation.user_id)
        .outerjoin(RetrievalTrace, RetrievalTrace.message_id == Message.id)
        .where(Message.rating.is_not(None), Message.rated_at.is_not(None))
        .order_by(Message.rated_at.desc(), Message.id)
        .limit(limit)
    )
    if rating is not None:
        statement = statement.where(Message.rating == rating)
    with database.session() as session:
        rows = session.execute(statement).all()
    return [
        FeedbackItem(
            r.id,
            r.conversation_id,
            r.email,
            r.rating,
            r.rated_at,
            bool(r.searched),
            r.agent,
            bool(r.has_trace),
        )
        for r in rows
    ]
