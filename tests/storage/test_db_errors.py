"""Database errors keep SQL parameters (document text, emails) out of messages and logs, and a
missing driver names the extra to install."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from search2o import accounts
from search2o.errors import ConfigError, StorageError
from search2o.logs import JsonFormatter
from search2o.storage.db import Database

SECRET = "salary band for level 3 is 91k (confidential)"


@pytest.fixture
def engine_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """SQLAlchemy's statement log at INFO, as an operator debugging the database would set it."""
    with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
        yield caplog


def _logged(exc: BaseException) -> str:
    """The JSON line the server writes for an unhandled error (with its chained causes)."""
    record = logging.LogRecord(
        "search2o.api",
        logging.ERROR,
        __file__,
        1,
        "unhandled error",
        None,
        (type(exc), exc, exc.__traceback__),
    )
    return JsonFormatter().format(record)


def test_a_failing_statement_shows_no_parameter_in_its_error_or_the_log(
    database_url: str, engine_log: pytest.LogCaptureFixture
) -> None:
    database = Database(database_url)
    try:
        with pytest.raises(StorageError) as caught, database.session() as session:
            if database.backend == "sqlite":
                statement = "SELECT * FROM no_such_table WHERE body = :p"
            else:  # an OperationalError on PostgreSQL: the statement is cancelled
                session.execute(text("SET LOCAL statement_timeout = 1"))
                statement = "SELECT pg_sleep(1), CAST(:p AS text)"
            session.execute(text(statement), {"p": SECRET})
    finally:
        database.close()
    error = caught.value
    assert SECRET not in error.message
    assert SECRET not in str(error.__cause__)
    assert SECRET not in _logged(error)
    assert SECRET not in engine_log.text
    assert "SELECT" in engine_log.text  # the statement log did run, without its parameters


def test_a_constraint_violation_shows_no_parameter(database: Database) -> None:
    with database.session() as session:
        accounts.create_user(session, "dup@example.com")
    with pytest.raises(IntegrityError) as caught, database.session() as session:
        session.execute(
            text(
                "INSERT INTO users (email, display_name, groups, plan, is_admin, created_at) "
                "VALUES ('dup@example.com', :name, '[]', 'free', false, CURRENT_TIMESTAMP)"
            ),
            {"name": SECRET},
        )
    assert SECRET not in str(caught.value)
    assert SECRET not in _logged(caught.value)


@pytest.mark.parametrize(
    ("url", "missing", "hide"),
    [
        ("postgresql+psycopg://u@localhost/db", "psycopg", "psycopg"),
        ("postgresql+psycopg://u@localhost/db", "pgvector", "pgvector"),
        ("postgresql://u@localhost/db", "psycopg", "psycopg"),
        ("postgresql+psycopg2://u@localhost/db", "psycopg2", None),
    ],
)
def test_a_missing_driver_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, url: str, missing: str, hide: str | None
) -> None:
    if hide is not None:  # the installed package made unimportable, as on a plain install
        monkeypatch.setitem(sys.modules, hide, None)
    with pytest.raises(ConfigError) as caught:
        Database(url)
    message = caught.value.message
    assert f"'{missing}'" in message and "pip install 'search2o[postgres]'" in message
