"""The memory store: long-term facts of each user, keyed by (agent, label), searched by meaning.

* **Keying.** A memory belongs to one user and is identified by the storing agent's name and a
  label (unique ``(user_id, agent, label)``). Storing under an existing label replaces it: the
  label holds the current truth of one fact, and ``createdAt`` becomes the time of that store.
* **Search.** :meth:`MemoryStore.search` embeds the query, scores the user's memories by
  cosine similarity plus a weighted BM25 share over keyed term hashes and, for a question
  asking *when*, a bonus for memories that say when
  (:mod:`search2o.memory.ranking`, :mod:`search2o.memory.lexical`; the user filter is inside
  the SQL; each process keeps users' vectors in :mod:`search2o.memory.cache`, checked against
  the database's memory counters on every search) and returns those scoring at least
  ``memory.min_score``, best first. It records the
  time the returned memories were retrieved (in the run's changes, written with the run's
  state). The query text is used for the embedding and its term hashes only: it is never
  written to the database or a log, nor put in an error message.
* **Unit of work.** :meth:`MemoryStore.apply` writes a run's :class:`MemoryChanges` in the
  caller's transaction (the one that saves the conversation state), so a run that fails stores
  and deletes nothing. Writers of one user are serialised by a lock on the user's row (``FOR NO
  KEY UPDATE`` on PostgreSQL; SQLite's single writer), so the bound below is exact.
* **Bounds.** At most ``memory.limits[plan]`` memories per user. Storing a new label beyond the
  bound evicts the least recently retrieved memories (``COALESCE(last_retrieved_at,
  created_at)``, oldest first; the memories the command just wrote last). Replacing a label
  never evicts.
* **Encryption.** Each text is sealed with the user's data key (kind ``memory``, scope
  ``user:<id>``, :meth:`search2o.crypto.vault.Vault.user_sealer`) together with its agent and
  label, so a blob moved to another row fails to open.

Embedding-model changes need no reindex: memories whose vectors were made by another model (or
that have no term hashes, stored before revision 0007) are re-embedded when a search meets them.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    case,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.crypto.keys import WrappedKey
from search2o.crypto.vault import Sealer, Vault
from search2o.errors import InputError, NotFoundError
from search2o.memory.cache import EVERY_USER_COUNTER, VectorCache, user_counter
from search2o.memory.changes import MemoryChanges, check_agent, check_label, text_problem
from search2o.memory.increments import refreshed
from search2o.memory.lexical import encode_hashes, term_hashes, terms
from search2o.memory.model import MemoryHit, MemoryOutcome, MemoryRecord, Rejection
from search2o.memory.ranking import (
    Pool,
    best,
    candidates,
    embedding_text,
    hybrid_scores,
    scope,
    vectors,
)
from search2o.memory.rows import (
    _HITS,
    KIND,
    Key,
    _check_int,
    _check_query,
    _delete_keys,
    _keys_condition,
    _lock_user,
    _open,
    _stamp_statement,
    _touch,
    _unlocked,
)
from search2o.memory.settings import MemorySettings
from search2o.providers.embeddings import Embedder
from search2o.storage import dialect
from search2o.storage.db import Database, bump_counter
from search2o.storage.memory_models import Memory
from search2o.storage.models import utcnow

if TYPE_CHECKING:
    from search2o.config import Settings

__all__ = ["KIND", "MemoryStore"]


TERMS_PURPOSE = "memory-terms"
"""What the key of a user's term hashes is derived for (:meth:`Sealer.derive`)."""

Vector = npt.NDArray[np.float32]


_MAX_LIST = 1000


