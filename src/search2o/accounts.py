"""Users and API tokens.

Tokens are 32 random bytes (``secrets.token_urlsafe``) prefixed ``s2o_``; only their SHA-256 is
stored, so a database dump cannot be replayed. A token is shown once, when it is issued. A
token printed by a local-mode ``search2o serve`` is *local-only*: it authenticates on a server
in ``auth_mode=local`` and never in ``auth_mode=token``, even on a database they share.

A *surface token* (:func:`issue_surface_token`) belongs to a surface (``slack``), not to a user:
it never is a principal itself. :func:`resolve_token` answers a :class:`SurfaceCaller` for it,
and the API lets it act only for a user linked on its surface or for that surface's
shared-channel principal, never with admin rights (:func:`search2o.surfaces.identity
.acting_principal`).

Emails, display names and token names are shown in terminals and pages: terminal control
characters (:func:`search2o.terminal.has_controls`) are refused in them.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from search2o.errors import AuthenticationError, ConflictError, InputError, NotFoundError
from search2o.storage import dialect
from search2o.storage.models import ApiToken, User, utcnow
from search2o.terminal import has_controls
from search2o.textrules import check_text
from search2o.wire.fields import EMAIL_PATTERN, GROUP_PATTERN
from search2o.wire.names import check_surface

__all__ = [
    "LOCAL_MODE_TOKEN_NAME",
    "PLANS",
    "Plan",
    "Principal",
    "SurfaceCaller",
    "TokenInfo",
    "authenticate",
    "check_plan",
    "create_user",
    "ensure_user",
    "get_user",
    "issue_surface_token",
    "issue_token",
    "list_tokens",
    "list_users",
    "local_mode_token",
    "normalize_email",
    "normalize_groups",
    "replace_token",
    "resolve_token",
    "revoke_named_tokens",
    "revoke_token",
]

TOKEN_PREFIX = "s2o_"
# Name and domain without spaces, C0/C1 controls or DEL: an email is printed in tables. The
# patterns are the API document's own, read the same by Python's ``re`` and ECMA-262.
_EMAIL = re.compile(EMAIL_PATTERN)
LOCAL_MODE_TOKEN_NAME = "serve"
_GROUP = re.compile(GROUP_PATTERN)
Plan = Literal["free", "paid"]
PLANS: tuple[str, ...] = get_args(Plan)
"""The plans a user may have (retention follows the plan, ``retention.days``)."""


@dataclass(frozen=True)
class Principal:
    """The caller of an operation: who they are and what they may read.

    Attributes:
        user_id: the ``users.id``.
        email: lower-cased email.
        groups: group names, e.g. ``("hr", "eng")``.
        is_admin: may manage users and every document.
        plan: ``free`` or ``paid``.
        surface: the surface whose service token acts for this principal (``slack``), or
            ``None`` for a user's own token or session.
        shared: a shared-channel principal: it reads only documents open to everyone.

    """

    user_id: int
    email: str
    groups: tuple[str, ...]
    is_admin: bool = False
    plan: str = "free"
    surface: str | None = None
    shared: bool = False

    @classmethod
    def of(cls, user: User) -> Principal:
        """Build the principal of a stored user."""
        return cls(user.id, user.email, tuple(user.groups), user.is_admin, user.plan)

    def access_keys(self) -> list[str]:
        """Return the access-list entries that grant this caller.

        Returns:
            ``["user:<email>", "group:<g>", ...]``, and ``"role:admin"`` for an admin (a
            synced source with no access rule of its own grants the admins:
            :mod:`search2o.knowledge.access`); ``[]`` for a shared-channel principal, so only
            documents whose access list is empty are readable (an answer in a channel is seen
            by everyone in it).
        """
        if self.shared:
            return []
        keys = [f"user:{self.email}", *(f"group:{g}" for g in self.groups)]
        return [*keys, "role:admin"] if self.is_admin else keys


@dataclass(frozen=True)
class SurfaceCaller:
    """A surface's service token acting for nobody (yet): it may link identities, nothing else.

    Attributes:
        surface: the surface the token is bound to, e.g. ``slack``.

    """

    surface: str


@dataclass(frozen=True)
class TokenInfo:
    """A token as listed to people: never the secret, only its prefix.

    ``email`` is ``""`` and ``surface`` set for a surface token.
    """

    id: int
    email: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked: bool
    local_only: bool = False
    surface: str | None = None


def normalize_email(email: str, field: str = "email") -> str:
    """Return ``email`` trimmed and lower-cased, at most 320 characters.

    Lower-casing is per character and keeps a character whose lower case is longer (only
    U+0130, "İ", whose lower case is two), so the result is as long as the trimmed input and
    every value of :data:`search2o.wire.fields.EMAIL_PATTERN` within 320 is accepted.

    Raises:
        InputError: it does not look like ``name@domain``, or is longer than 320 characters.

    """
    value = email.strip()
    if not _EMAIL.fullmatch(value) or len(value) > 320:
        raise InputError(field, f"{email!r} is not an email address (expected name@domain)")
    return "".join(low if len(low := c.lower()) == 1 else c for c in value)


def normalize_groups(groups: list[str] | tuple[str, ...], field: str = "group") -> list[str]:
    """Return distinct group names in order.

    Raises:
        InputError: a name is empty, too long, or has characters other than letters, digits,
            ``.``, ``_`` and ``-``.

    """
    out: list[str] = []
    for group in groups:
        name = group.strip()
        if not _GROUP.fullmatch(name):
            raise InputError(
                field, f"{group!r} is not a group name (letters, digits, '.', '_', '-'; max 100)"
            )
        if name not in out:
            out.append(name)
    return out


def check_plan(plan: str, field: str = "plan") -> str:
    """Return ``plan`` if it is one of :data:`PLANS`.

    Raises:
        InputError: any other value.

    """
    if plan not in PLANS:
        raise InputError(field, f"{plan!r} is not a plan ({' or '.join(PLANS)})")
    return plan


def create_user(
    session: Session,
    email: str,
    *,
    display_name: str = "",
    groups: list[str] | tuple[str, ...] = (),
    is_admin: bool = False,
    plan: str = "free",
) -> User:
    """Add a user.

    Raises:
        InputError: bad email, group, plan, or display name (longer than 200 characters, NUL,
            or a terminal control character).
        ConflictError: a user with this email exists.

    """
    address = normalize_email(email)
    check_plan(plan)
    _check_label(display_name, "name", 200)
    if session.scalar(select(User.id).where(User.email == address)) is not None:
        raise ConflictError(f"user {address} already exists")
    user = User(
        email=address,
        display_name=display_name or address.split("@")[0],
        groups=normalize_groups(groups),
        is_admin=is_admin,
        plan=plan,
    )
    session.add(user)
    try:
        session.flush()
    except IntegrityError as exc:  # a concurrent insert won the race
        raise ConflictError(f"user {address} already exists") from exc
    return user


def ensure_user(
    session: Session, email: str, *, is_admin: bool = False, plan: str = "free"
) -> User:
    """Return the user with ``email``, creating it when missing (the local single user).

    ``plan`` applies only when the user is created.

    Safe under concurrency: the insert is ``INSERT ... ON CONFLICT DO NOTHING`` (SQLite and
    PostgreSQL), so two first requests at once both get the one user.

    Raises:
        InputError: ``email`` is malformed.
    """
    address = normalize_email(email)
    user = session.scalar(select(User).where(User.email == address))
    if user is not None:
        return user
    values = {
        "email": address,
        "display_name": address.split("@")[0],
        "groups": [],
        "plan": plan,
        "is_admin": is_admin,
        "created_at": utcnow(),
    }
    statement = dialect.insert(session, User).values(**values)
    session.execute(statement.on_conflict_do_nothing(index_elements=["email"]))
    return session.scalars(
        select(User).where(User.email == address).execution_options(populate_existing=True)
    ).one()


def get_user(session: Session, email: str) -> User:
    """Return the user with ``email``.

    Raises:
        NotFoundError: no such user.

    """
    address = normalize_email(email)
    user = session.scalar(select(User).where(User.email == address))
    if user is None:
        raise NotFoundError(f"no user {address}; add one with `search2o users add {address}`")
    return user


def list_users(session: Session) -> list[User]:
    """Return every user, ordered by email."""
    return list(session.scalars(select(User).order_by(User.email)))


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _check_label(value: str, field: str, max_chars: int | None = None) -> None:
    """Refuse text people read in a table: too long, NUL or lone surrogates, or controls.

    Raises:
        InputError: names ``field`` and the rule broken.

    """
    check_text(value, field, max_chars=max_chars, strip=False, allow_empty=True)
    if has_controls(value):
        raise InputError(field, "must not contain control characters (ESC, BEL, C1 ...)")


def issue_token(session: Session, user: User, name: str = "", *, local_only: bool = False) -> str:
    """Create an API token for ``user`` and return its secret (shown once, stored hashed).

    ``name`` is cut to 100 characters. ``local_only`` tokens authenticate only in
    ``auth_mode=local`` (see :func:`authenticate`).

    Raises:
        InputError: ``name`` holds NUL, a lone surrogate or a terminal control character.

    """
    _check_label(name, "name")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(
        ApiToken(
            user_id=user.id,
            name=name[:100],
            prefix=secret[:12],
            token_hash=_hash(secret),
            local_only=local_only,
        )
    )
    session.flush()
    return secret


def issue_surface_token(session: Session, surface: str, name: str = "") -> str:
    """Create a service token bound to ``surface``; return its secret (shown once, stored hashed).

    The token belongs to no user: it acts only as a user linked on ``surface`` or as the
    surface's shared-channel principal, named per request (``X-Search2o-Act-As``), never with
    admin rights.

    Raises:
        InputError: ``surface`` is not a surface name; ``name`` holds NUL, a lone surrogate or
            a terminal control character.

    """
    check_surface(surface)
    _check_label(name, "name")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(
        ApiToken(
            user_id=None,
            surface=surface,
            name=(name or f"{surface} surface")[:100],
            prefix=secret[:12],
            token_hash=_hash(secret),
        )
    )
    session.flush()
    return secret


def revoke_named_tokens(session: Session, user: User, name: str) -> int:
    """Revoke ``user``'s active tokens called ``name``; return how many were revoked."""
    result = session.execute(
        update(ApiToken)
        .where(ApiToken.user_id == user.id, ApiToken.name == name, ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    return int(getattr(result, "rowcount", 0) or 0)


def replace_token(session: Session, user: User, name: str, *, local_only: bool = False) -> str:
    """Revoke ``user``'s active tokens called ``name`` and issue a new one; return its secret.

    ``search2o serve`` uses this (through :func:`local_mode_token`) to print a fresh token at
    each start without piling up old ones.
    """
    revoke_named_tokens(session, user, name)
    return issue_token(session, user, name, local_only=local_only)


def local_mode_token(session: Session, email: str) -> str:
    """Issue the local-only token a local-mode ``search2o serve`` prints; return its secret.

    The local user ``email`` (an admin, created when missing) gets one token named
    ``serve``; the previous one is revoked. It never authenticates in ``auth_mode=token``.

    Raises:
        InputError: ``email`` is malformed.

    """
    # Plan paid like Runtime.local_principal: the one user of a laptop install keeps everything.
    user = ensure_user(session, email, is_admin=True, plan="paid")
    return replace_token(session, user, LOCAL_MODE_TOKEN_NAME, local_only=True)


def list_tokens(session: Session) -> list[TokenInfo]:
    """Return every token with its owner, newest first."""
    rows = session.execute(
        select(ApiToken, User.email)
        .outerjoin(User, ApiToken.user_id == User.id)
        .order_by(ApiToken.created_at.desc(), ApiToken.id.desc())
    ).all()
    return [_info(t, email or "") for t, email in rows]


def _info(token: ApiToken, email: str) -> TokenInfo:
    return TokenInfo(
        token.id,
        email,
        token.name,
        token.prefix,
        token.created_at,
        token.last_used_at,
        token.revoked_at is not None,
        token.local_only,
        token.surface,
    )


def revoke_token(session: Session, token_or_prefix: str) -> TokenInfo:
    """Revoke a token given by its secret or its 12-character prefix (as listed).

    Raises:
        NotFoundError: no active token matches.
        InputError: the prefix matches several tokens.

    """
    value = token_or_prefix.strip()
    if len(value) > 12:
        matches = list(session.scalars(select(ApiToken).where(ApiToken.token_hash == _hash(value))))
    else:
        matches = list(session.scalars(select(ApiToken).where(ApiToken.prefix == value)))
    matches = [t for t in matches if t.revoked_at is None]
    if not matches:
        raise NotFoundError(f"no active token {value[:12]!r}; see `search2o tokens list`")
    if len(matches) > 1:
        raise InputError("token", f"prefix {value!r} matches {len(matches)} tokens; give the token")
    token = matches[0]
    token.revoked_at = utcnow()
    session.flush()
    return _info(token, token.user.email if token.user is not None else "")


def resolve_token(
    session: Session, secret: str, *, auth_mode: str = "token"
) -> Principal | SurfaceCaller:
    """Return who the active token ``secret`` stands for, and note its use.

    Args:
        session: the caller's transaction.
        secret: the bearer token as sent.
        auth_mode: the server's ``auth_mode``; a local-only token (printed by a local-mode
            ``serve``) is refused unless it is ``local``. The default is the strict one.

    Returns:
        the owner's :class:`Principal`, or a :class:`SurfaceCaller` for a surface token.

    Raises:
        AuthenticationError: unknown or revoked token, or a local-only token in token mode
            (answered like an unknown one).

    """
    token = session.scalar(select(ApiToken).where(ApiToken.token_hash == _hash(secret.strip())))
    if token is None or token.revoked_at is not None:
        raise AuthenticationError("invalid or revoked API token")
    if token.local_only and auth_mode != "local":
        raise AuthenticationError("invalid or revoked API token")
    token.last_used_at = utcnow()
    if token.user is None:
        assert token.surface is not None  # ck_api_tokens_owner: a user or a surface
        return SurfaceCaller(token.surface)
    return Principal.of(token.user)


def authenticate(session: Session, secret: str, *, auth_mode: str = "token") -> Principal:
    """Return the principal owning the active user token ``secret`` and note its use.

    Args:
        session: the caller's transaction.
        secret: the bearer token as sent.
        auth_mode: as :func:`resolve_token`.

    Raises:
        AuthenticationError: as :func:`resolve_token`; also a surface token, which is no
            user (it acts for one only through ``X-Search2o-Act-As``).

    """
    caller = resolve_token(session, secret, auth_mode=auth_mode)
    if isinstance(caller, SurfaceCaller):
        raise AuthenticationError(
            f"this is a service token of the {caller.surface} surface, not a user's: it acts "
            "only for a linked user, named by X-Search2o-Act-As"
        )
    return caller
