"""Browser sign-in: sessions and one-time sign-in grants (migration 0015).

* ``web_sessions``: one row per signed-in browser. Only the SHA-256 of the random cookie value
  is stored (a dump cannot be replayed), with the absolute end (``expires_at``), the last use
  (for the idle end) and ``revoked_at`` (sign-out). Deleting the user deletes their sessions.
* ``signin_grants``: a one-time value waiting to be used, stored as its SHA-256: a sign-in link
  (``kind='link'``, for ``user_id``) or an OpenID Connect authorization request in flight
  (``kind='oidc'``: the ``state``, with its ``nonce`` and PKCE ``code_verifier``, RFC 7636).
  ``used_at`` makes it single use.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from search2o.storage.models import Base, User, UTCDateTime, utcnow

__all__ = ["SigninGrant", "WebSession"]


class WebSession(Base):
    """A browser's session: who it signs in, how, and until when."""

    __tablename__ = "web_sessions"
    __table_args__ = (Index("ix_web_sessions_expires_at", "expires_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    method: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    user: Mapped[User] = relationship()


class SigninGrant(Base):
    """A one-time sign-in value (link or OIDC ``state``), stored hashed, used at most once."""

    __tablename__ = "signin_grants"
    __table_args__ = (Index("ix_signin_grants_expires_at", "expires_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    value_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    nonce: Mapped[str | None] = mapped_column(String(128))
    code_verifier: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
