"""Surface identities: who an external account is, and who a surface token may act as.

**Linking.** An external account — (surface, workspace, external user id), e.g. (``slack``,
``T0123``, ``U0456``) — is linked to a user in one of two ways:

* :func:`link_by_email`: the surface read a *verified* email from its platform (Slack
  ``users.info`` with the ``users:read.email`` scope; Mattermost's user object) and the user
  with that email is linked. The trust assumption: the platform verified the address and the
  surface's token is the only caller of this endpoint. No user with the email: nothing is
  linked (the surface shows a link hint).
* :func:`link`: the user types a one-time **link code** they minted in the Web App
  (``POST /v1/surfaces/link-codes``) or got from ``search2o users link-code EMAIL``.

A code is 10 random characters of Crockford's Base32 alphabet (``0-9 A-Z`` without ``I L O
U``: 50 bits, from :mod:`secrets`) and one check character computed with the Luhn mod N
algorithm (N = 32; Luhn 1960, as generalised in "Luhn mod N algorithm"), shown as
``XXXX-XXXX-XXX``. Typing is forgiving the way Crockford's decoding is: case, hyphens and
spaces are ignored, ``O`` reads as ``0`` and ``I``/``L`` as ``1``; a typo in one character is
caught by the check before any lookup. Only the SHA-256 of the canonical code is stored; a
code expires after 15 minutes by default, and minting one drops the user's earlier unused
codes, so at most one code per user is ever live: with 2^50 codes, guessing is hopeless
within an expiry. Redeeming is one conditional ``UPDATE`` (unused, unexpired, for this
surface or any): the same statement and the same error for a code that is unknown, used,
expired or meant for another surface. The lookup compares SHA-256 digests, as for API
tokens: its timing can only tell how much of a digest matched, which leads to no code.

**Acting.** A surface service token (:func:`search2o.accounts.issue_surface_token`) names the
principal of each request in the ``X-Search2o-Act-As`` header (:func:`acting_principal`):

* ``user:<workspace>:<external user id>``: the user linked to that account *on the token's
  surface*, without admin rights whatever the user's own flag;
* ``shared:<workspace>``: the **shared-channel principal** of the token's surface and that
  workspace (:func:`shared_principal`): it reads only documents whose access list is empty
  (an answer in a channel is seen by everyone in it) and owns conversations of its own, as a
  user row created on first use (email ``shared-<random>@<surface>.surfaces.invalid``; the
  ``.invalid`` top-level domain is reserved and never delivers, RFC 2606 section 2; plan
  ``free``; no groups; never admin). Such a user can never be linked to an account.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, or_, select, update
from sqlalchemy.orm import Session

from search2o.accounts import Principal, normalize_email
from search2o.errors import InputError, NotFoundError, PermissionDeniedError
from search2o.storage import dialect
from search2o.storage.models import User, utcnow
from search2o.storage.surface_models import LinkCode, SharedPrincipal, SurfaceIdentity
from search2o.wire.names import (
    ACT_AS_HEADER,
    DEFAULT_CODE_MINUTES,
    MAX_CODE_MINUTES,
    check_external_id,
    check_surface,
    check_workspace,
)

__all__ = [
    "CODE_ALPHABET",
    "Identity",
    "IssuedCode",
    "acting_principal",
    "canonical_code",
    "find_identity",
    "issue_link_code",
    "link",
    "link_by_email",
    "list_identities",
    "new_code",
    "parse_act_as",
    "shared_principal",
    "unlink",
]

CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
"""Crockford's Base32 symbols (Douglas Crockford, "Base 32", crockford.com/base32.html)."""

_CODE_DATA = 10  # 50 bits of randomness
_CODE_GROUPS = (4, 4, 3)
_CROCKFORD_ALIASES = str.maketrans({"O": "0", "I": "1", "L": "1"})
_BAD_CODE = (
    "is unknown, used or expired, or meant for another surface; get a new one in the Web App "
    "or with `search2o users link-code EMAIL`"
)
_SHARED_DOMAIN = "surfaces.invalid"


@dataclass(frozen=True)
class Identity:
    """An external account linked to a user.

    Attributes:
        surface, workspace, external_user_id: the account, e.g. ``slack``, ``T0123``, ``U0456``.
        user_id, email: the user it is linked to.
        linked_by: ``email`` or ``code``.
        created_at: when it was linked (aware UTC).

    """

    surface: str
    workspace: str
    external_user_id: str
    user_id: int
    email: str
    linked_by: str
    created_at: datetime


