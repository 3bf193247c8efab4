"""The surface-neutral delivery tables (migration 0016): questions taken, and ingress cursors.

``surface_deliveries`` holds one row per user message a messenger surface took (Slack,
Telegram, Mattermost). A row is unique on the platform's event key (``surface, event_key``:
Slack's ``event_id``, Telegram's ``update_id``, Mattermost's ``post.id``) and on the message
(``surface, workspace, channel, message_key``: Slack's ``(team, channel, ts)`` — one post
arrives as ``app_mention`` and as ``message`` —, Telegram's ``(chat, message_id)``), so a
re-sent or doubled delivery finds its row and is ignored.
``state`` moves ``pending → answering → posted | failed``; ``reply_key`` is the platform id of
the answer once it exists, so a job that runs again after a crash edits that message instead
of sending a second one.
``run_id`` is the answer's run (:mod:`search2o.chat.runs`), stored as soon as its first event
names it, so an attempt after a crash follows that run from its first event instead of asking
the question a second time.

The question's text is stored sealed (AES-256-GCM under a data key of its own wrapped by the
KEK, :mod:`search2o.crypto.envelope`) and dropped once the answer is final; the job's payload
holds only the row's id.

``surface_cursors`` keeps one resumable position per (surface, workspace, name): the
``getUpdates`` offset of Telegram's long polling, the last post time of a Mattermost backfill.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Integer, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from search2o.storage.models import Base, UTCDateTime, utcnow

__all__ = ["SurfaceCursor", "SurfaceDelivery"]


class SurfaceDelivery(Base):
    """One question taken by a surface and the state of its answer (module docstring)."""

    __tablename__ = "surface_deliveries"
    __table_args__ = (
        UniqueConstraint("surface", "event_key", name="uq_surface_deliveries_event"),
        UniqueConstraint(
            "surface", "workspace", "channel", "message_key", name="uq_surface_deliveries_message"
        ),
        Index("ix_surface_deliveries_thread", "surface", "workspace", "channel", "thread_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    surface: Mapped[str] = mapped_column(String(32))
    workspace: Mapped[str] = mapped_column(String(100))
    channel: Mapped[str] = mapped_column(String(200))
    channel_type: Mapped[str] = mapped_column(String(16))
    message_key: Mapped[str] = mapped_column(String(64))
    event_key: Mapped[str] = mapped_column(String(64))
    thread_key: Mapped[str] = mapped_column(String(64))
    user: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16), default="pending")
    reply_key: Mapped[str | None] = mapped_column(String(200))
    answer_message_id: Mapped[str | None] = mapped_column(String(64))
    run_id: Mapped[str | None] = mapped_column(String(64))
    act_as: Mapped[str | None] = mapped_column(String(320))
    kek_id: Mapped[str | None] = mapped_column(String(200))
    kek_version: Mapped[int | None] = mapped_column(Integer)
    wrapped_key: Mapped[bytes | None] = mapped_column(LargeBinary)
    sealed_text: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class SurfaceCursor(Base):
    """A surface's resumable ingress position (module docstring); ``value`` is opaque text."""

    __tablename__ = "surface_cursors"

    surface: Mapped[str] = mapped_column(String(32), primary_key=True)
    workspace: Mapped[str] = mapped_column(String(100), primary_key=True)
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    value: Mapped[str] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
