"""The table of the Slack surface (created by migration 0015): one delivery per question.

``slack_deliveries`` holds one row per user message the surface took (unique on Slack's
``team, channel, ts`` of that message, and on the ``event_id`` that first brought it), so a
retried or doubled event finds its row and is ignored. ``state`` moves ``pending →
answering → posted | failed``; ``reply_ts`` is the ``ts`` of the answer once posted, so a job
that runs again after a crash edits that message instead of posting a second one.

The question's text is stored sealed (AES-256-GCM under a data key of its own, wrapped by the
KEK: the envelope of :mod:`search2o.crypto.envelope`) and dropped once the answer is final; the
job's payload holds only the delivery's id.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from search2o.storage.models import Base, UTCDateTime, utcnow

__all__ = ["SlackDelivery"]


class SlackDelivery(Base):
    """One Slack question and the state of its answer (see the module docstring)."""

    __tablename__ = "slack_deliveries"
    __table_args__ = (
        UniqueConstraint("team", "channel", "message_ts", name="uq_slack_deliveries_message"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    event_id: Mapped[str] = mapped_column(String(64), unique=True)
    team: Mapped[str] = mapped_column(String(100))
    channel: Mapped[str] = mapped_column(String(200))
    channel_type: Mapped[str] = mapped_column(String(16))
    message_ts: Mapped[str] = mapped_column(String(32))
    thread_ts: Mapped[str] = mapped_column(String(32))
    user: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(16), default="pending")
    reply_ts: Mapped[str | None] = mapped_column(String(32))
    answer_message_id: Mapped[str | None] = mapped_column(String(64))
    act_as: Mapped[str | None] = mapped_column(String(320))
    kek_id: Mapped[str | None] = mapped_column(String(200))
    kek_version: Mapped[int | None] = mapped_column(Integer)
    wrapped_key: Mapped[bytes | None] = mapped_column(LargeBinary)
    sealed_text: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
