"""The tables of surfaces (created by migration 0012).

Kept apart from :mod:`search2o.storage.models` so the surfaces own their schema; they use the
same declarative ``Base``.

* ``surface_identities``: an external account (surface, workspace, external user id) linked to
  a user, by a platform-verified email or a one-time link code.
* ``link_codes``: one-time codes a user mints to link an external account; only the SHA-256 of
  a code is stored, like API tokens.
* ``surface_shared_principals``: the user row each (surface, workspace) shared-channel principal
  owns its conversations as.
* ``surface_threads``: which conversation a thread of a surface continues, and whose it is.

The surface service tokens are rows of ``api_tokens`` with ``surface`` set and no user
(:class:`search2o.storage.models.ApiToken`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from search2o.storage.models import Base, UTCDateTime, utcnow

__all__ = ["LinkCode", "SharedPrincipal", "SurfaceIdentity", "SurfaceThread"]


class SurfaceIdentity(Base):
    """An external account linked to a user; ``linked_by`` is ``email`` or ``code``."""

    __tablename__ = "surface_identities"
    __table_args__ = (
        UniqueConstraint(
            "surface", "workspace", "external_user_id", name="uq_surface_identities_account"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    surface: Mapped[str] = mapped_column(String(32))
    workspace: Mapped[str] = mapped_column(String(100))
    external_user_id: Mapped[str] = mapped_column(String(200))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    linked_by: Mapped[str] = mapped_column(String(8))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LinkCode(Base):
    """A one-time link code, stored as the SHA-256 (hex) of its canonical form.

    ``surface`` ``None`` means the code links on any surface; ``used_at`` is set by the one
    redemption that succeeds.
    """

    __tablename__ = "link_codes"

    code_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    surface: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class SharedPrincipal(Base):
    """The user row a (surface, workspace) shared-channel principal owns conversations as."""

    __tablename__ = "surface_shared_principals"

    surface: Mapped[str] = mapped_column(String(32), primary_key=True)
    workspace: Mapped[str] = mapped_column(String(100), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class SurfaceThread(Base):
    """A thread of a surface and the conversation it continues, owned by ``user_id``."""

    __tablename__ = "surface_threads"
    __table_args__ = (
        UniqueConstraint(
            "surface", "workspace", "channel", "thread", name="uq_surface_threads_thread"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    surface: Mapped[str] = mapped_column(String(32))
    workspace: Mapped[str] = mapped_column(String(100))
    channel: Mapped[str] = mapped_column(String(200))
    thread: Mapped[str] = mapped_column(String(200))
    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
