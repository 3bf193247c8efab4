"""The SQL under the memory store: the user's row lock, key conditions, retrieval stamps, opening.

Every statement filters by the user inside the SQL (never after); a writer takes the user's row
lock first (``FOR NO KEY UPDATE`` on PostgreSQL, SQLite's single writer), so the bound of
:mod:`search2o.memory.store` is exact.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    delete,
    false,
    or_,
    select,
    update,
)
from sqlalchemy import text as sql_text
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import TextClause

from search2o.crypto.vault import Sealer
from search2o.errors import InputError, IntegrityCheckError, NotFoundError
from search2o.memory.cache import EVERY_USER_COUNTER
from search2o.storage import dialect
from search2o.storage.memory_models import Memory
from search2o.storage.models import User, utcnow
from search2o.textrules import check_text

if TYPE_CHECKING:
    pass


__all__ = ["KIND", "Key"]


KIND = "memory"
"""Associated-data kind of a sealed memory ``{"agent", "label", "text"}``."""


_HITS = select(
    Memory.id, Memory.user_id, Memory.agent, Memory.label, Memory.sealed, Memory.created_at
).where(Memory.user_id == bindparam("user_id"), Memory.id.in_(bindparam("ids", expanding=True)))
"""The hits of a search, by id (built once: SQL expression building costs ~0.1 ms a time)."""


_STAMP = (
    "SELECT kek_id, kek_version, wrapped, "
    "(SELECT {value} FROM counters WHERE name = :counter) AS own, "
    f"(SELECT {{value}} FROM counters WHERE name = '{EVERY_USER_COUNTER}') AS every "
    "FROM user_keys WHERE user_id = :user_id"
)
"""A cached search's first read: the user's key row and both memory counters, one statement.

On PostgreSQL a counter reads as ``value/xmin``: the transaction that last bumped it, so a
value that comes back (a backup restored under running servers) is still a new stamp.
"""


@functools.lru_cache(maxsize=2)
def _stamp_statement(postgres: bool) -> TextClause:
    """Return :data:`_STAMP` for the backend."""
    value = "value::text || '/' || xmin::text" if postgres else "value"
    return sql_text(_STAMP.format(value=value))


Key = tuple[str, str]


def _lock_user(session: Session, user_id: int) -> str:
    """Serialise memory writers of one user until the transaction ends; return their plan.

    PostgreSQL: ``FOR NO KEY UPDATE`` on the user's row (foreign-key checks of other tables
    are not blocked). SQLite: a no-op write to the row takes the database's write lock now, so
    the count and eviction below see every committed write.

    Raises:
        NotFoundError: the user no longer exists.

    """
    if dialect.is_postgres(session):
        plan = session.scalar(
            select(User.plan).where(User.id == user_id).with_for_update(key_share=True)
        )
    else:
        session.execute(
            update(User)
            .where(User.id == user_id)
            .values(plan=User.plan)
            .execution_options(synchronize_session=False)
        )
        plan = session.scalar(select(User.plan).where(User.id == user_id))
    if plan is None:
        raise NotFoundError(f"user {user_id} not found")
    return str(plan)


def _keys_condition(keys: Iterable[Key]) -> ColumnElement[bool]:
    """``(agent, label) IN keys``, written per agent (SQLite has no row-value IN lists)."""
    by_agent: dict[str, builtins.list[str]] = {}
    for agent, label in keys:
        by_agent.setdefault(agent, []).append(label)
    if not by_agent:
        return false()
    return or_(
        *(
            and_(Memory.agent == agent, Memory.label.in_(labels))
            for agent, labels in by_agent.items()
        )
    )


def _delete_keys(session: Session, user_id: int, keys: builtins.list[Key]) -> tuple[Key, ...]:
    if not keys:
        return ()
    found = session.execute(
        select(Memory.id, Memory.agent, Memory.label).where(
            Memory.user_id == user_id, _keys_condition(keys)
        )
    ).all()
    if found:
        session.execute(delete(Memory).where(Memory.id.in_([r[0] for r in found])))
    return tuple(sorted((r[1], r[2]) for r in found))


def _unlocked(user_id: int, *conditions: ColumnElement[bool]) -> Any:
    """Ids of the user's rows matching ``conditions`` that no other transaction holds.

    ``FOR UPDATE SKIP LOCKED`` on PostgreSQL (SQLite ignores it: one writer at a time).
    """
    return (
        select(Memory.id)
        .where(Memory.user_id == user_id, *conditions)
        .with_for_update(skip_locked=True)
    )


def _touch(session: Session, user_id: int, ids: Iterable[int]) -> None:
    """Record that ``ids`` were retrieved now.

    Rows another transaction holds (an apply in flight) are skipped, not waited for: a
    retrieval time is a hint for eviction, and waiting could deadlock against the apply's own
    row locks.
    """
    wanted = sorted(set(ids))
    if wanted:
        session.execute(
            update(Memory)
            .where(Memory.id.in_(_unlocked(user_id, Memory.id.in_(wanted))))
            .values(last_retrieved_at=utcnow())
            .execution_options(synchronize_session=False)
        )


def _open(sealer: Sealer, row: Any) -> str:
    """Open a memory's sealed text and check it was sealed for this row's agent and label.

    ``row``: a :class:`Memory` or a result row with its ``user_id``, ``agent``, ``label`` and
    ``sealed``.

    Raises:
        IntegrityCheckError: altered, or moved from another user, agent or label.

    """
    what = f"memory {row.agent}/{row.label} of user {row.user_id}"
    payload = sealer.open(KIND, row.sealed, what)
    if (
        not isinstance(payload, dict)
        or payload.get("agent") != row.agent
        or payload.get("label") != row.label
        or not isinstance(payload.get("text"), str)
    ):
        raise IntegrityCheckError(
            f"{what} failed its integrity check: it was altered or does not belong here"
        )
    return str(payload["text"])


def _check_query(query: object, longest: int) -> str:
    """Return ``query`` if it is a non-empty string of at most ``longest`` characters.

    The errors describe the query (its type, its length), never its text.
    """
    if not isinstance(query, str):
        raise InputError("query", f"must be a string, got {type(query).__name__}")
    check_text(query, "query", max_chars=longest, setting="memory.max_query_chars", strip=False)
    return query


def _check_int(value: object, field: str, lowest: int, highest: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= highest:
        raise InputError(field, f"must be an integer from {lowest} to {highest}, got {value!r}")
    return value
