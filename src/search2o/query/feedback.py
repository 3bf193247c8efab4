"""Feedback on answers: what a rating may carry, and triage of every user's ratings for admins.

A ``down`` rating may carry reasons (:data:`REASONS`) and a comment (the user's text, sealed
with the conversation's data key, kind ``rating_comment``); :func:`check_feedback` is the one
rule for both. Triage lets only what it needs leave the store: the answer's id (its retrieval
trace is readable by admins through :meth:`~search2o.query.conversations.Conversations.trace`),
the rating, when, whose, whether a trace exists, and the reasons and comment. No other sealed
content (titles, messages) is opened here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, cast, get_args

from sqlalchemy import select

from search2o.accounts import Principal
from search2o.crypto.vault import Sealer, Vault
from search2o.errors import InputError, PermissionDeniedError
from search2o.storage.db import Database
from search2o.storage.models import Conversation, Message, RetrievalTrace, User
from search2o.textrules import check_text
from search2o.wire.chat import Reason

__all__ = [
    "COMMENT_KIND",
    "MAX_FEEDBACK",
    "REASONS",
    "Feedback",
    "FeedbackItem",
    "Reason",
    "check_feedback",
    "list_feedback",
    "open_comment",
]

MAX_FEEDBACK = 500
"""The most rated answers one request returns."""

REASONS: tuple[str, ...] = get_args(Reason)
"""Why an answer was rated down: the source is wrong, information is missing, it is outdated,
a citation does not support the claim (the issue's four, in the Web App's order)."""

COMMENT_KIND = "rating_comment"
"""The sealed record kind of a rating's comment (:class:`search2o.crypto.vault.Sealer`)."""


@dataclass(frozen=True)
class Feedback:
    """A checked rating: ``up``/``down``/``None`` (cleared), reasons and comment (down only)."""

    rating: Literal["up", "down"] | None
    reasons: tuple[str, ...] = ()
    comment: str | None = None


def check_feedback(
    rating: Literal["up", "down"] | None,
    reasons: Sequence[str] | None,
    comment: str | None,
    *,
    max_comment_chars: int,
) -> Feedback:
    """Return the feedback a rating request carries, checked.

    Args:
        rating: ``up``, ``down`` or ``None`` to clear the rating (and its reasons and comment).
        reasons: each one of :data:`REASONS`, at most once; ``None`` or empty for none.
        comment: free text, through :func:`search2o.textrules.check_text` (outer whitespace
            stripped, at most ``max_comment_chars``); ``None`` for none.
        max_comment_chars: the setting ``chat.max_feedback_comment_chars``.

    Raises:
        InputError: ``reasons`` or ``comment`` given with a rating other than ``down``, an
            unknown or repeated reason (field ``reasons``), a bad comment (field ``comment``).

    """
    given = list(reasons or ())
    if rating != "down":
        if given:
            raise InputError("reasons", 'only a "down" rating carries reasons')
        if comment is not None:
            raise InputError("comment", 'only a "down" rating carries a comment')
        return Feedback(rating)
    for position, reason in enumerate(given):
        if reason not in REASONS:
            raise InputError(
                f"reasons.{position}", f"{reason!r} is not one of {', '.join(REASONS)}"
            )
        if reason in given[:position]:
            raise InputError(f"reasons.{position}", f"{reason!r} is given twice")
    checked = None
    if comment is not None:
        checked = check_text(
            comment,
            "comment",
            max_chars=max_comment_chars,
            setting="chat.max_feedback_comment_chars",
        )
    return Feedback(rating, tuple(given), checked)


def open_comment(sealer: Sealer, row: Message) -> str | None:
    """Return the comment of ``row``'s rating, opened with its conversation's ``sealer``."""
    if row.rating_comment is None:
        return None
    comment: str = sealer.open(COMMENT_KIND, row.rating_comment, f"rating comment of {row.id}")
    return comment


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
    reasons: list[str]
    comment: str | None


def list_feedback(
    database: Database,
    vault: Vault,
    principal: Principal,
    rating: Literal["up", "down"] | None = "down",
    limit: int = 100,
) -> list[FeedbackItem]:
    """Return rated answers, most recently rated first.

    Args:
        database: the open database.
        vault: the data keys that open the comments.
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
        select(Message, User.email, Conversation.user_id, RetrievalTrace.message_id.is_not(None))
        .join(Conversation, Conversation.id == Message.conversation_id)
        .join(User, User.id == Conversation.user_id)
        .outerjoin(RetrievalTrace, RetrievalTrace.message_id == Message.id)
        .where(Message.rating.is_not(None), Message.rated_at.is_not(None))
        .order_by(Message.rated_at.desc(), Message.id)
        .limit(limit)
    )
    if rating is not None:
        statement = statement.where(Message.rating == rating)
    items = []
    with database.session() as session:
        for message, email, owner, has_trace in session.execute(statement).all():
            comment = None
            if message.rating_comment is not None:
                sealer = vault.sealer(session, message.conversation_id, owner)
                comment = open_comment(sealer, message)
            items.append(
                FeedbackItem(
                    message.id,
                    message.conversation_id,
                    email,
                    # the WHERE clause keeps only rated answers: both are set
                    cast(str, message.rating),
                    cast(datetime, message.rated_at),
                    bool(message.searched),
                    message.agent,
                    bool(has_trace),
                    list(message.rating_reasons or []),
                    comment,
                )
            )
    return items
