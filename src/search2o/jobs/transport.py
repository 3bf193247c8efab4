"""The transport of job messages: Huey on SQLite, PostgreSQL or Redis, carrying job ids only.

Huey (https://huey.readthedocs.io) moves messages and runs consumers: worker threads that
dequeue and execute, and a scheduler thread that moves delayed messages (retries) to the queue
and fires periodic tasks. Here every message is either "deliver job <id>" or the periodic
"tick"; what a job is, and whether it may run, lives in the ledger (:mod:`search2o.jobs.ledger`).

* ``sqlite``: ``SqliteHuey`` on a file of its own (default ``<data_dir>/jobs.db``, mode 0600).
  Its storage does not block on an empty queue, so workers poll, from 10 ms up to
  ``jobs.poll_max_s`` (Huey's consumer backoff, ``initial_delay``/``backoff``/``max_delay``).
* ``postgres``: ``PostgresHuey`` (Huey >= 3.5) on the PostgreSQL of ``database_url``: dequeue by
  ``DELETE ... FOR UPDATE SKIP LOCKED``, idle workers wait on ``LISTEN`` for the ``NOTIFY``
  each enqueue sends. Its tables (``jobs_huey_*``) are created by Huey when the queue opens,
  under an advisory lock so workers starting together do not race on ``CREATE TABLE``.
* ``redis``: ``RedisHuey``: ``LPUSH`` / ``BRPOP``.

Messages are JSON (:class:`JsonMessageSerializer`), not Huey's default pickle, so whoever can
write to the transport (a shared Redis) can at most ask for a job id to be delivered, which the
ledger then refuses or runs as it would anyway; never run code in a worker.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from huey import RedisHuey, SqliteHuey
from huey.api import Huey
from huey.consumer import Consumer
from huey.registry import Message
from huey.serializer import Serializer
from huey.storage import PostgresStorage
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from search2o.errors import ConfigError, StorageError
from search2o.jobs.settings import JobSettings
from search2o.storage.db import Database

__all__ = [
    "DELIVER_TASK",
    "TICK_TASK",
    "JsonMessageSerializer",
    "QueueConsumer",
    "open_huey",
    "safe_url",
]

DELIVER_TASK = "search2o_job"
"""Huey task name of "deliver the job whose id is the one argument"."""
TICK_TASK = "search2o_tick"
"""Huey periodic task name of the tick (sweeper and periodic kinds)."""

_PG_TABLE_PREFIX = "jobs_huey"
# pg_advisory_lock key serialising Huey's CREATE TABLE IF NOT EXISTS across processes:
# the ASCII of "S2OJ" (any constant unique to this use works).
_PG_DDL_LOCK = 0x53324F4A
_MAX_ID = 64


class JsonMessageSerializer(Serializer):  # type: ignore[misc]
    """Huey messages as JSON: ``{"id", "name", "eta", "args", "retries", "retry_delay"}``.

    Only what this package sends is accepted: no keyword arguments, callbacks, chords,
    expiry, priority or timeout, and at most one string argument (a job id). Anything else
    raises ``ValueError`` (Huey's worker logs it and drops the message; the ledger's sweeper
    resends real jobs). ``eta`` is a naive UTC ISO 8601 time (Huey with ``utc=True``).
    """

    def _serialize(self, data: Any) -> bytes:
        message: Message = data
        extras = (
            message.kwargs,
            message.on_complete,
            message.on_error,
            message.chord_config,
            message.expires,
            message.timeout,
            message.priority,
        )
        if any(extras):
            raise ValueError("job messages carry a job id only (no kwargs, callbacks, expiry)")
        args = list(message.args or ())
        if len(args) > 1 or not all(isinstance(a, str) and len(a) <= _MAX_ID for a in args):
            raise ValueError("job messages carry at most one argument: a job id")
        body = {
            "id": str(message.id),
            "name": str(message.name),
            "eta": message.eta.isoformat() if message.eta is not None else None,
            "args": args,
            "retries": int(message.retries or 0),
            "retry_delay": float(message.retry_delay or 0),
        }
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    def _deserialize(self, data: bytes) -> Any:
        body = json.loads(bytes(data).decode("utf-8"))
        if not isinstance(body, dict) or set(body) != {
            "id",
            "name",
            "eta",
            "args",
            "retries",
            "retry_delay",
        }:
            raise ValueError("not a job message")
        args = body["args"]
        if (
            not isinstance(args, list)
            or len(args) > 1
            or not all(isinstance(a, str) and len(a) <= _MAX_ID for a in args)
        ):
            raise ValueError("a job message carries at most one argument: a job id")
        for key in ("id", "name"):
            if not isinstance(body[key], str) or not 0 < len(body[key]) <= 200:
                raise ValueError(f"a job message's {key} must be a short string")
        eta = dt.datetime.fromisoformat(body["eta"]) if body["eta"] is not None else None
        return Message(
            id=body["id"],
            name=body["name"],
            eta=eta,
            retries=int(body["retries"]),
            retry_delay=float(body["retry_delay"]),
            args=tuple(args),
            kwargs={},
        )


class QueueConsumer(Consumer):  # type: ignore[misc]
    """Huey's consumer for threads inside a process that owns its own signals.

    Two changes to ``huey.consumer.Consumer``: the scheduler fires periodic tasks every
    ``tick_s`` seconds instead of Huey's fixed 60 (``Scheduler.periodic_task_seconds``), and
    :meth:`start` installs no signal handlers (``search2o serve`` leaves them to uvicorn,
    ``search2o worker`` to :meth:`search2o.jobs.queue.JobQueue.run_worker`).
    """

    def __init__(self, huey: Huey, *, tick_s: int, **options: Any) -> None:
        self._tick_s = tick_s  # read by _create_scheduler, which Consumer.__init__ calls
        super().__init__(huey, **options)

    def _create_scheduler(self) -> Any:
        scheduler = super()._create_scheduler()
        scheduler.periodic_task_seconds = self._tick_s
        return scheduler

    def _set_signal_handlers(self) -> None:
        """Install nothing: the process that runs the consumer owns its signals."""

    def threads(self) -> list[Any]:
        """Return the worker threads and the scheduler thread."""
        return [thread for _, thread in self.worker_threads] + [self.scheduler]


class _PostgresStorage(PostgresStorage):  # type: ignore[misc]
    """Huey's PostgreSQL storage, closing every worker thread's ``LISTEN`` connection.

    Huey keeps one ``LISTEN`` connection per dequeuing thread and leaves the others to the
    garbage collector when the storage closes; here :meth:`close` closes them all, so no
    connection outlives the queue.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._listeners: list[Any] = []
        self._listeners_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def _listen_conn(self) -> Any:
        connection = super()._listen_conn()
        with self._listeners_lock:
            if connection not in self._listeners:
                self._listeners.append(connection)
        return connection

    def close(self) -> Any:
        """Close the ``LISTEN`` connections of every thread, then the shared connection."""
        with self._listeners_lock:
            listeners, self._listeners = self._listeners, []
        for connection in listeners:
            with contextlib.suppress(Exception):
                connection.close()
        return super().close()


