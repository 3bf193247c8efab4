"""The SQLite write gate: waiting writers of one process get the lock in order, urgent first.

On a real SQLite file through :class:`~search2o.storage.db.Database`. The gate orders SQLite's
one writer; PostgreSQL locks rows, so two inserts into one table never wait for each other
there and ``urgent`` changes nothing: those tests run on SQLite only, the no-op on both.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, select, text

from search2o.storage.db import Database
from search2o.storage.writegate import GatedConnection, WriteGate

_ROWS = Table(
    "gate_probe",
    MetaData(),
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("who", String(16)),
)


@pytest.fixture
def sqlite_db(database: Database) -> Database:
    if database.backend != "sqlite":
        pytest.skip("the gate orders SQLite's one writer (PostgreSQL locks rows)")
    _ROWS.create(database.engine)
    return database


def _gate(database: Database) -> WriteGate:
    with database.engine.connect() as connection:
        dbapi = connection.connection.dbapi_connection
        assert isinstance(dbapi, GatedConnection) and dbapi.gate is not None
        return dbapi.gate


def _writer(database: Database, who: str, urgent: bool) -> threading.Thread:
    def write() -> None:
        with database.session(urgent=urgent) as session:
            session.execute(_ROWS.insert().values(who=who))

    thread = threading.Thread(target=write, name=who)
    thread.start()
    return thread


def _until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, "the writers did not queue within 10 s"
        time.sleep(0.005)


def _queue_behind_a_held_lock(database: Database, writers: list[tuple[str, bool]]) -> list[str]:
    """Hold a write transaction, start ``writers`` one after another, then commit; their order."""
    gate = _gate(database)
    threads = []
    with database.session() as holder:
        holder.execute(_ROWS.insert().values(who="holder"))
        for number, (who, urgent) in enumerate(writers, start=1):
            threads.append(_writer(database, who, urgent))
            # each has started waiting before the next comes
            _until(lambda n=number: len(gate._waiting) == n)
            # Without the gate, the earlier writers would by now sleep 100 ms between tries
            # in SQLite's busy handler, and the last one, a few ms, would take the lock first.
            time.sleep(0.4 if number < len(writers) else 0.02)
    for thread in threads:
        thread.join(15)
    with database.session() as session:
        return list(session.scalars(select(_ROWS.c.who).order_by(_ROWS.c.seq)))


def test_waiting_writers_get_the_lock_in_arrival_order(sqlite_db: Database) -> None:
    order = _queue_behind_a_held_lock(
        sqlite_db, [("first", False), ("second", False), ("third", False)]
    )
    assert order == ["holder", "first", "second", "third"]


def test_an_urgent_writer_goes_before_the_waiting_ones(sqlite_db: Database) -> None:
    order = _queue_behind_a_held_lock(
        sqlite_db, [("answer1", False), ("answer2", False), ("ack", True)]
    )
    assert order == ["holder", "ack", "answer1", "answer2"]


def test_a_failed_write_gives_the_gate_back(sqlite_db: Database) -> None:
    gate = _gate(sqlite_db)
    with pytest.raises(Exception, match="UNIQUE"), sqlite_db.session() as session:
        session.execute(_ROWS.insert().values(seq=1, who="a"))
        session.execute(_ROWS.insert().values(seq=1, who="b"))
    assert gate._holder is None and gate._holds == 0
    with sqlite_db.session() as session:  # the next writer passes at once
        session.execute(_ROWS.insert().values(who="c"))
        assert gate._holder == threading.get_ident()
    assert gate._holder is None


def test_reads_do_not_take_the_gate(sqlite_db: Database) -> None:
    gate = _gate(sqlite_db)
    with sqlite_db.session() as holder:
        holder.execute(_ROWS.insert().values(who="holder"))
        seen: list[int] = []

        def read() -> None:
            with sqlite_db.session() as session:
                seen.extend(session.scalars(select(_ROWS.c.seq)))

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(5)
        assert not reader.is_alive() and seen == []  # WAL: the reader sees the last commit
        assert not gate._waiting


def test_a_writer_waits_at_most_the_timeout_then_goes_on() -> None:
    gate = WriteGate(wait_s=0.1)
    assert gate.enter()
    assert gate.enter()  # the same thread passes again
    passed: list[bool] = []
    other = threading.Thread(target=lambda: passed.append(gate.enter()))
    started = time.monotonic()
    other.start()
    other.join(5)
    assert passed == [False] and 0.1 <= time.monotonic() - started < 2
    assert not gate._waiting  # the one that gave up left the queue
    gate.leave()
    gate.leave()
    assert gate._holder is None
    assert gate.enter()  # free again
    gate.leave()


def test_urgent_sessions_work_on_both_backends(database: Database) -> None:
    with database.session(urgent=True) as session:
        assert session.execute(text("SELECT 1")).scalar_one() == 1
