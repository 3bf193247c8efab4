"""Admins' changes to users: groups, admin flag and plan; removal with everything they own.

Used by ``PATCH``/``DELETE /v1/users/{email}`` and ``search2o users set``/``remove``. A change
takes effect on the user's next request: every request builds the caller from the user's
current row (:func:`search2o.accounts.resolve_token`, :mod:`search2o.signin`), so a demoted
admin is refused the admin routes at once, and a removed user's tokens and browser sessions
are deleted with them.

The last admin can be neither demoted nor removed (:class:`~search2o.errors.ConflictError`,
HTTP 409): a server needs one admin to change users from the Web App. The admin rows are read
``FOR UPDATE`` on PostgreSQL, so two admins demoting each other at once cannot both succeed
(SQLite runs one writer at a time).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from search2o.accounts import check_plan, get_user, normalize_groups
from search2o.errors import ConflictError, InputError
from search2o.query.conversations import delete_conversations
from search2o.storage.models import Conversation, User

__all__ = ["UserChange", "remove_user", "update_user"]


@dataclass(frozen=True)
class UserChange:
    """What to change; ``None`` leaves a field as it is. ``groups`` replaces the groups."""

    groups: list[str] | None = None
    is_admin: bool | None = None
    plan: str | None = None


def _refuse_last_admin(session: Session, user: User, doing: str) -> None:
    admins = session.scalars(select(User.id).where(User.is_admin).with_for_update()).all()
    if user.is_admin and list(admins) == [user.id]:
        raise ConflictError(
            f"{user.email} is the last admin and cannot be {doing}: make another user an admin "
            "first (search2o users set EMAIL --admin)"
        )


def update_user(session: Session, email: str, change: UserChange) -> User:
    """Apply ``change`` to the user with ``email`` and return the row.

    Raises:
        InputError: nothing to change (field ``body``), a bad group name (``groups``) or plan
            (``plan``).
        NotFoundError: no such user.
        ConflictError: it would demote the last admin.

    """
    if change.groups is None and change.is_admin is None and change.plan is None:
        raise InputError("body", "give groups, is_admin, plan or several")
    groups = None if change.groups is None else normalize_groups(change.groups, "groups")
    if change.plan is not None:
        check_plan(change.plan)
    user = get_user(session, email)
    if change.is_admin is False:
        _refuse_last_admin(session, user, "demoted")
    if groups is not None:
        user.groups = groups
    if change.is_admin is not None:
        user.is_admin = change.is_admin
    if change.plan is not None:
        user.plan = change.plan
    session.flush()
    return user


def remove_user(session: Session, email: str) -> str:
    """Remove the user with ``email`` and everything they own; return the normalised email.

    Their conversations go first with everything under them
    (:func:`~search2o.query.conversations.delete_conversations`); their tokens, browser
    sessions, sign-in links, memories and keys, linked accounts and jobs go with the user row
    (``ON DELETE CASCADE``).

    Raises:
        InputError: malformed email.
        NotFoundError: no such user.
        ConflictError: the user is the last admin.

    """
    user = get_user(session, email)
    _refuse_last_admin(session, user, "removed")
    owned = session.scalars(select(Conversation.id).where(Conversation.user_id == user.id)).all()
    delete_conversations(session, owned)
    address = user.email
    session.execute(delete(User).where(User.id == user.id))
    session.expunge(user)
    return address
