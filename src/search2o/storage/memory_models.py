"""The tables of long-term memory: per-user data keys and the memories themselves.

Kept apart from :mod:`search2o.storage.models` so the Memory issue owns its schema; both use the
same declarative ``Base``. Created by migration 0006.

* ``user_keys``: one random 256-bit data key per user, stored only wrapped by the KEK (like
  ``conversation_keys``); it seals what belongs to the user across conversations (memories).
* ``memories``: one row per (user, agent, label): the sealed text, its embedding and the times
  it was stored and last retrieved. Agent names and labels come from agent definitions and are
  kept in plain text (they key the row); the text is sealed.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
from sqlalchemy import ForeignKey, Index, Integer, LargeBinary, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from search2o.storage.models import Base, EmbeddingVector, UTCDateTime, utcnow

__all__ = ["Memory", "UserKey"]


class UserKey(Base):
    """A user's data key, wrapped by version ``kek_version`` of the KEK ``kek_id``."""

    __tablename__ = "user_keys"
    __table_args__ = (Index("ix_user_keys_kek", "kek_id", "kek_version"),)

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    kek_id: Mapped[str] = mapped_column(String(200))
    kek_version: Mapped[int] = mapped_column(Integer)
    wrapped: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Memory(Base):
    """One memory of a user, keyed by the storing agent's name and a label.

    ``sealed`` holds ``{"agent", "label", "text"}`` sealed with the user's data key (kind
    ``memory``, scope ``user:<id>``), so a blob moved to another row does not open.
    ``embedding`` is the vector of :func:`search2o.memory.ranking.embedding_text` made by
    ``model_id``; ``terms`` are the keyed hashes of that text's terms
    (:mod:`search2o.memory.lexical`), ``None`` for rows stored before revision 0007 (they are
    re-embedded and hashed when a search meets them).
    ``last_retrieved_at`` is ``None`` until an agent's query returned the memory.
    """

    __tablename__ = "memories"
    __table_args__ = (
        UniqueConstraint("user_id", "agent", "label", name="uq_memories_user_agent_label"),
        Index("ix_memories_user_id", "user_id"),
        Index("ix_memories_agent", "agent"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    agent: Mapped[str] = mapped_column(String(100))
    label: Mapped[str] = mapped_column(String(64))
    sealed: Mapped[bytes] = mapped_column(LargeBinary)
    model_id: Mapped[str] = mapped_column(String(200))
    embedding: Mapped[np.ndarray] = mapped_column(EmbeddingVector)
    terms: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_retrieved_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
