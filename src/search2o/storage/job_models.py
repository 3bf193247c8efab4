"""The job ledger: one row per background job (created by migration 0010).

Kept apart from :mod:`search2o.storage.models` so the job queue owns its schema; it uses the
same declarative ``Base``. The transport (Huey) only carries job ids; this table decides what
runs, so delivery is at-least-once whatever the transport loses (docs/jobs.md).

* ``jobs``: the job's ``kind`` (a registered handler), an optional unique ``dedupe_key`` (a
  second enqueue with the same key is a no-op), its ``state`` (``queued``, ``running``,
  ``done``, ``failed``), ``attempts`` so far out of ``max_attempts``, ``run_after`` (the
  earliest start, pushed back by the retry backoff), the lease of the worker running it
  (``lease_owner``, ``lease_expires_at``), ``progress`` (``{"done", "total", "message"}``),
  ``result`` (bounded JSON) or the last ``error`` (bounded text, no secrets) and the owner.
  ``payload`` is **plain JSON**: it holds ids and names only, never user content (document
  text, messages), which lives sealed in its own table and is referred to by id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from search2o.storage.models import Base, UTCDateTime, utcnow

__all__ = ["Job"]


class Job(Base):
    """One background job, from enqueue to ``done`` or ``failed``.

    ``id`` is 32 hex digits (a random UUID); ``dedupe_key`` is unique where set (``NULL``
    never collides on either backend). ``lease_expires_at`` is set only while ``running``.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("dedupe_key", name="uq_jobs_dedupe_key"),
        Index("ix_jobs_state_run_after", "state", "run_after"),
        Index("ix_jobs_state_lease", "state", "lease_expires_at"),
        Index("ix_jobs_owner_created", "owner_id", "created_at"),
        Index("ix_jobs_kind_created", "kind", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(100))
    dedupe_key: Mapped[str | None] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(16), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer)
    run_after: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    result: Mapped[Any | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