@dataclass(frozen=True)
class IssuedCode:
    """A link code just minted: the only time its text exists (it is stored hashed).

    Attributes:
        code: ``XXXX-XXXX-XXX``.
        email: whose code it is.
        surface: the surface it links on, or ``None`` for any.
        expires_at: aware UTC.

    """

    code: str
    email: str
    surface: str | None
    expires_at: datetime


# --- link codes ------------------------------------------------------------------------------


def _check_character(data: str) -> str:
    """Return the Luhn mod 32 check character of ``data`` (symbols of :data:`CODE_ALPHABET`).

    From the rightmost symbol leftwards every other value is doubled and its base-32 digits
    summed; the check symbol brings the total to a multiple of 32. It catches every single
    wrong symbol and most swaps of neighbours ("Luhn mod N algorithm").
    """
    n = len(CODE_ALPHABET)
    total, factor = 0, 2
    for symbol in reversed(data):
        addend = factor * CODE_ALPHABET.index(symbol)
        total += addend // n + addend % n
        factor = 1 if factor == 2 else 2
    return CODE_ALPHABET[(n - total % n) % n]


def new_code() -> str:
    """Return a fresh link code, ``XXXX-XXXX-XXX`` (50 random bits and a check character)."""
    data = "".join(secrets.choice(CODE_ALPHABET) for _ in range(_CODE_DATA))
    canonical = data + _check_character(data)
    parts, start = [], 0
    for size in _CODE_GROUPS:
        parts.append(canonical[start : start + size])
        start += size
    return "-".join(parts)


def canonical_code(value: object, field: str = "code") -> str:
    """Return the canonical form of a typed code (11 symbols, upper case, no hyphens).

    Raises:
        InputError: not a string of 11 Base32 symbols, or its check character does not match
            (a typo; checked before any lookup).

    """
    if not isinstance(value, str) or len(value) > 64:
        raise InputError(field, "is not a link code (XXXX-XXXX-XXX)")
    text = "".join(value.split()).replace("-", "").upper().translate(_CROCKFORD_ALIASES)
    if len(text) != _CODE_DATA + 1 or any(c not in CODE_ALPHABET for c in text):
        raise InputError(
            field,
            f"is not a link code: {_CODE_DATA + 1} characters of 0-9 and A-Z without I, L, O "
            "and U, shown as XXXX-XXXX-XXX",
        )
    if _check_character(text[:-1]) != text[-1]:
        raise InputError(field, "has a typo (its last character does not check); type it again")
    return text


