"""The caller's conversations one page at a time, by cursor, with a search over their titles.

The Web App's sidebar holds thousands of conversations; an offset page costs more the deeper it
goes and shifts when a conversation moves to the top. A **cursor** (keyset pagination, also
called the "seek method": Winand, *Use The Index, Luke*, "Paging Through Results") names the
last row seen, so every page is one indexed range read and a conversation used meanwhile never
appears twice.

Order: pinned first, then most recently used, then id (descending in all three), the same
order as :meth:`~search2o.query.conversations.Conversations.list_conversations` except that ties
on the use time fall by id descending, so the key is a total order. The cursor is the last
row's ``(pinned, last_used_at, id)`` as ``P-MICROS-ID`` (:data:`CURSOR_PATTERN`: ``0``/``1``,
microseconds since the Unix epoch, the 32 hex digits of the id): opaque to clients, and a
position in the order, not a secret, so every string of that pattern is a cursor (the rows
after that position that the caller may see; another user's id gains nothing), and the
pattern is what the OpenAPI document declares.

Titles are sealed per conversation (:mod:`search2o.crypto.vault`), so no SQL can search them:
:func:`page` with a ``query`` opens titles in key order and keeps those that contain the query
(case-folded, Unicode NFKC), reading at most ``scan_limit`` rows per request; the cursor then
points after the last row *read*, so a search over 10,000 conversations is paged too and never
stalls the server.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.crypto.vault import Vault
from search2o.errors import InputError
from search2o.query.conversations import ConversationInfo, expiry_cutoff, live
from search2o.query.settings import RetentionSettings
from search2o.storage.db import Database
from search2o.storage.models import Conversation

__all__ = [
    "CURSOR_PATTERN",
    "MAX_PAGE",
    "MAX_QUERY_CHARS",
    "SCAN_LIMIT",
    "ConversationPage",
    "PageItem",
    "page",
]

MAX_PAGE = 200
"""The most conversations one page holds."""
MAX_QUERY_CHARS = 200
"""The longest title search accepted, in characters (a title holds at most 200)."""
SCAN_LIMIT = 2000
"""The most rows one title search reads before it answers with a cursor to go on from."""
CURSOR_PATTERN = r"^[01]-[0-9]{1,16}-[0-9a-f]{32}$"
"""Every cursor: pinned (``0``/``1``), microseconds since 1970-01-01 UTC (16 digits reach the
year 2286), the conversation id. The API declares it as the ``cursor`` parameter's pattern."""
_CURSOR = re.compile(CURSOR_PATTERN.removesuffix("$") + r"\Z")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class PageItem:
    """One conversation of a page and when it expires (``None``: pinned or never)."""

    info: ConversationInfo
    expires_at: datetime | None


@dataclass(frozen=True)
class ConversationPage:
    """A page: its conversations in order and the cursor of the next one (``None``: the end)."""

    items: list[PageItem]
    next_cursor: str | None


def encode_cursor(row: Conversation) -> str:
    """Return the cursor after ``row``: ``P-MICROS-ID`` (:data:`CURSOR_PATTERN`)."""
    used = row.last_used_at
    if used.tzinfo is None:  # SQLite gives back the UTC time it was given, without a zone
        used = used.replace(tzinfo=UTC)
    return f"{int(row.pinned)}-{(used - _EPOCH) // _MICROSECOND}-{row.id}"


def decode_cursor(cursor: str) -> tuple[bool, datetime, str]:
    """Return the ``(pinned, last_used_at, id)`` a cursor of :func:`encode_cursor` names.

    Raises:
        InputError: field ``cursor``: it does not match :data:`CURSOR_PATTERN`.

    """
    if not _CURSOR.match(cursor):
        raise InputError("cursor", "is not a cursor from a previous page; omit it to start over")
    pinned, micros, ident = cursor.split("-")
    return pinned == "1", _EPOCH + int(micros) * _MICROSECOND, ident


def fold(text: str) -> str:
    """Return ``text`` as a title search compares it: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _after(pinned: bool, used: datetime, ident: str) -> ColumnElement[bool]:
    """Return the SQL condition "after ``(pinned, used, ident)`` in the page order"."""
    same_pin = Conversation.pinned.is_(pinned)
    later = or_(
        Conversation.last_used_at < used,
        and_(Conversation.last_used_at == used, Conversation.id < ident),
    )
    if pinned:  # after a pinned row: later pinned rows, then every unpinned one
        return or_(Conversation.pinned.is_(False), and_(same_pin, later))
    return and_(same_pin, later)


def page(
    database: Database,
    vault: Vault,
    principal: Principal,
    *,
    limit: int = 50,
    cursor: str | None = None,
    query: str | None = None,
    retention: RetentionSettings | None = None,
    scan_limit: int = SCAN_LIMIT,
) -> ConversationPage:
    """Return one page of the caller's live conversations, optionally only titles matching.

    Args:
        database: the open database.
        vault: opens the sealed titles.
        principal: the caller; only their conversations are read.
        limit: conversations per page, 1..:data:`MAX_PAGE`.
        cursor: the ``next_cursor`` of the previous page; ``None`` for the first.
        query: keep only conversations whose title contains it (see :func:`fold`).
        retention: the expiry rules; expired conversations are never listed.
        scan_limit: with ``query``, the most rows read for one page.

    Raises:
        InputError: ``limit`` out of range, a bad ``cursor``, or a ``query`` that is blank or
            longer than :data:`MAX_QUERY_CHARS` characters (each naming its field).

    """
    if not 1 <= limit <= MAX_PAGE:
        raise InputError("limit", f"must be between 1 and {MAX_PAGE}, got {limit}")
    needle = None
    if query is not None:
        needle = fold(query)
        if not needle:
            raise InputError("q", "must not be blank; omit it to list every conversation")
        if len(query) > MAX_QUERY_CHARS:
            raise InputError("q", f"is {len(query)} characters long; the limit is 200")
    position = decode_cursor(cursor) if cursor is not None else None
    days = retention.days_for(principal.plan) if retention is not None else None
    statement = (
        select(Conversation)
        .where(
            Conversation.user_id == principal.user_id,
            live(expiry_cutoff(retention, principal.plan)),
        )
        .order_by(
            Conversation.pinned.desc(), Conversation.last_used_at.desc(), Conversation.id.desc()
        )
    )
    if position is not None:
        statement = statement.where(_after(*position))
    read = limit + 1 if needle is None else max(scan_limit, limit + 1)
    with database.session() as session:
        rows = list(session.scalars(statement.limit(read)))
        return _collect(session, vault, rows, limit, needle, days, read)


def _collect(
    session: Session,
    vault: Vault,
    rows: list[Conversation],
    limit: int,
    needle: str | None,
    days: int | None,
    read: int,
) -> ConversationPage:
    items: list[PageItem] = []
    last: Conversation | None = None
    for row in rows:
        if len(items) == limit:
            return ConversationPage(items, encode_cursor(last) if last is not None else None)
        info = ConversationInfo.of(row, vault.sealer(session, row.id, row.user_id))
        last = row
        if needle is not None and needle not in fold(info.title):
            continue
        expires = None if row.pinned or days is None else row.last_used_at + timedelta(days=days)
        items.append(PageItem(info, expires))
    # Every row read: more may follow only when the read was cut at its bound.
    more = len(rows) == read and last is not None
    return ConversationPage(items, encode_cursor(last) if more and last is not None else None)
