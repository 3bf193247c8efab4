"""A user's own API tokens: created, listed and revoked by the user themselves.

A client that cannot share the Web App's session (the browser extension, a script) signs in
with a *device token*: the user creates one (``POST /v1/me/tokens``), pastes it into the client
once, and revokes it when the device is lost or retired (``DELETE /v1/me/tokens/{id}``). The
token is an ordinary user token of :mod:`search2o.accounts` (shown once, stored as its
SHA-256), so every rule of tokens holds for it; one created on a server in local mode is
*local-only* like the token ``search2o serve`` prints, so it never authenticates in token mode.

Another user's token is answered exactly like a missing one (404). A user holds at most
:data:`MAX_ACTIVE_TOKENS` active tokens, so a client in a loop cannot fill the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from search2o.accounts import Principal, issue_token
from search2o.errors import ConflictError, NotFoundError
from search2o.storage.models import ApiToken, User, utcnow
from search2o.textrules import check_text

__all__ = [
    "MAX_ACTIVE_TOKENS",
    "OwnToken",
    "issue_own_token",
    "list_own_tokens",
    "revoke_own_token",
]

MAX_ACTIVE_TOKENS = 50


@dataclass(frozen=True)
class OwnToken:
    """One of the caller's tokens as they see it: never the secret, only its 12-char prefix."""

    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool
    local_only: bool

    @classmethod
    def of(cls, row: ApiToken) -> OwnToken:
        """Describe a stored token."""
        return cls(
            row.id,
            row.name,
            row.prefix,
            row.created_at,
            row.last_used_at,
            row.revoked_at is not None,
            row.local_only,
        )


def issue_own_token(
    session: Session, principal: Principal, name: str, *, local_only: bool
) -> tuple[OwnToken, str]:
    """Create a token for the caller; return it and its secret (shown once).

    Args:
        session: the caller's transaction.
        principal: the user, acting for themselves.
        name: what the user calls the device, 1..100 characters.
        local_only: the server runs in local mode (see the module docstring).

    Raises:
        InputError: ``name`` is empty, longer than 100 characters, or holds NUL, a lone
            surrogate or a terminal control character (field ``name``).
        ConflictError: the caller already holds :data:`MAX_ACTIVE_TOKENS` active tokens.
        NotFoundError: the caller's user was deleted meanwhile.

    """
    label = check_text(name, "name", max_chars=100)
    user = session.get(User, principal.user_id)
    if user is None:
        raise NotFoundError("your user no longer exists")
    active = session.scalar(
        select(func.count())
        .select_from(ApiToken)
        .where(ApiToken.user_id == user.id, ApiToken.revoked_at.is_(None))
    )
    if int(active or 0) >= MAX_ACTIVE_TOKENS:
        raise ConflictError(
            f"you hold {MAX_ACTIVE_TOKENS} active tokens, the most allowed: revoke one first "
            "(DELETE /v1/me/tokens/{id})"
        )
    secret = issue_token(session, user, label, local_only=local_only)
    # The row just flushed: the caller's newest with this prefix (prefixes are not unique).
    row = session.scalars(
        select(ApiToken)
        .where(ApiToken.user_id == user.id, ApiToken.prefix == secret[:12])
        .order_by(ApiToken.id.desc())
        .limit(1)
    ).one()
    return OwnToken.of(row), secret


def list_own_tokens(session: Session, principal: Principal) -> list[OwnToken]:
    """Return the caller's tokens, active and revoked, newest first."""
    rows = session.scalars(
        select(ApiToken)
        .where(ApiToken.user_id == principal.user_id)
        .order_by(ApiToken.created_at.desc(), ApiToken.id.desc())
    )
    return [OwnToken.of(row) for row in rows]


def revoke_own_token(session: Session, principal: Principal, token_id: int) -> OwnToken:
    """Revoke one of the caller's active tokens; requests carrying it then get 401.

    Raises:
        NotFoundError: no active token ``token_id`` of the caller (another user's is missing).

    """
    row = session.get(ApiToken, token_id)
    if row is None or row.user_id != principal.user_id or row.revoked_at is not None:
        raise NotFoundError(f"no active token {token_id} of yours; see GET /v1/me/tokens")
    row.revoked_at = utcnow()
    session.flush()
    return OwnToken.of(row)
