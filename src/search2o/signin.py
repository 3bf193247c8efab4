"""Browser sign-in: server-side sessions, one-time sign-in links and OIDC requests in flight.

A session is a random cookie value (32 bytes, ``secrets.token_urlsafe``) of which only the
SHA-256 is stored (:mod:`search2o.storage.signin_models`). It ends at ``web.session_hours``
after sign-in, ``web.idle_minutes`` after its last use, at sign-out, and when its user is
deleted (the row goes with the user). It names a user, never their rights: every request
builds the principal from the user's current row, so a demoted admin loses admin routes on
their next request (OWASP Session Management Cheat Sheet).

A sign-in link (``search2o users login-link``) and the ``state`` of an OpenID Connect
authorization request are *grants*: random values stored as their SHA-256, with a short life,
used at most once (the use is a conditional ``UPDATE``, so two concurrent uses cannot both
succeed).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, delete, func, select, update
from sqlalchemy.orm import Session

from search2o.accounts import Principal, get_user
from search2o.config import WebSettings
from search2o.errors import AuthenticationError, InputError, NotFoundError
from search2o.storage.models import User, utcnow
from search2o.storage.signin_models import SigninGrant, WebSession

__all__ = [
    "COOKIE_NAME",
    "LINK_API_PATH",
    "LINK_PATH",
    "MAX_LINK_MINUTES",
    "MAX_PENDING_OIDC",
    "OIDC_REQUEST_MINUTES",
    "IssuedLink",
    "OidcRequest",
    "begin_oidc",
    "end_session",
    "issue_login_link",
    "peek_login_link",
    "purge_ended",
    "redeem_login_link",
    "resolve_session",
    "start_session",
    "take_oidc",
]

COOKIE_NAME = "s2o_session"
"""The session cookie's name."""

LINK_PATH = "/signin/link#"
"""Where a sign-in link points: the app's confirmation page, then the link's secret value.

The value is in the fragment, which a browser never sends: it reaches no server log, proxy or
``Referer``. Opening the page uses nothing up (a mail scanner or link preview that fetches it
gets the app's HTML); the user sees whom the link signs in and presses "Sign in", which posts
the value (``POST /v1/auth/link/{value}``)."""

LINK_API_PATH = "/v1/auth/link/"
"""The API path of a sign-in link, then its value: shown (``GET``) and used (``POST``) by the
app's confirmation page. Logged as its template, since the path holds the secret."""

MAX_LINK_MINUTES = 1440
"""The longest life of a sign-in link: one day."""

OIDC_REQUEST_MINUTES = 10
"""How long an OIDC authorization request may take at the identity provider."""

MAX_PENDING_OIDC = 10_000
"""Most OIDC requests in flight at once: anyone may start one, so their rows are bounded."""

_TOUCH_EVERY = timedelta(seconds=60)
"""``last_seen_at`` is written at most once a minute per session (not on every request)."""

_EXPIRED = "session expired or signed out: sign in again"


@dataclass(frozen=True)
class IssuedLink:
    """A sign-in link's secret value (shown once) and its end."""

    value: str
    email: str
    expires_at: datetime


@dataclass(frozen=True)
class OidcRequest:
    """An authorization request in flight: ``state``, ``nonce`` and the PKCE verifier."""

    state: str
    nonce: str
    code_verifier: str


def _hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def start_session(session: Session, user: User, method: str, settings: WebSettings) -> str:
    """Sign ``user`` in; return the cookie value (stored only as its SHA-256).

    Args:
        session: the caller's transaction.
        user: who signs in.
        method: how (``link`` or ``oidc``), kept for the audit of sessions.
        settings: the ``web`` settings (absolute life).

    """
    now = utcnow()
    # The user's ended sessions are of no use any more; drop them as a new one starts.
    session.execute(
        delete(WebSession).where(WebSession.user_id == user.id, WebSession.expires_at < now)
    )
    value = secrets.token_urlsafe(32)
    session.add(
        WebSession(
            user_id=user.id,
            token_hash=_hash(value),
            method=method,
            created_at=now,
            last_seen_at=now,
            expires_at=now + timedelta(hours=settings.session_hours),
        )
    )
    session.flush()
    return value


def resolve_session(session: Session, value: str, settings: WebSettings) -> Principal:
    """Return the principal of the session cookie ``value``, from the user's current row.

    Raises:
        AuthenticationError: no such session, or it expired (absolute or idle) or was ended.

    """
    row = session.scalar(select(WebSession).where(WebSession.token_hash == _hash(value)))
    now = utcnow()
    if (
        row is None
        or row.revoked_at is not None
        or row.expires_at <= now
        or row.last_seen_at + timedelta(minutes=settings.idle_minutes) <= now
    ):
        raise AuthenticationError(_EXPIRED)
    if now - row.last_seen_at >= _TOUCH_EVERY:
        row.last_seen_at = now
    return Principal.of(row.user)


