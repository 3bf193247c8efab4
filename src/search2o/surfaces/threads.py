"""Which conversation a thread of a surface continues: (surface, workspace, channel, thread).

A thread's first message starts a conversation: the surface calls chat without a
``conversation_id`` and then :func:`remember_thread` with the id of the first event; later
messages find it with :func:`conversation_for_thread`. A mapping belongs to the principal whose
conversation it names — in a direct message the user, in a channel the shared-channel principal
(:mod:`search2o.surfaces.identity`) — and is never handed to another principal: for them the
thread is unmapped, and mapping it again is refused (409). The first mapping of a thread wins:
two first messages racing in one thread both get the conversation that was remembered first. A
mapping goes with its conversation (deleted, or expired by retention).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.errors import ConflictError
from search2o.query.conversations import owned_conversation
from search2o.query.settings import RetentionSettings
from search2o.storage import dialect
from search2o.storage.models import utcnow
from search2o.storage.surface_models import SurfaceThread
from search2o.textrules import check_text
from search2o.wire.names import check_external_id, check_surface, check_workspace

__all__ = ["ThreadLink", "conversation_for_thread", "remember_thread"]


@dataclass(frozen=True)
class ThreadLink:
    """A thread and the conversation it continues.

    Attributes:
        surface, workspace, channel, thread: the thread.
        conversation_id: its conversation.
        created: whether this call mapped it (``False``: it was mapped already).

    """

    surface: str
    workspace: str
    channel: str
    thread: str
    conversation_id: str
    created: bool


def _key(surface: str, workspace: str, channel: str, thread: str) -> tuple[str, str, str, str]:
    return (
        check_surface(surface),
        check_workspace(workspace),
        check_external_id(channel, "channel"),
        check_external_id(thread, "thread"),
    )


def _mapped(session: Session, key: tuple[str, str, str, str]) -> SurfaceThread | None:
    return session.scalar(
        select(SurfaceThread)
        .where(
            SurfaceThread.surface == key[0],
            SurfaceThread.workspace == key[1],
            SurfaceThread.channel == key[2],
            SurfaceThread.thread == key[3],
        )
        .execution_options(populate_existing=True)
    )


def conversation_for_thread(
    session: Session,
    surface: str,
    workspace: str,
    channel: str,
    thread: str,
    principal: Principal,
) -> str | None:
    """Return the id of the conversation ``principal`` continues in a thread, or ``None``.

    ``None`` too when the thread is mapped to another principal's conversation.

    Raises:
        InputError: a name breaks :mod:`search2o.wire.names`.

    """
    row = _mapped(session, _key(surface, workspace, channel, thread))
    if row is None or row.user_id != principal.user_id:
        return None
    return row.conversation_id


def remember_thread(
    session: Session,
    surface: str,
    workspace: str,
    channel: str,
    thread: str,
    conversation_id: str,
    principal: Principal,
    retention: RetentionSettings | None = None,
) -> ThreadLink:
    """Map a thread to ``principal``'s conversation, unless it is mapped already.

    Args:
        retention: the server's retention settings, so an expired conversation counts as
            missing (as everywhere else).

    Returns:
        the mapping: the given conversation with ``created``, or the one remembered earlier
        (the first mapping of a thread wins).

    Raises:
        InputError: a bad name or conversation id.
        NotFoundError: the conversation is missing or another principal's.
        ConflictError: the thread is mapped to another principal's conversation.

    """
    key = _key(surface, workspace, channel, thread)
    wanted = check_text(conversation_id, "conversation_id", max_chars=64, strip=False)
    owned_conversation(session, principal, wanted, retention)
    inserted = session.execute(
        dialect.insert(session, SurfaceThread)
        .values(
            surface=key[0],
            workspace=key[1],
            channel=key[2],
            thread=key[3],
            conversation_id=wanted,
            user_id=principal.user_id,
            created_at=utcnow(),
        )
        .on_conflict_do_nothing(index_elements=["surface", "workspace", "channel", "thread"])
    )
    row = _mapped(session, key)
    assert row is not None  # inserted now, or there before
    if row.user_id != principal.user_id:
        raise ConflictError(
            f"the {key[0]} thread {key[2]}/{key[3]} continues another principal's conversation; "
            "a thread keeps the principal of its first message"
        )
    created = bool(getattr(inserted, "rowcount", 0)) and row.conversation_id == wanted
    return ThreadLink(*key, row.conversation_id, created)
