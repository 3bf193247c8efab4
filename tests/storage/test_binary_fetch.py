"""``fetch_one_binary``: PostgreSQL's binary results, the session's transaction, clear errors."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from search2o.errors import StorageError
from search2o.storage.db import Database
from search2o.storage.dialect import fetch_one_binary

# Binary results are PostgreSQL's: SQLite has one format.
pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


@pytest.fixture
def pg(database: Database) -> Database:
    return database


def test_a_row_of_arrays_and_bytes_comes_back_as_python_values(pg: Database) -> None:
    with pg.session() as session:
        session.execute(text("CREATE TEMP TABLE seen (n int)"))
        session.execute(text("INSERT INTO seen VALUES (7)"))  # same transaction: visible
        row = fetch_one_binary(
            session,
            "SELECT ARRAY[1, 2]::int8[], ARRAY[0.5]::float4[], '\\x0102'::bytea, "
            "(SELECT n FROM seen), %(word)s::text",
            {"word": "ok"},
        )
    assert row == ([1, 2], [0.5], b"\x01\x02", 7, "ok")


def test_no_row_is_a_lookup_error(pg: Database) -> None:
    with pg.session() as session, pytest.raises(LookupError, match="no row"):
        fetch_one_binary(session, "SELECT 1 WHERE false", {})


def test_a_cancelled_statement_is_a_storage_error(pg: Database) -> None:
    with (
        pytest.raises(StorageError, match=r"database error: .*statement timeout"),
        pg.session() as session,
    ):
        session.execute(text("SET LOCAL statement_timeout = '20ms'"))
        fetch_one_binary(session, "SELECT pg_sleep(1)", {})
