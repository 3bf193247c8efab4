"""The database: engine, sessions and migrations for SQLite (default) and PostgreSQL.

A :class:`Database` owns its engine and applies Alembic migrations when it opens, so callers
never remember a manual setup step. SQLite connections get WAL journaling, foreign keys and a
busy timeout (SQLite documentation, "Write-Ahead Logging", "PRAGMA foreign_keys"), and their
write transactions queue at one gate per database (:mod:`search2o.storage.writegate`).

Engines run with ``hide_parameters=True`` (SQLAlchemy, ``create_engine``): statement
parameters hold document text, messages and emails, so they never appear in an error's text,
a traceback or the statement log. A PostgreSQL URL whose driver is not installed is a
:class:`ConfigError` naming the extra to install.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import create_engine, event, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from search2o.errors import ConfigError, MissingExtraError, StorageError
from search2o.private_dir import ensure_private_dir
from search2o.storage.models import Counter
from search2o.storage.writegate import GatedConnection, WriteGate, urgent_writes

__all__ = ["Backend", "Database", "bump_counter", "driver_message", "read_counter"]

Backend = Literal["sqlite", "postgresql"]


_BUSY_TIMEOUT_MS = 10000


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # Deleted content is overwritten with zeros, not left in free pages of the file
    # (SQLite documentation, "PRAGMA secure_delete").
    cursor.execute("PRAGMA secure_delete=ON")
    cursor.close()


class Database:
    """An open database with the schema at the latest migration.

    Args:
        url: SQLAlchemy URL (``sqlite:///path.db`` or ``postgresql+psycopg://...``).
        migrate: apply pending migrations now (the default; ``search2o db upgrade`` does the same).
        key_provider: the :class:`~search2o.crypto.keys.KeyProvider` a migration uses to seal
            conversations stored before encryption (revision 0005).

    Raises:
        ConfigError: the URL is malformed or names an unsupported backend.
        StorageError: the database cannot be reached or migrated.

    """

    def __init__(self, url: str, *, migrate: bool = True, key_provider: Any | None = None) -> None:
        self._key_provider = key_provider
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise ConfigError(f"database_url {url!r} is not a valid SQLAlchemy URL") from exc
        backend = parsed.get_backend_name()
        if backend not in ("sqlite", "postgresql"):
            raise ConfigError(
                f"database_url uses {backend!r}; supported: sqlite, postgresql+psycopg"
            )
        self.backend: Backend = "sqlite" if backend == "sqlite" else "postgresql"
        self.url = parsed
        kwargs: dict[str, Any] = {}
        if self.backend == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                folder = Path(parsed.database).parent
                try:
                    ensure_private_dir(folder)
                    # Owner-only from the start; SQLite gives its -wal/-shm files the same mode
                    # (SQLite docs, "Write-Ahead Logging": the WAL's permissions follow the file).
                    os.close(os.open(parsed.database, os.O_CREAT | os.O_WRONLY, 0o600))
                except OSError as exc:
                    raise ConfigError(
                        f"cannot create the data directory {folder}: {exc.strerror or exc}; "
                        "set SEARCH2O_DATA_DIR to a writable folder"
                    ) from exc
            # SQLAlchemy's default for a file: a QueuePool of connections shared across threads
            # (``check_same_thread=False``); opening one costs ~0.7 ms with the pragmas below,
            # a tenth of a memory search. Their writers queue in order at one gate
            # (search2o.storage.writegate) instead of racing in SQLite's busy handler.
            kwargs["connect_args"] = {"factory": GatedConnection}
        else:
            _require_postgres_driver(parsed.get_driver_name())
            kwargs.update(pool_pre_ping=True, pool_size=5, max_overflow=10)
        self.engine: Engine = create_engine(parsed, hide_parameters=True, **kwargs)
        if self.backend == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
            gate = WriteGate(_BUSY_TIMEOUT_MS / 1000)

            def _gate(dbapi_connection: Any, _record: Any) -> None:
                if isinstance(dbapi_connection, GatedConnection):
                    dbapi_connection.gate = gate

            event.listen(self.engine, "connect", _gate)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        if migrate:
            try:
                self.upgrade()
            except BaseException:
                self.engine.dispose()  # no pooled connection outlives a failed open
                raise

    @contextmanager
    def session(self, *, urgent: bool = False) -> Iterator[Session]:
        """Yield a session inside one transaction.

        Committed on success, rolled back on any exception (``KeyboardInterrupt`` included),
        so nothing half-written stays behind. ``urgent``: on SQLite, its writes go before the
        writes other threads of this process are waiting to start
        (:mod:`search2o.storage.writegate`; for what someone waits on at once, such as a
        messenger's acknowledgement); no effect on PostgreSQL.

        Raises:
            StorageError: the database failed (the original error is chained).

        """
        session = self._sessions()
        try:
            with urgent_writes() if urgent else nullcontext(), session.begin():
                yield session
        except OperationalError as exc:
            raise StorageError(f"database error: {driver_message(exc)}") from exc
        finally:
            session.close()

    @contextmanager
    def within(self, session: Session | None) -> Iterator[Session]:
        """Yield ``session`` as it is, or, when it is ``None``, a new one as :meth:`session`.

        Lets a write join a caller's transaction (two writes, one commit) while a caller that
        passes nothing keeps a transaction of its own. A given session is neither committed
        nor closed here: its owner does that.

        Raises:
            StorageError: the database failed (only for a session opened here).

        """
        if session is not None:
            yield session
            return
        with self.session() as own:
            yield own

    @contextmanager
    def autocommit_session(self) -> Iterator[Session]:
        """Yield a session whose every statement commits on its own (no BEGIN, no COMMIT).

        For hot read paths whose few writes are independent hints (a memory search recording
        retrieval times): on PostgreSQL it saves two round trips per use.

        Raises:
            StorageError: the database failed (the original error is chained).

        """
        with self.engine.connect() as connection:
            session = Session(
                bind=connection.execution_options(isolation_level="AUTOCOMMIT"),
                expire_on_commit=False,
            )
            try:
                yield session
            except OperationalError as exc:
                raise StorageError(f"database error: {driver_message(exc)}") from exc
            finally:
                session.close()

    def upgrade(self, revision: str = "head") -> None:
        """Apply Alembic migrations up to ``revision``.

        Raises:
            StorageError: a migration failed; the database is left at the last good revision.

        """
        self._migrate("upgrade", revision)

    def downgrade(self, revision: str) -> None:
        """Revert Alembic migrations down to ``revision`` (``base`` drops every table).

        Raises:
            StorageError: a migration failed.

        """
        self._migrate("downgrade", revision)

    def _migrate(self, direction: str, revision: str) -> None:
        from alembic import command

        # A connection of its own, never pooled: on SQLite it runs with foreign keys off. (An
        # in-memory SQLite database exists only on the engine's own connection.)
        in_memory = self.backend == "sqlite" and self.url.database in (None, "", ":memory:")
        engine = (
            self.engine
            if in_memory
            else create_engine(self.url, poolclass=NullPool, hide_parameters=True)
        )
        if self.backend == "sqlite" and not in_memory:
            event.listen(engine, "connect", _sqlite_pragmas)
        try:
            with engine.begin() as connection:
                if self.backend == "sqlite":
                    # Batch migrations rebuild tables (copy, drop, rename); with foreign keys on,
                    # dropping the old table would cascade-delete the rows that refer to it
                    # (Alembic docs, "Running batch migrations for SQLite ... foreign keys").
                    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
                    # Python's sqlite3 opens a transaction only before INSERT/UPDATE/DELETE, so
                    # CREATE/DROP would commit one by one and a refused step of a multi-step
                    # migration would leave the earlier steps' DDL applied under the old
                    # revision (Python docs, sqlite3 "Transaction control"). An explicit BEGIN
                    # makes the whole run one transaction; the PRAGMA above must come first
                    # (SQLite docs: foreign_keys is a no-op inside a transaction).
                    connection.exec_driver_sql("BEGIN")
                config = self._alembic_config()
                config.attributes["connection"] = connection
                config.attributes["key_provider"] = self._key_provider
                getattr(command, direction)(config, revision)
        except SQLAlchemyError as exc:
            raise StorageError(f"cannot migrate {self.describe()}: {driver_message(exc)}") from exc
        except RuntimeError as exc:  # a migration's own refusal (see 0005)
            raise StorageError(f"cannot migrate {self.describe()}: {exc}") from exc
        finally:
            if not in_memory:
                engine.dispose()

    def current_revision(self) -> str | None:
        """Return the applied Alembic revision, or ``None`` for a blank database."""
        from alembic.runtime.migration import MigrationContext

        with self.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    @classmethod
    def head_revision(cls) -> str:
        """Return the newest migration revision this version of search2o ships."""
        from alembic.script import ScriptDirectory

        head = ScriptDirectory.from_config(cls._alembic_config()).get_current_head()
        assert head is not None  # the package always ships migrations
        return str(head)

    def describe(self) -> str:
        """Return the URL with any password hidden, for logs and messages."""
        return self.url.render_as_string(hide_password=True)

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()

    @staticmethod
    def _alembic_config() -> Any:
        from alembic.config import Config

        config = Config()
        location = resources.files("search2o.storage") / "migrations"
        config.set_main_option("script_location", str(location))
        return config


def _require_postgres_driver(driver: str) -> None:
    """Refuse a PostgreSQL URL whose Python driver or pgvector binding is not installed.

    Without this check the first connection fails with a bare ``ModuleNotFoundError``.

    Raises:
        MissingExtraError: names the missing module and the extra that installs it.

    """
    # The [postgres] extra installs psycopg (3) and pgvector. SQLAlchemy names each driver by
    # its module (psycopg, psycopg2, pg8000, asyncpg).
    for module in (driver, "pgvector"):
        try:
            importlib.import_module(module)
        except ImportError:
            hint = "pip install 'search2o[postgres]'"
            if module == driver and driver != "psycopg":
                hint = f"use postgresql+psycopg://... (psycopg 3) after {hint}"
            raise MissingExtraError(
                f"database_url needs the Python package '{module}', which is not installed: {hint}",
                "postgres",
            ) from None


def driver_message(exc: BaseException) -> str:
    """Return the driver's own message, first line only (no SQL, no parameters).

    ``exc``: SQLAlchemy's wrapper (its ``orig`` is the driver's error) or the driver's error.
    """
    original = getattr(exc, "orig", None) or exc
    return (str(original).strip().splitlines() or [type(original).__name__])[0]


def read_counter(session: Session, name: str) -> int:
    """Return the value of counter ``name`` (0 when it was never bumped)."""
    value = session.scalar(select(Counter.value).where(Counter.name == name))
    return int(value or 0)


def bump_counter(session: Session, name: str) -> None:
    """Add one to counter ``name`` inside the caller's transaction (creating it at 1).

    One ``INSERT ... ON CONFLICT (name) DO UPDATE SET value = value + 1`` (PostgreSQL and
    SQLite 3.24+ "upsert"), so two transactions bumping a counter that does not exist yet both
    succeed: the second waits for the first's row and adds one to it.
    """
    postgres = session.get_bind().dialect.name == "postgresql"
    construct = postgresql.insert if postgres else sqlite.insert
    statement = construct(Counter).values(name=name, value=1)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=[Counter.name], set_={"value": Counter.value + 1}
        )
    )