class MemoryStore:
    """Long-term memories of users: store, replace, delete, evict, search (see the module doc).

    Args:
        database: where ``memories`` and ``user_keys`` live.
        vault: seals texts with each user's data key.
        embedder: embeds memories and queries; a memory's vector is tagged with its model.
        settings: :class:`~search2o.memory.settings.MemorySettings` (or the whole
            :class:`~search2o.config.Settings`, whose ``memory`` is used).

    Thread-safe. Between calls it keeps only :attr:`cache` (users' vectors and term hashes,
    checked against the database on every search: :mod:`search2o.memory.cache`).
    """

    def __init__(
        self,
        database: Database,
        vault: Vault,
        embedder: Embedder,
        settings: MemorySettings | Settings,
    ) -> None:
        self._db = database
        self._vault = vault
        self.embedder = embedder
        self.settings = settings if isinstance(settings, MemorySettings) else settings.memory
        self.cache = VectorCache(int(self.settings.cache_mb * 2**20))

    # --- the unit of work -------------------------------------------------------------------

    def new_changes(self, *, validation: bool = False) -> MemoryChanges:
        """Return empty changes for one run, checking texts against ``memory.max_text_chars``.

        Args:
            validation: a validation run: commands are checked, :meth:`apply` writes nothing.

        """
        return MemoryChanges(max_text_chars=self.settings.max_text_chars, validation=validation)

    def prepare(self, changes: MemoryChanges) -> None:
        """Embed the texts ``changes`` will store, before the transaction opens.

        Optional: :meth:`apply` embeds what is missing, but then inside the transaction.

        Raises:
            ProviderError: the embedding model failed.

        """
        model = self.embedder.model_id
        if changes.vectors_model != model:
            changes.vectors.clear()
            changes.vectors_model = model
        texts = [
            embedding_text(label, text)
            for (_, label), text in changes.pending.items()
            if text is not None and text_problem(text, self.settings.max_text_chars) is None
        ]
        missing = [t for t in dict.fromkeys(texts) if t not in changes.vectors]
        if missing:
            for text, vector in zip(missing, self.embedder.embed(missing), strict=True):
                changes.vectors[text] = vector

    def apply(
        self, session: Session, principal: Principal, changes: MemoryChanges
    ) -> MemoryOutcome:
        """Apply a completed run's memory changes inside the caller's transaction.

        Records the retrievals of the run's searches, then deletes, then stores (insert or
        replace by label), then evicts beyond the plan's bound when a new label was stored. If
        the caller's transaction rolls back, nothing of it stays. A validation run's changes are
        never applied.

        Args:
            session: the transaction that saves the run's conversation state.
            principal: the user the run belongs to.
            changes: what the run recorded.

        Returns:
            What was stored, replaced, deleted, evicted and rejected.

        Raises:
            NotFoundError: the user no longer exists.
            ProviderError: the embedding model failed (call :meth:`prepare` first to fail
                before the transaction).
            KeyUnavailableError: the user's data key cannot be unwrapped.

        """
        rejected = list(changes.rejected)
        if changes.validation:
            return MemoryOutcome(applied=False, rejected=tuple(rejected))
        _touch(session, principal.user_id, changes.retrieved)
        stores: dict[Key, str] = {}
        deletes: list[Key] = []
        for key, text in changes.pending.items():
            if text is None:
                deletes.append(key)
            elif (problem := text_problem(text, self.settings.max_text_chars)) is not None:
                rejected.append(Rejection(key[0], key[1], problem))
            else:
                stores[key] = text
        if not stores and not deletes:
            return MemoryOutcome(rejected=tuple(rejected))
        self.prepare(changes)
        user_id = principal.user_id
        plan = _lock_user(session, user_id)
        deleted = _delete_keys(session, user_id, deletes)
        stored, replaced = self._upsert(session, user_id, stores, changes)
        evicted = self._evict(session, user_id, plan, stores) if stored else ()
        bump_counter(session, user_counter(user_id))  # last: see memory.cache
        return MemoryOutcome(
            stored=stored,
            replaced=replaced,
            deleted=deleted,
            evicted=evicted,
            rejected=tuple(rejected),
        )

    def _upsert(
        self, session: Session, user_id: int, stores: dict[Key, str], changes: MemoryChanges
    ) -> tuple[tuple[Key, ...], tuple[Key, ...]]:
        if not stores:
            return (), ()
        existing = {
            (r[0], r[1])
            for r in session.execute(
                select(Memory.agent, Memory.label).where(
                    Memory.user_id == user_id, _keys_condition(stores)
                )
            )
        }
        sealer = self._vault.user_sealer(session, user_id, create=True)
        key = sealer.derive(TERMS_PURPOSE)
        now = utcnow()
        for agent, label in sorted(stores):
            text = stores[(agent, label)]
            embedded = embedding_text(label, text)
            values: dict[str, Any] = {
                "sealed": sealer.seal(KIND, {"agent": agent, "label": label, "text": text}),
                "model_id": changes.vectors_model,
                "embedding": changes.vectors[embedded],
                "terms": encode_hashes(term_hashes(key, terms(embedded))),
                "created_at": now,
                "last_retrieved_at": None,
            }
            session.execute(
                dialect.insert(session, Memory)
                .values(user_id=user_id, agent=agent, label=label, **values)
                .on_conflict_do_update(index_elements=["user_id", "agent", "label"], set_=values)
            )
        stored = tuple(k for k in sorted(stores) if k not in existing)
        replaced = tuple(k for k in sorted(stores) if k in existing)
        return stored, replaced

    def _evict(
        self, session: Session, user_id: int, plan: str, written: Mapping[Key, str]
    ) -> tuple[Key, ...]:
        bound = self.settings.limit_for(plan)
        held = session.scalar(
            select(func.count()).select_from(Memory).where(Memory.user_id == user_id)
        )
        excess = int(held or 0) - bound
        if excess <= 0:
            return ()
        just_written = case((_keys_condition(written), 1), else_=0)
        victims = session.execute(
            select(Memory.id, Memory.agent, Memory.label)
            .where(Memory.user_id == user_id)
            .order_by(
                just_written,
                func.coalesce(Memory.last_retrieved_at, Memory.created_at),
                Memory.id,
            )
            .limit(excess)
        ).all()
        session.execute(delete(Memory).where(Memory.id.in_([v[0] for v in victims])))
        return tuple((v[1], v[2]) for v in victims)

    def store(
        self,
        principal: Principal,
        agent: str,
        memories: Mapping[str, str],
        *,
        delete: Iterable[str] = (),
    ) -> MemoryOutcome:
        """Record one command's stores and deletes and apply them at once, in a transaction.

        For tools, the CLI and benchmarks; the Agent Engine uses :meth:`new_changes` and
        :meth:`apply` so that a run's memories commit with its state.

        Raises:
            InputError: the command is malformed (see :meth:`MemoryChanges.record`).

        """
        changes = self.new_changes()
        changes.record(agent, store=memories, delete=delete)
        self.prepare(changes)
        with self._db.session() as session:
            return self.apply(session, principal, changes)

    # --- reading ----------------------------------------------------------------------------

    def search(
        self,
        principal: Principal,
        query: str,
        *,
        agent: str | None = None,
        label: str | None = None,
        limit: int = 10,
        session: Session | None = None,
        touch: bool = True,
        min_score: float | None = None,
        changes: MemoryChanges | None = None,
    ) -> builtins.list[MemoryHit]:
        """Return the user's memories that match ``query`` by meaning, best first.

        Args:
            principal: whose memories are searched (never anyone else's).
            query: free text; used for the embedding only, never stored or logged.
            agent: only memories stored by this agent (default: every agent of the user).
            label: only memories with this label.
            limit: at most this many, 1..``memory.max_limit``.
            session: read (and record the retrieval) in the caller's transaction.
            touch: record the retrieval time of the hits now (eviction keeps recently retrieved
                memories); the owner's own look-ups (API, CLI) pass ``False``.
            min_score: override ``memory.min_score`` (calibration and benchmarks).
            changes: a run's changes: the retrieval is recorded there and written by
                :meth:`apply` with the run's state, in the transaction the run commits anyway
                (``touch`` is then ignored); a search stays a read.

        Returns:
            At most ``limit`` hits with a score (:func:`search2o.memory.ranking.hybrid_scores`)
            of at least the threshold; ``[]`` when nothing is relevant enough or the user has
            no memories.

        Raises:
            InputError: ``query`` (not a string, empty, too long), ``limit``, ``agent`` or
                ``label`` break a rule. The message never quotes the query.
            ProviderError: the embedding model failed.
            IntegrityCheckError: a sealed memory was altered or moved.

        """
        text = _check_query(query, self.settings.max_query_chars)
        limit = _check_int(limit, "limit", 1, self.settings.max_limit)
        if agent is not None:
            check_agent(agent, "agent")
        if label is not None:
            check_label(label, "label")
        threshold = self.settings.min_score if min_score is None else float(min_score)
        vector = self.embedder.embed([text])[0]
        with self._session(session, autocommit=True) as s:
            if session is None and self.cache.enabled:
                cached = self._cached_pool(s, principal.user_id, vector, agent, label)
                if cached is None:
                    return []
                pool, sealer = cached
            else:
                pool = candidates(
                    s, vector, self.embedder.model_id, principal.user_id, agent, label
                )
                if not pool.ids.size and not pool.stale:
                    return []
                sealer = self._vault.user_sealer(s, principal.user_id)
            key = sealer.derive(TERMS_PURPOSE)
            if pool.stale:
                self._refresh(s, sealer, key, pool, vector, write=touch)
            scores = hybrid_scores(pool, key, text, self.settings.lexical_weight)
            scored = best(pool.ids, scores, limit, threshold)
            if not scored:
                return []
            ids = [memory_id for memory_id, _ in scored]
            rows = {
                r.id: r
                for r in s.connection().execute(_HITS, {"user_id": principal.user_id, "ids": ids})
            }
            hits = [
                MemoryHit(row.agent, row.label, _open(sealer, row), row.created_at, score)
                for memory_id, score in scored
                if (row := rows.get(memory_id)) is not None
            ]
            found = [m for m in ids if m in rows]
            if changes is not None:
                changes.note_retrieved(found)
            elif touch:
                _touch(s, principal.user_id, found)
        return hits

    def _cached_pool(
        self,
        session: Session,
        user_id: int,
        query: Vector,
        agent: str | None,
        label: str | None,
    ) -> tuple[Pool, Sealer] | None:
        """Return the search's pool from :attr:`cache` (filled on a miss) and the user's sealer.

        One statement reads the stamp (:mod:`search2o.memory.cache`) and the key row; only a
        miss reads the memories. ``None``: the user has no memories in scope (or no data key,
        so none at all).
        """
        statement = _stamp_statement(dialect.is_postgres(session))
        params = {"user_id": user_id, "counter": user_counter(user_id)}
        row = session.connection().execute(statement, params).first()
        if row is None:
            return None
        wrapped = WrappedKey(row.kek_id, row.kek_version, bytes(row.wrapped))
        sealer = self._vault.user_sealer_of(user_id, wrapped)
        model_id = self.embedder.model_id
        scope_key = (user_id, agent, label, model_id)
        stamp = (row.own, row.every, wrapped.blob)
        stored = self.cache.get(scope_key, stamp)
        if stored is None:
            previous = self.cache.latest(scope_key)
            if previous is not None:
                stored = refreshed(session, previous, model_id, user_id, agent, label)
            if stored is None:
                stored = vectors(session, model_id, user_id, agent, label)
            if not stored.stale:
                self.cache.put(scope_key, stamp, stored)
        if not stored.ids.size and not stored.stale:
            return None
        return stored.pool(query), sealer

    def _refresh(
        self,
        session: Session,
        sealer: Sealer,
        key: bytes,
        pool: Pool,
        query: Vector,
        *,
        write: bool,
    ) -> None:
        """Re-embed and hash memories stored by another model or an earlier revision (rare).

        With ``write``, the new vectors and hashes are stored, skipping rows another
        transaction holds (``FOR UPDATE SKIP LOCKED`` on PostgreSQL: an apply in flight will
        rewrite them); the owner's own look-ups (``touch=False``) stay read-only.
        """
        rows = builtins.list(
            session.scalars(select(Memory).where(Memory.id.in_(pool.stale)).order_by(Memory.id))
        )
        if not rows:
            return
        texts = [embedding_text(row.label, _open(sealer, row)) for row in rows]
        vectors = self.embedder.embed(texts)
        blobs = [encode_hashes(term_hashes(key, terms(t))) for t in texts]
        pool.extend([row.id for row in rows], vectors @ query, blobs)
        if not write:
            return
        model_id = self.embedder.model_id
        for row, vector, blob in zip(rows, vectors, blobs, strict=True):
            session.execute(
                update(Memory)
                .where(Memory.id.in_(_unlocked(row.user_id, Memory.id == row.id)))
                .values(model_id=model_id, embedding=vector, terms=blob)
                .execution_options(synchronize_session=False)
            )
        # Last (see memory.cache); in an autocommit session each statement also commits on its
        # own, and a reader must never see the new counter value with the old rows.
        for user_id in sorted({row.user_id for row in rows}):
            bump_counter(session, user_counter(user_id))

    def list(
        self,
        principal: Principal,
        *,
        agent: str | None = None,
        limit: int = 100,
        offset: int = 0,
        session: Session | None = None,
    ) -> builtins.list[MemoryRecord]:
        """Return the user's memories ordered by agent, then label.

        Args:
            agent: only this agent's.
            limit: 1..1000.
            offset: 0 or more.

        Raises:
            InputError: ``agent``, ``limit`` or ``offset`` break a rule.
            IntegrityCheckError: a sealed memory was altered or moved.

        """
        if agent is not None:
            check_agent(agent, "agent")
        limit = _check_int(limit, "limit", 1, _MAX_LIST)
        offset = _check_int(offset, "offset", 0, 2**31 - 1)
        with self._session(session) as s:
            rows = builtins.list(
                s.scalars(
                    select(Memory)
                    .where(*scope(principal.user_id, agent, None))
                    .order_by(Memory.agent, Memory.label)
                    .limit(limit)
                    .offset(offset)
                )
            )
            if not rows:
                return []
            sealer = self._vault.user_sealer(s, principal.user_id)
            return [
                MemoryRecord(
                    row.agent, row.label, _open(sealer, row), row.created_at, row.last_retrieved_at
                )
                for row in rows
            ]

    def count(self, principal: Principal, *, agent: str | None = None) -> int:
        """Return how many memories the user holds (of ``agent`` only, when given)."""
        with self._db.session() as s:
            held = s.scalar(
                select(func.count())
                .select_from(Memory)
                .where(*scope(principal.user_id, agent, None))
            )
        return int(held or 0)

    # --- deleting ---------------------------------------------------------------------------

    def delete(
        self, principal: Principal, agent: str, label: str, *, session: Session | None = None
    ) -> None:
        """Delete one of the user's memories; it is never returned again.

        Raises:
            NotFoundError: no such memory of this user (another user's looks the same).

        """
        missing = NotFoundError(f"memory {agent}/{label} not found")
        try:
            check_agent(agent)
            check_label(label)
        except InputError:
            raise missing from None
        with self._session(session) as s:
            result = s.execute(delete(Memory).where(*scope(principal.user_id, agent, label)))
            if not getattr(result, "rowcount", 0):
                raise missing
            bump_counter(s, user_counter(principal.user_id))  # last: see memory.cache

    def delete_agent(self, agent: str, *, session: Session | None = None) -> int:
        """Delete every memory ``agent`` stored, for every user (the agent was deleted).

        Returns:
            How many memories were deleted.

        Raises:
            InputError: ``agent`` is not an agent name.

        """
        check_agent(agent, "agent")
        with self._session(session) as s:
            result = s.execute(delete(Memory).where(Memory.agent == agent))
            count = int(getattr(result, "rowcount", 0) or 0)
            if count:
                bump_counter(s, EVERY_USER_COUNTER)
            return count

    @contextmanager
    def _session(self, session: Session | None, *, autocommit: bool = False) -> Iterator[Session]:
        if session is None and autocommit:
            with self._db.autocommit_session() as own:
                yield own
        else:
            with self._db.within(session) as own:
                yield own