def end_session(session: Session, value: str) -> bool:
    """End the session of cookie ``value`` (sign-out); return whether one was active."""
    result = session.execute(
        update(WebSession)
        .where(WebSession.token_hash == _hash(value), WebSession.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    return bool(getattr(result, "rowcount", 0))


def issue_login_link(session: Session, email: str, minutes: int) -> IssuedLink:
    """Mint a one-time sign-in value for the user ``email``, valid ``minutes``.

    Raises:
        InputError: ``minutes`` is not 1 to :data:`MAX_LINK_MINUTES`; ``email`` is malformed
            or names no user.

    """
    if not 1 <= minutes <= MAX_LINK_MINUTES:
        raise InputError("minutes", f"must be 1 to {MAX_LINK_MINUTES}, got {minutes}")
    try:
        user = get_user(session, email)
    except NotFoundError as exc:
        raise InputError("email", exc.message) from exc
    value = secrets.token_urlsafe(32)
    expires_at = utcnow() + timedelta(minutes=minutes)
    session.add(
        SigninGrant(kind="link", value_hash=_hash(value), user_id=user.id, expires_at=expires_at)
    )
    session.flush()
    return IssuedLink(value, user.email, expires_at)


def _use(session: Session, kind: str, value: str) -> SigninGrant:
    """Mark the unused, unexpired grant ``value`` of ``kind`` used; return it.

    Raises:
        AuthenticationError: unknown, used or expired.

    """
    now = utcnow()
    digest = _hash(value)
    result = session.execute(
        update(SigninGrant)
        .where(
            SigninGrant.value_hash == digest,
            SigninGrant.kind == kind,
            SigninGrant.used_at.is_(None),
            SigninGrant.expires_at > now,
        )
        .values(used_at=now)
    )
    if not getattr(result, "rowcount", 0):
        what = "sign-in link" if kind == "link" else "sign-in request (state)"
        raise AuthenticationError(f"{what} is unknown, used or expired: sign in again")
    return session.scalars(
        select(SigninGrant)
        .where(SigninGrant.value_hash == digest)
        .execution_options(populate_existing=True)
    ).one()


def peek_login_link(session: Session, value: str) -> tuple[str, datetime]:
    """Return ``(email, expires_at)`` of the usable sign-in link ``value``, using nothing up.

    Raises:
        AuthenticationError: unknown, used, expired, or its user is gone (one message for all).

    """
    grant = session.scalars(
        select(SigninGrant).where(
            SigninGrant.value_hash == _hash(value),
            SigninGrant.kind == "link",
            SigninGrant.used_at.is_(None),
            SigninGrant.expires_at > utcnow(),
        )
    ).one_or_none()
    user = session.get(User, grant.user_id) if grant and grant.user_id is not None else None
    if grant is None or user is None:
        raise AuthenticationError("sign-in link is unknown, used or expired: sign in again")
    return user.email, grant.expires_at


def redeem_login_link(session: Session, value: str) -> User:
    """Use the sign-in link ``value``; return its user.

    Raises:
        AuthenticationError: unknown, used, expired, or its user is gone.

    """
    grant = _use(session, "link", value)
    user = session.get(User, grant.user_id) if grant.user_id is not None else None
    if user is None:
        raise AuthenticationError("sign-in link is unknown, used or expired: sign in again")
    return user


def _grant_spent(now: datetime) -> ColumnElement[bool]:
    return (SigninGrant.expires_at <= now) | SigninGrant.used_at.is_not(None)


def purge_ended(session: Session, now: datetime | None = None) -> tuple[int, int]:
    """Delete ended sessions and spent grants; return ``(sessions, grants)`` deleted.

    Sessions past their absolute end or signed out, and sign-in links or OIDC requests used
    or expired. A session that ended by idling is refused from that moment
    (:func:`resolve_session`) and its row goes once its absolute end passes (at most
    ``web.session_hours`` later), so this needs no settings. Called by the periodic retention
    sweep (:func:`search2o.query.retention.sweep`), which runs once across processes.
    """
    instant = now or utcnow()
    sessions = session.execute(
        delete(WebSession).where(
            (WebSession.expires_at <= instant) | WebSession.revoked_at.is_not(None)
        )
    )
    grants = session.execute(delete(SigninGrant).where(_grant_spent(instant)))
    return (
        int(getattr(sessions, "rowcount", 0) or 0),
        int(getattr(grants, "rowcount", 0) or 0),
    )


def begin_oidc(session: Session) -> OidcRequest:
    """Store a new authorization request (``state``, ``nonce``, PKCE verifier); return it.

    The verifier is 64 URL-safe characters (RFC 7636 section 4.1: 43 to 128). Starting one
    needs no account, so expired or used grants are deleted first and at most
    :data:`MAX_PENDING_OIDC` may wait at once.

    Raises:
        AuthenticationError: that many are waiting already (try again in a few minutes).

    """
    now = utcnow()
    session.execute(delete(SigninGrant).where(_grant_spent(now)))
    pending = session.scalar(
        select(func.count()).select_from(SigninGrant).where(SigninGrant.kind == "oidc")
    )
    if int(pending or 0) >= MAX_PENDING_OIDC:
        raise AuthenticationError(
            "too many sign-ins are in progress at the identity provider: try again in a few minutes"
        )
    request = OidcRequest(
        secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48)
    )
    session.add(
        SigninGrant(
            kind="oidc",
            value_hash=_hash(request.state),
            nonce=request.nonce,
            code_verifier=request.code_verifier,
            expires_at=now + timedelta(minutes=OIDC_REQUEST_MINUTES),
        )
    )
    session.flush()
    return request


def take_oidc(session: Session, state: str) -> OidcRequest:
    """Use the authorization request of ``state`` (once); return it.

    Raises:
        AuthenticationError: unknown, used or expired ``state``.

    """
    grant = _use(session, "oidc", state)
    assert grant.nonce is not None and grant.code_verifier is not None
    return OidcRequest(state, grant.nonce, grant.code_verifier)