def safe_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***`` (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def open_huey(settings: JobSettings, database: Database, data_dir: Path) -> Huey:
    """Open the Huey instance of ``settings.backend`` (results off, UTC, JSON messages).

    Raises:
        ConfigError: ``postgres`` without a PostgreSQL ``database_url``.
        StorageError: the SQLite file, PostgreSQL or Redis cannot be opened or reached.

    """
    common: dict[str, Any] = {
        "results": False,
        "utc": True,
        "serializer": JsonMessageSerializer(),
    }
    if settings.backend == "sqlite":
        return _open_sqlite(settings, data_dir, common)
    if settings.backend == "postgres":
        return _open_postgres(settings, database, common)
    return _open_redis(settings, common)


def _open_sqlite(settings: JobSettings, data_dir: Path, common: dict[str, Any]) -> Huey:
    path = settings.sqlite_path or data_dir / "jobs.db"
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Owner-only from the start, like the database file (storage.db).
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        return SqliteHuey(settings.queue_name, filename=str(path), timeout=10, **common)
    except (OSError, sqlite3.Error) as exc:
        raise StorageError(
            f"cannot open the job queue file {path}: {exc}; set SEARCH2O_JOBS__SQLITE_PATH "
            "or SEARCH2O_DATA_DIR to a writable place"
        ) from exc


def _open_postgres(settings: JobSettings, database: Database, common: dict[str, Any]) -> Huey:
    if database.backend != "postgresql":
        raise ConfigError(
            "jobs.backend postgres keeps the queue in the PostgreSQL of database_url, but "
            f"database_url is {database.backend}; set SEARCH2O_DATABASE_URL to "
            "postgresql+psycopg://... or SEARCH2O_JOBS__BACKEND to sqlite or redis"
        )
    import psycopg

    dsn = database.url.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with database.engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _PG_DDL_LOCK})
            try:
                return Huey(
                    settings.queue_name,
                    storage_class=_PostgresStorage,
                    dsn=dsn,
                    blocking=True,
                    read_timeout=1,
                    table_prefix=_PG_TABLE_PREFIX,
                    connect_timeout=10,
                    **common,
                )
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_DDL_LOCK})
                connection.commit()
    except (psycopg.Error, SQLAlchemyError) as exc:
        original = getattr(exc, "orig", None) or exc
        first = (str(original).strip().splitlines() or [type(original).__name__])[0]
        raise StorageError(f"cannot open the job queue on {database.describe()}: {first}") from exc


def _open_redis(settings: JobSettings, common: dict[str, Any]) -> Huey:
    import redis

    url = settings.redis_url.get_secret_value() if settings.redis_url else ""
    huey = RedisHuey(settings.queue_name, url=url, blocking=True, read_timeout=1, **common)
    try:
        huey.storage.conn.ping()
    except redis.RedisError as exc:
        huey.storage.pool.disconnect()
        raise StorageError(
            f"cannot reach Redis at {safe_url(url)}: {exc}; check jobs.redis_url "
            "(SEARCH2O_JOBS__REDIS_URL) and that the server runs"
        ) from exc
    return huey
