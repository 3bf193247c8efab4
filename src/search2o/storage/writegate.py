"""One SQLite writer at a time per process, handed over in order, with a priority lane.

SQLite lets one connection write at a time (SQLite docs, "File Locking And Concurrency In
SQLite Version 3"; in WAL mode too, "Write-Ahead Logging" §2.2). A connection that finds the
write lock taken does not queue: its busy handler sleeps and tries again, backing off to 100 ms
between tries (``sqlite3_busy_timeout``; the delays 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50,
100 ms of ``sqliteDefaultBusyCallback`` in SQLite's ``main.c``). Under many writing threads the
lock is taken by whoever tries at the right moment, so a writer that has waited longest,
sleeping 100 ms between tries, keeps losing to newer ones: with fifty answers writing, a Slack
acknowledgement's one insert waited up to a second while the lock was free more than half of
the time (docs/slack.md, "Measured").

:class:`WriteGate` queues the writers of one process in front of the lock instead: a thread
about to start a write transaction takes the gate, in arrival order, and gives it back when
the transaction ends; a writer marked urgent (:func:`urgent_writes`: an acknowledgement that a
messenger waits for) goes before the waiting ones. :class:`GatedConnection` does this for every
connection of a :class:`~search2o.storage.db.Database` on SQLite. The gate only orders the
writers: the database's own lock still guarantees exclusion, other processes still meet the busy
handler, and a writer that waits longer than the busy timeout goes on without the gate (so a
thread waiting on itself ends as it did before: ``database is locked`` after the timeout).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import sqlite3
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["GatedConnection", "WriteGate", "urgent_writes"]

_urgent: ContextVar[bool] = ContextVar("search2o_urgent_writes", default=False)
# The statements before which Python's sqlite3 opens a transaction itself (Python docs,
# sqlite3, "Transaction control via the isolation_level attribute"): the first of them in a
# transaction is where the write lock is taken.
_WRITES = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE"})


@contextlib.contextmanager
def urgent_writes() -> Iterator[None]:
    """Mark the write transactions started inside as urgent (in this thread or task)."""
    token = _urgent.set(True)
    try:
        yield
    finally:
        _urgent.reset(token)


class WriteGate:
    """The queue of one process's writers in front of SQLite's write lock (module docstring).

    Args:
        wait_s: how long a writer waits for the gate before it goes on without it (seconds;
            the connections' busy timeout).

    Re-entrant per thread: a thread holding the gate passes again (a second connection of the
    same thread then meets SQLite's lock, as without the gate). Thread-safe.
    """

    def __init__(self, wait_s: float) -> None:
        self._wait_s = wait_s
        self._lock = threading.Lock()
        self._holder: int | None = None
        self._holds = 0
        self._waiting: list[tuple[int, int, threading.Event, int]] = []
        self._order = itertools.count()

    def enter(self) -> bool:
        """Wait for the gate; ``False`` when ``wait_s`` passed first (go on without it)."""
        me = threading.get_ident()
        with self._lock:
            if self._holder is None or self._holder == me:
                self._holder = me
                self._holds += 1
                return True
            turn = threading.Event()
            entry = (0 if _urgent.get() else 1, next(self._order), turn, me)
            heapq.heappush(self._waiting, entry)
        if turn.wait(self._wait_s):
            return True
        with self._lock:
            if turn.is_set():  # handed over just as the wait ended
                return True
            self._waiting.remove(entry)
            heapq.heapify(self._waiting)
            return False

    def leave(self) -> None:
        """Give the gate back (once per :meth:`enter` that returned ``True``)."""
        with self._lock:
            self._holds -= 1
            if self._holds > 0:
                return
            self._holder = None
            if self._waiting:
                _, _, turn, thread = heapq.heappop(self._waiting)
                self._holder, self._holds = thread, 1
                turn.set()


class GatedConnection(sqlite3.Connection):
    """A ``sqlite3`` connection whose write transactions pass its process's :class:`WriteGate`.

    Created by ``sqlite3.connect(..., factory=GatedConnection)``; :attr:`gate` is set by the
    database right after (until then, and with ``None``, writes are not gated). The gate is
    taken before the statement that opens a write transaction and given back when the
    transaction commits, rolls back or the connection closes.
    """

    gate: WriteGate | None = None
    _gated = False

    def cursor(self, factory: Any = None) -> Any:
        """Return sqlite3's cursor, gated (``factory`` defaults to the gated one)."""
        return super().cursor(factory or _GatedCursor)

    def commit(self) -> None:
        """Commit (sqlite3's), then give the gate back."""
        try:
            super().commit()
        finally:
            self._release()

    def rollback(self) -> None:
        """Roll back (sqlite3's), then give the gate back."""
        try:
            super().rollback()
        finally:
            self._release()

    def close(self) -> None:
        """Close (sqlite3's), then give the gate back."""
        try:
            super().close()
        finally:
            self._release()

    def _before(self, statement: str) -> None:
        if self._gated or self.gate is None or self.in_transaction:
            return
        words = statement.lstrip()[:8].split(None, 1)
        if words and words[0].upper() in _WRITES:
            self._gated = self.gate.enter()

    def _after(self) -> None:
        # A write that failed before its transaction began, or ran outside one, ends here.
        if self._gated and not self.in_transaction:
            self._release()

    def _release(self) -> None:
        if self._gated:
            self._gated = False
            assert self.gate is not None
            self.gate.leave()


class _GatedCursor(sqlite3.Cursor):
    """The cursor of a :class:`GatedConnection`: takes the gate before a transaction's write."""

    connection: GatedConnection

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        """Run ``sql`` (sqlite3's), taking the gate first when it opens a write transaction."""
        self.connection._before(sql)
        try:
            return super().execute(sql, parameters)
        finally:
            self.connection._after()

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> Any:
        """Run ``sql`` for each parameter set (sqlite3's), gated as :meth:`execute`."""
        self.connection._before(sql)
        try:
            return super().executemany(sql, seq_of_parameters)
        finally:
            self.connection._after()