def _digest(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()


def issue_link_code(
    session: Session,
    user_id: int,
    *,
    surface: str | None = None,
    minutes: int = DEFAULT_CODE_MINUTES,
) -> IssuedCode:
    """Mint a one-time link code for the user ``user_id``; only its SHA-256 is stored.

    The user's earlier unused codes are dropped (one live code per user), and so are expired
    codes of everyone.

    Args:
        surface: the only surface the code links on; ``None`` for any.
        minutes: how long it stays valid, 1..1440.

    Raises:
        InputError: a bad ``surface`` or ``minutes``, or the user is a shared-channel
            principal (``email``).
        NotFoundError: no such user.

    """
    if surface is not None:
        check_surface(surface)
    if isinstance(minutes, bool) or not isinstance(minutes, int):
        raise InputError("minutes", "must be a whole number of minutes")
    if not 1 <= minutes <= MAX_CODE_MINUTES:
        raise InputError("minutes", f"must be 1..{MAX_CODE_MINUTES}, got {minutes}")
    user = session.get(User, user_id)
    if user is None:
        raise NotFoundError(f"no user {user_id}")
    if _is_shared(session, user.id):
        raise InputError("email", "is a shared-channel principal's; it links no account")
    now = utcnow()
    session.execute(
        delete(LinkCode)
        .where(
            or_(
                LinkCode.expires_at <= now,
                and_(LinkCode.user_id == user.id, LinkCode.used_at.is_(None)),
            )
        )
        .execution_options(synchronize_session=False)
    )
    code = new_code()
    expires = now + timedelta(minutes=minutes)
    session.add(
        LinkCode(
            code_hash=_digest(canonical_code(code)),
            user_id=user.id,
            surface=surface,
            created_at=now,
            expires_at=expires,
        )
    )
    session.flush()
    return IssuedCode(code, user.email, surface, expires)


# --- identities ------------------------------------------------------------------------------


def _account(surface: str, workspace: str, external_user_id: str) -> tuple[str, str, str]:
    return (
        check_surface(surface),
        check_workspace(workspace),
        check_external_id(external_user_id, "external_user_id"),
    )


def _is_shared(session: Session, user_id: int) -> bool:
    shared = select(SharedPrincipal.user_id).where(SharedPrincipal.user_id == user_id)
    return session.scalar(shared) is not None


def _identity(row: SurfaceIdentity, email: str) -> Identity:
    return Identity(
        row.surface,
        row.workspace,
        row.external_user_id,
        row.user_id,
        email,
        row.linked_by,
        row.created_at,
    )


def find_identity(
    session: Session, surface: str, workspace: str, external_user_id: str
) -> Identity | None:
    """Return the link of an external account, or ``None`` when it is not linked.

    Raises:
        InputError: a name breaks :mod:`search2o.wire.names`.

    """
    key = _account(surface, workspace, external_user_id)
    found = session.execute(
        select(SurfaceIdentity, User.email)
        .join(User, SurfaceIdentity.user_id == User.id)
        .where(
            SurfaceIdentity.surface == key[0],
            SurfaceIdentity.workspace == key[1],
            SurfaceIdentity.external_user_id == key[2],
        )
        .execution_options(populate_existing=True)
    ).first()
    return None if found is None else _identity(found[0], found[1])


def _store(
    session: Session, key: tuple[str, str, str], user_id: int, linked_by: str, *, overwrite: bool
) -> Identity:
    """Insert the link of ``key`` (or, with ``overwrite``, replace an existing one)."""
    values = {
        "surface": key[0],
        "workspace": key[1],
        "external_user_id": key[2],
        "user_id": user_id,
        "linked_by": linked_by,
        "created_at": utcnow(),
    }
    insert = dialect.insert(session, SurfaceIdentity).values(**values)
    columns = ["surface", "workspace", "external_user_id"]
    if overwrite:
        statement = insert.on_conflict_do_update(
            index_elements=columns,
            set_={k: values[k] for k in ("user_id", "linked_by", "created_at")},
        )
    else:
        statement = insert.on_conflict_do_nothing(index_elements=columns)
    session.execute(statement)
    found = find_identity(session, *key)
    assert found is not None  # just written, in this transaction
    return found


def link(
    session: Session, surface: str, workspace: str, external_user_id: str, code: str
) -> Identity:
    """Link an external account to the user whose one-time ``code`` it is.

    The code is used up. An account already linked (to anyone) is linked anew: typing a code
    is the user's explicit choice, so it also corrects a wrong link.

    Raises:
        InputError: a bad name; ``code`` is malformed or has a typo; ``code`` is unknown,
            used, expired or for another surface (one message for all four).

    """
    key = _account(surface, workspace, external_user_id)
    digest = _digest(canonical_code(code))
    now = utcnow()
    user_id = session.execute(
        update(LinkCode)
        .where(
            LinkCode.code_hash == digest,
            LinkCode.used_at.is_(None),
            LinkCode.expires_at > now,
            or_(LinkCode.surface.is_(None), LinkCode.surface == key[0]),
        )
        .values(used_at=now)
        .returning(LinkCode.user_id)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    if user_id is None:
        raise InputError("code", _BAD_CODE)
    return _store(session, key, user_id, "code", overwrite=True)


def link_by_email(
    session: Session, surface: str, workspace: str, external_user_id: str, email: str
) -> Identity | None:
    """Link an external account to the user with ``email``, which its platform verified.

    An account that is linked already keeps its link (which is returned). Shared-channel
    principals are never linked.

    Returns:
        the link, or ``None`` when no user has this email (nothing changed).

    Raises:
        InputError: a bad name or email.

    """
    key = _account(surface, workspace, external_user_id)
    address = normalize_email(email)
    user_id = session.scalar(select(User.id).where(User.email == address))
    if user_id is None or _is_shared(session, user_id):
        return None
    return _store(session, key, user_id, "email", overwrite=False)


def unlink(session: Session, surface: str, workspace: str, external_user_id: str) -> Identity:
    """Remove the link of an external account; return what it was.

    Raises:
        InputError: a bad name.
        NotFoundError: the account is not linked.

    """
    found = find_identity(session, surface, workspace, external_user_id)
    if found is None:
        raise NotFoundError(
            f"{surface} account {workspace}:{external_user_id} is not linked to anyone"
        )
    session.execute(
        delete(SurfaceIdentity)
        .where(
            SurfaceIdentity.surface == found.surface,
            SurfaceIdentity.workspace == found.workspace,
            SurfaceIdentity.external_user_id == found.external_user_id,
        )
        .execution_options(synchronize_session=False)
    )
    return found


def list_identities(session: Session, surface: str | None = None) -> list[Identity]:
    """Return every link (of ``surface`` only, when given), by surface, workspace and id.

    Raises:
        InputError: a bad ``surface``.

    """
    statement = select(SurfaceIdentity, User.email).join(User, SurfaceIdentity.user_id == User.id)
    if surface is not None:
        statement = statement.where(SurfaceIdentity.surface == check_surface(surface))
    statement = statement.order_by(
        SurfaceIdentity.surface, SurfaceIdentity.workspace, SurfaceIdentity.external_user_id
    )
    return [_identity(row, email) for row, email in session.execute(statement)]


# --- acting ----------------------------------------------------------------------------------


def shared_principal(session: Session, surface: str, workspace: str) -> Principal:
    """Return the shared-channel principal of ``surface`` and ``workspace``, created on first use.

    Two first requests at once get the same one: the mapping row is inserted with ``ON
    CONFLICT DO NOTHING`` and the user row of the loser is removed again.

    Raises:
        InputError: a bad name.

    """
    surface, workspace = check_surface(surface), check_workspace(workspace)
    user_id = session.scalar(
        select(SharedPrincipal.user_id).where(
            SharedPrincipal.surface == surface, SharedPrincipal.workspace == workspace
        )
    )
    if user_id is None:
        # A random address: nobody can create its user before us to own the channel's
        # conversations.
        candidate = User(
            email=f"shared-{secrets.token_hex(8)}@{surface}.{_SHARED_DOMAIN}",
            display_name=f"{surface} {workspace} shared channels"[:200],
            groups=[],
            plan="free",
            is_admin=False,
        )
        session.add(candidate)
        session.flush()
        session.execute(
            dialect.insert(session, SharedPrincipal)
            .values(surface=surface, workspace=workspace, user_id=candidate.id, created_at=utcnow())
            .on_conflict_do_nothing(index_elements=["surface", "workspace"])
        )
        user_id = session.scalar(
            select(SharedPrincipal.user_id).where(
                SharedPrincipal.surface == surface, SharedPrincipal.workspace == workspace
            )
        )
        if user_id != candidate.id:
            session.delete(candidate)  # another request created it first
            session.flush()
    user = session.get(User, user_id)
    assert user is not None  # the mapping row cascades with its user
    return Principal(user.id, user.email, (), False, user.plan, surface=surface, shared=True)


def parse_act_as(value: str) -> tuple[str, str, str | None]:
    """Split an ``X-Search2o-Act-As`` value into (kind, workspace, external user id).

    Returns:
        ``("user", workspace, external_user_id)`` or ``("shared", workspace, None)``.

    Raises:
        InputError: neither ``user:<workspace>:<external user id>`` nor ``shared:<workspace>``,
            or a name breaks :mod:`search2o.wire.names` (field ``X-Search2o-Act-As``).

    """
    kind, _, rest = value.strip().partition(":")
    if kind == "shared":
        return "shared", check_workspace(rest, ACT_AS_HEADER), None
    if kind == "user":
        workspace, _, external = rest.partition(":")
        return (
            "user",
            check_workspace(workspace, ACT_AS_HEADER),
            check_external_id(external, ACT_AS_HEADER),
        )
    raise InputError(
        ACT_AS_HEADER,
        "must be `user:<workspace>:<external user id>` or `shared:<workspace>`",
    )


def acting_principal(session: Session, surface: str, act_as: str) -> Principal:
    """Return the principal a token of ``surface`` acts as, from its ``X-Search2o-Act-As``.

    The principal never has admin rights and carries ``surface``.

    Raises:
        InputError: the header is malformed.
        PermissionDeniedError: the account is not linked on ``surface`` (whether it is linked
            on another surface or nowhere: one message).

    """
    kind, workspace, external = parse_act_as(act_as)
    if kind == "shared":
        return shared_principal(session, surface, workspace)
    assert external is not None
    row = session.execute(
        select(User)
        .join(SurfaceIdentity, SurfaceIdentity.user_id == User.id)
        .where(
            SurfaceIdentity.surface == surface,
            SurfaceIdentity.workspace == workspace,
            SurfaceIdentity.external_user_id == external,
        )
    ).scalar_one_or_none()
    if row is None:
        raise PermissionDeniedError(
            f"the {surface} account {workspace}:{external} is not linked to a user on {surface}; "
            "link it with a code from the Web App or `search2o users link-code EMAIL`, or with "
            "the email its platform verified"
        )
    return replace(Principal.of(row), is_admin=False, surface=surface)
