"""A per-process cache of users' memory vectors and term hashes, checked against the database.

A memory search ranks every memory of the user in scope (:mod:`search2o.memory.ranking`). On
PostgreSQL at 500 memories, reading them (ids, cosines from pgvector and 80 KB of term hashes)
was the largest part of a search; with this cache a repeated search reads one short row instead
(:meth:`search2o.memory.store.MemoryStore.search`) and scores the kept vectors with NumPy.

**When an entry is still right.** An entry is kept with the *stamp* it was read under and used
only while the database shows the same stamp:

* the user's memory counter ``memory:<user_id>`` (table ``counters``), bumped in the same
  transaction as every write that changes what a search ranks: :meth:`MemoryStore.apply`,
  :meth:`MemoryStore.delete`, the re-embedding of stale rows. Writers of one user are serialised
  on that row, so one committed value names one committed set of memories. The counter row is
  never deleted, so the value only grows, even when a user id is reused;
* the global counter ``memory``, bumped by :meth:`MemoryStore.delete_agent` (every user's
  memories of one agent);
* the user's wrapped data key: a new user (or a reused id) has a new random key;
* on PostgreSQL each counter's ``xmin`` (the transaction that last bumped it): a backup
  restored under running servers sets a counter back, and later writes reach the cached value
  again, but not the cached transaction.

The bump is each write's **last** statement. It locks the counter row until the transaction
ends; taken after every memory row the write locks, no writer waits for a memory row while
holding a counter, so two writers cannot deadlock on it (PostgreSQL). With the bump first, a
run's apply (which touches the rows it retrieved before anything else) and a deletion through
the API could each hold what the other waits for.

On PostgreSQL an outdated entry is brought up to date by reading only the rows written since
(:mod:`search2o.memory.increments`); SQLite reads the scope again (1.3 ms at 500 memories).

The stamp is read *before* the memories, in separate statements of an autocommit session: a
write committed in between makes the entry older than its content, never newer, so the next
search reads again. Searches inside a caller's transaction (which could see its own uncommitted
writes) never use or fill the cache.

**Bound.** Entries are evicted least recently used beyond ``memory.cache_mb`` (about 0.85 MB
per user at 500 memories of 384 dimensions); 0 turns the cache off. Nothing in it is secret
beyond what the database holds in the clear: ids, vectors and keyed term hashes, no text.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from search2o.memory.ranking import Vectors

__all__ = ["EVERY_USER_COUNTER", "VectorCache", "user_counter"]

EVERY_USER_COUNTER = "memory"
"""The counter bumped by a write that changes many users' memories at once (an agent deleted)."""


def user_counter(user_id: int) -> str:
    """Return the name of ``user_id``'s memory counter: ``memory:<user_id>``."""
    return f"memory:{user_id}"


class VectorCache:
    """Least-recently-used :class:`~search2o.memory.ranking.Vectors` by scope, bounded in bytes.

    Args:
        max_bytes: the bound on the kept entries' :attr:`Vectors.nbytes`; 0 keeps nothing.

    Thread-safe (one lock around the dictionary; entries are never changed once put).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self._entries: OrderedDict[Hashable, tuple[Hashable, Vectors]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        """Whether anything can be kept (``max_bytes > 0``)."""
        return self.max_bytes > 0

    @property
    def nbytes(self) -> int:
        """Bytes the kept entries hold now."""
        return self._bytes

    def __len__(self) -> int:
        """How many entries are kept."""
        return len(self._entries)

    def get(self, scope: Hashable, stamp: Hashable) -> Vectors | None:
        """Return the entry of ``scope`` if it was put with ``stamp``, else ``None``."""
        with self._lock:
            found = self._entries.get(scope)
            if found is None or found[0] != stamp:
                return None
            self._entries.move_to_end(scope)
            return found[1]

    def latest(self, scope: Hashable) -> Vectors | None:
        """Return the entry of ``scope`` whatever its stamp: the base of an incremental update.

        Only :func:`search2o.memory.increments.refreshed` may use an outdated entry, and only
        to learn which rows it already holds.
        """
        with self._lock:
            found = self._entries.get(scope)
            return None if found is None else found[1]

    def put(self, scope: Hashable, stamp: Hashable, vectors: Vectors) -> None:
        """Keep ``vectors`` for ``scope`` under ``stamp``, evicting the least recently used.

        An entry larger than the whole bound is not kept.
        """
        size = vectors.nbytes
        with self._lock:
            if scope in self._entries:
                self._drop(scope)
            if size > self.max_bytes:
                return
            while self._entries and self._bytes + size > self.max_bytes:
                self._drop(next(iter(self._entries)))
            self._entries[scope] = (stamp, vectors)
            self._bytes += size

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, scope: Hashable) -> None:
        _, vectors = self._entries.pop(scope)
        self._bytes -= vectors.nbytes
