"""The tables of answers in flight (runs) and their recorded events (created by migration 0010).

Kept apart from :mod:`search2o.storage.models` so the chat service owns its schema; it uses the
same declarative ``Base``.

* ``runs``: one row per answer (a chat turn or an agent run) while it is written and for a grace
  period after: its owner, its conversation (linked when the question is stored), its status, the
  last event number, a heartbeat of the process writing it, and a stop request another process
  may set.
* ``run_events``: the run's events in batches, each sealed under the conversation's data key
  (kind ``run_events``): they hold conversation content, like messages. Removed with their run
  once the answer is stored and the grace period has passed.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from search2o.storage.models import Base, UTCDateTime, new_id, utcnow

__all__ = ["Run", "RunEvents"]


class Run(Base):
    """One answer in flight or recently finished.

    ``status``: ``running``, then ``complete``, ``failed`` or ``interrupted`` (stopped, or its
    process died: see :mod:`search2o.chat.runs`). ``last_seq`` is the number of the last event
    recorded; ``heartbeat_at`` is renewed by the writing process while it runs.
    """

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    conversation_id: Mapped[str | None] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    agent: Mapped[str | None] = mapped_column(String(100))
    status: Mapped[str] = mapped_column(String(16), default="running", index=True)
    stop_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class RunEvents(Base):
    """A batch of one run's events, numbers ``first_seq..last_seq``, sealed as one record."""

    __tablename__ = "run_events"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    first_seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_seq: Mapped[int] = mapped_column(Integer)
    sealed: Mapped[bytes] = mapped_column(LargeBinary)
