"""What differs between the two backends, in one place, so engines need not know SQL dialects.

SQLite and PostgreSQL both have ``INSERT ... ON CONFLICT`` (SQLite 3.24+, PostgreSQL 9.5+), but
SQLAlchemy builds it from a dialect-specific construct (SQLAlchemy docs, "INSERT…ON CONFLICT
(Upsert)"); :func:`insert` returns the right one for a session.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

__all__ = ["insert", "is_postgres"]


def is_postgres(session: Session) -> bool:
    """Tell whether ``session`` is bound to PostgreSQL (else it is SQLite)."""
    return session.get_bind().dialect.name == "postgresql"


def insert(session: Session, table: Any) -> Any:
    """Return ``INSERT INTO table`` with ``on_conflict_do_nothing``/``_do_update`` for the backend.

    Args:
        session: the session the statement will run in.
        table: a mapped class or a ``Table``.

    """
    construct = postgresql.insert if is_postgres(session) else sqlite.insert
    return construct(table)
