"""The table of stored agent definitions (created by migration 0008).

Kept apart from :mod:`search2o.storage.models` so the Agent Engine owns its schema; it uses the
same declarative ``Base``.

* ``agents``: one row per agent name: its description (for listings) and the definition
  document as the admin gave it (JSON text, key order kept). Definitions are admin
  configuration, not user content, so they are stored in **plain text**, unlike conversations
  and memories. ``updated_by`` is the admin who last stored it (``NULL`` once that user is
  deleted).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from search2o.storage.models import Base, UTCDateTime, utcnow

__all__ = ["Agent"]


class Agent(Base):
    """One stored agent definition, keyed by the agent's name.

    ``definition`` is the document serialised with ``json.dumps(..., ensure_ascii=False)`` in
    the order it was given; ``created_at`` is when the name was first stored, ``updated_at``
    when it was last replaced.
    """

    __tablename__ = "agents"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    description: Mapped[str] = mapped_column(Text)
    definition: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_by: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
