"""Ranking one user's memories: cosine similarity plus a weighted lexical share, per backend.

``score = cosine(query, memory) + memory.lexical_weight x BM25 share`` (the share is in
``[0, 1)``, :mod:`search2o.memory.lexical`), plus :data:`search2o.memory.temporal.BOOST` for
a memory stating a relative time when the question asks *when* (:func:`hybrid_scores`);
memories scoring at least ``memory.min_score`` are relevant, best first. The numbers were
chosen by measurement (``docs/memory.md``): the weight 1.0 and the bonus on 3 of LoCoMo's 7
conversations and checked on the other 4, where evidence recall@10 rose from 0.620 (weight
0.5, no bonus) to 0.671 against bm25s's 0.564; the threshold is the highest one at which the
labelled set in ``tests/memory/labelled.py`` still finds every relevant pair at that weight.

The user filter is part of every query: a search never reads another user's rows.

* :func:`vectors` (both backends, what :mod:`search2o.memory.cache` keeps): the user's vectors
  (at most ``memory.limits`` rows, 500 by default: 750 KB at 384 dimensions) are read raw with
  ``WHERE user_id = :u`` and scored exactly with NumPy (:meth:`Vectors.pool`).
* :func:`candidates` (the cache turned off, or a search in the caller's transaction): on
  SQLite the same; on PostgreSQL pgvector computes the cosine of every row of the user in SQL
  (``1 - (embedding <=> :q)``) and only the similarities travel. A user's few hundred rows are
  found through ``ix_memories_user_id`` and scored exactly; an HNSW index would only lose
  recall under such a selective filter (pgvector README, "Filtering").

What is embedded is the memory's text, prefixed by its label's words when the label carries
words (``preferred_airline: The user prefers to fly KLM``) but not when it is an identifier
(``D1-3``): a meaningful label raised the labelled set's best F1 from 0.89 to 0.95, an
identifier label cost LoCoMo recall (0.531 -> 0.497).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    ColumnElement,
    LargeBinary,
    Select,
    bindparam,
    select,
    type_coerce,
)
from sqlalchemy.orm import Session

from search2o.errors import InputError, StorageError
from search2o.memory.lexical import bm25_shares, holds_any, term_hashes, terms
from search2o.memory.temporal import BOOST, asks_when, time_terms
from search2o.storage import dialect
from search2o.storage.memory_models import Memory

__all__ = [
    "Pool",
    "Vectors",
    "best",
    "candidates",
    "embedding_text",
    "hybrid_scores",
    "scope",
    "vectors",
]


_SEPARATORS = re.compile(r"[_.-]+")
_WORDY = re.compile(r"[^\W\d_]{3,}")


def embedding_text(label: str, text: str) -> str:
    """Return what is embedded (and hashed into terms) for a memory.

    ``"<label words>: <text>"`` when some part of the label (split at ``_ . -``) is a word of
    three or more letters, else ``text`` alone.
    """
    parts = [p for p in _SEPARATORS.split(label) if p]
    if any(_WORDY.fullmatch(p) for p in parts):
        return f"{' '.join(parts)}: {text}"
    return text


def scope(user_id: int, agent: str | None, label: str | None) -> list[ColumnElement[bool]]:
    """Return the WHERE conditions of one user's memories, optionally one agent's or label's."""
    conditions: list[ColumnElement[bool]] = [Memory.user_id == user_id]
    if agent is not None:
        conditions.append(Memory.agent == agent)
    if label is not None:
        conditions.append(Memory.label == label)
    return conditions


@dataclass
class Pool:
    """The memories a search ranks: ids, cosine similarities and stored term hashes.

    Attributes:
        ids: memory ids, shape ``(n,)``.
        cosine: their cosine similarity to the query, shape ``(n,)``.
        terms: their :func:`~search2o.memory.lexical.encode_hashes` blobs, ``n`` of them.
        stale: ids of the scope's memories that were embedded by another model or have no
            term hashes yet (stored by an earlier revision): the caller re-embeds them.

    """

    ids: npt.NDArray[np.int64]
    cosine: npt.NDArray[np.float32]
    terms: list[bytes]
    stale: list[int] = field(default_factory=list)

    def extend(self, ids: list[int], cosine: npt.NDArray[np.float32], terms: list[bytes]) -> None:
        """Add re-embedded memories to the pool."""
        self.ids = np.concatenate([self.ids, np.asarray(ids, dtype=np.int64)])
        self.cosine = np.concatenate([self.cosine, cosine.astype(np.float32)])
        self.terms = [*self.terms, *terms]


@dataclass(frozen=True)
class Vectors:
    """The memories in one scope as stored: ids, raw vectors and term hashes (no text).

    What :class:`search2o.memory.cache.VectorCache` keeps; :meth:`pool` scores them.

    Attributes:
        ids: memory ids in ascending order, shape ``(n,)``.
        matrix: their unit-length vectors, float32, shape ``(n, d)`` (``(0, 0)`` when empty).
        terms: their term-hash blobs, ``n`` of them.
        stale: ids of memories embedded by another model or without term hashes.
        versions: PostgreSQL only: each row's version (its ``xmin``, the transaction that
            wrote it), aligned with ``ids``, so that an update reads only the rows written
            since (:func:`search2o.memory.increments.refreshed`); ``None`` on SQLite.

    """

    ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    terms: list[bytes]
    stale: list[int]
    versions: npt.NDArray[np.int64] | None = None

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays and blobs (what a cache bound counts)."""
        versions = 0 if self.versions is None else self.versions.nbytes
        return int(
            self.ids.nbytes + self.matrix.nbytes + versions + sum(len(t) for t in self.terms)
        )

    @classmethod
    def none(cls, stale: list[int], versions: npt.NDArray[np.int64] | None = None) -> Vectors:
        """Return a scope without current memories (``stale`` may hold some of other models)."""
        return cls(_NO_IDS, _NO_MATRIX, [], stale, versions)

    def pool(self, query: npt.NDArray[np.float32]) -> Pool:
        """Return the pool of a search for ``query`` (shape ``(d,)``): cosines by NumPy."""
        if not self.ids.size:
            return Pool(np.empty(0, np.int64), np.empty(0, np.float32), [], list(self.stale))
        cosine = (self.matrix @ query).astype(np.float32)
        return Pool(self.ids, cosine, list(self.terms), list(self.stale))


def vectors(
    session: Session,
    model_id: str,
    user_id: int,
    agent: str | None = None,
    label: str | None = None,
) -> Vectors:
    """Read every memory in scope with its raw vector (one statement on either backend).

    PostgreSQL sends the vectors in pgvector's binary form (``vector_send``: int16 dimension,
    int16 unused, then big-endian float4s; pgvector ``src/vector.c``), each after its id,
    concatenated in one aggregated row; SQLite hands back each row's float32 BLOB.

    Args:
        model_id: vectors of other models are not read; their ids land in ``stale``.
        user_id: whose memories (always part of the WHERE clause).
        agent: only this agent's memories.
        label: only memories with this label.

    Raises:
        StorageError: the database failed.

    """
    if dialect.is_postgres(session):
        sql = _pg_vectors_statement(agent is not None, label is not None)
        params = {"user_id": user_id, "agent": agent, "label": label, "model_id": model_id}
        row = dialect.fetch_one_binary(session, sql, params)
        ids, blob, term_blob, lengths, stale, versions = row
        if not ids:
            return Vectors.none(list(stale or []), _NO_IDS)
        order = np.asarray(ids, dtype=np.int64)
        return Vectors(
            order,
            pg_matrix(bytes(blob), order),
            split_blobs(term_blob, lengths),
            list(stale or []),
            np.asarray(versions, dtype=np.int64),
        )
    statement = _statement(agent is not None, label is not None)
    params = {"user_id": user_id, "agent": agent, "label": label, "model_id": model_id}
    # Core, not ORM, execution of a statement built once: for a user's 500 rows this saves
    # ~2 ms of ORM row handling and SQL expression building per search.
    rows_read = session.connection().execute(statement, params).all()
    found: list[tuple[int, bytes, Any]] = []
    stale_ids: list[int] = []
    for memory_id, current, term_hashes_blob, value in sorted(rows_read, key=lambda r: r[0]):
        if current and term_hashes_blob is not None:
            found.append((memory_id, term_hashes_blob, value))
        else:
            stale_ids.append(memory_id)
    if not found:
        return Vectors.none(stale_ids)
    matrix = np.frombuffer(b"".join(f[2] for f in found), dtype=np.float32)
    return Vectors(
        np.asarray([f[0] for f in found], dtype=np.int64),
        matrix.reshape(len(found), -1),
        [f[1] for f in found],
        stale_ids,
    )


_NO_IDS = np.empty(0, np.int64)
_NO_MATRIX = np.empty((0, 0), np.float32)


def pg_matrix(data: bytes, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """Return the vectors of :func:`_pg_vectors_statement`'s records in the order of ``ids``.

    Each record is ``int4send(id) || vector_send(embedding)``: a big-endian int32 id, then
    pgvector's binary form (int16 dimension, int16 unused, big-endian float4s). The records
    come unordered (see the statement) and are put in ``ids`` order here.

    Raises:
        StorageError: the records' ids are not ``ids`` (the statement's columns disagree).

    """
    dimensions = int.from_bytes(data[4:6], "big")
    rows = np.frombuffer(data, dtype=np.uint8).reshape(-1, 8 + 4 * dimensions)
    found = rows[:, :4].copy().view(">i4").ravel().astype(np.int64)
    order = np.argsort(found, kind="stable")
    if found.size != ids.size or not np.array_equal(found[order], ids):
        raise StorageError("memory vectors and ids disagree")
    return rows[order, 8:].copy().view(">f4").astype(np.float32)


def split_blobs(blob: Any, lengths: Any) -> list[bytes]:
    """Cut PostgreSQL's concatenated term blobs back into one blob per memory."""
    ends = np.cumsum(lengths).tolist()
    data = bytes(blob or b"")
    starts = [0, *ends[:-1]]
    return [data[a:b] for a, b in zip(starts, ends, strict=True)]


def candidates(
    session: Session,
    query: npt.NDArray[np.float32],
    model_id: str,
    user_id: int,
    agent: str | None = None,
    label: str | None = None,
) -> Pool:
    """Return every memory in scope with its cosine similarity to ``query`` (one statement).

    Args:
        query: the unit-length query vector, shape ``(d,)``.
        model_id: vectors of other models are not compared; their ids land in ``stale``.
        user_id: whose memories (always part of the WHERE clause).
        agent: only this agent's memories.
        label: only memories with this label.

    """
    if dialect.is_postgres(session):
        sql = _pg_statement(int(query.shape[0]), agent is not None, label is not None)
        params = {
            "user_id": user_id,
            "agent": agent,
            "label": label,
            "model_id": model_id,
            "query": vector_literal(query),
        }
        return _aggregated(dialect.fetch_one_binary(session, sql, params))
    return vectors(session, model_id, user_id, agent, label).pool(query)


def _aggregated(row: Any) -> Pool:
    """Build the pool from PostgreSQL's one aggregated row (see :func:`_statement`).

    Columns: ids of current rows, their cosines, their term-hash blobs concatenated in the same
    order and each blob's length; then the ids of stale rows.
    """
    ids, cosine, blob, lengths, stale = row
    if not ids:
        return Pool(np.empty(0, np.int64), np.empty(0, np.float32), [], list(stale or []))
    return Pool(
        np.asarray(ids, dtype=np.int64),
        np.asarray(cosine, dtype=np.float32),
        split_blobs(blob, lengths),
        list(stale or []),
    )


@functools.lru_cache(maxsize=8)
def _statement(by_agent: bool, by_label: bool) -> Select[*tuple[Any, ...]]:
    """Build the SQLite candidates query.

    One row per memory: id, "made by the current model", term hashes, raw vector.
    """
    current = Memory.model_id == bindparam("model_id")
    conditions = [Memory.user_id == bindparam("user_id")]
    if by_agent:
        conditions.append(Memory.agent == bindparam("agent"))
    if by_label:
        conditions.append(Memory.label == bindparam("label"))
    value = type_coerce(Memory.embedding, LargeBinary)
    return select(Memory.id, current, Memory.terms, value).where(*conditions)


@functools.lru_cache(maxsize=64)
def _pg_statement(dimensions: int, by_agent: bool, by_label: bool) -> str:
    """Build the PostgreSQL candidates query (psycopg placeholders).

    pgvector computes the cosines and **one aggregated row** comes back, in binary
    (:func:`search2o.storage.dialect.fetch_one_binary`): ids, cosines, the term blobs
    concatenated, their lengths, stale ids. 500 rows of four columns cost the driver and
    SQLAlchemy more than the scoring itself (about 3 ms of a 7 ms search at 500 memories,
    measured with pyinstrument), one row of five arrays a fraction of that, and a third of
    that fraction again when the row is not parsed from text.
    """
    cosine = f"1 - (embedding::vector({dimensions}) <=> %(query)s::vector({dimensions}))"
    columns = [PG_IDS, f"array_agg(({cosine})::float4 ORDER BY id) FILTER (WHERE usable)"]
    return pg_aggregate([*columns, PG_TERMS, PG_LENGTHS, PG_STALE], pg_scope(by_agent, by_label))


@functools.lru_cache(maxsize=8)
def _pg_vectors_statement(by_agent: bool, by_label: bool) -> str:
    """Build the PostgreSQL query of :func:`vectors`: one aggregated row, as :func:`_pg_statement`.

    Columns: ids of current rows (ascending), their vectors as ``int4send(id) ||
    vector_send(embedding)`` records concatenated in no particular order (:func:`pg_matrix`
    sorts them: ``ORDER BY`` inside this aggregate sorted 770 KB of bytea at 500 memories and
    doubled the statement's time, 1.9 -> 4.0 ms), their term blobs concatenated and each
    blob's length; the ids of stale rows; the current rows' versions (``xmin``).
    """
    columns = [PG_IDS, PG_RECORDS, PG_TERMS, PG_LENGTHS, PG_STALE, PG_VERSIONS]
    return pg_aggregate(columns, pg_scope(by_agent, by_label))


def pg_aggregate(columns: list[str], where: str) -> str:
    """Return ``SELECT <columns>`` over the memories matching ``where`` (psycopg placeholders).

    The rows carry ``usable`` (:data:`PG_USABLE`: made by the current model, with term
    hashes), which the ``PG_*`` columns filter on; the statements of :func:`candidates`,
    :func:`vectors` and :mod:`search2o.memory.increments` are all built here.
    """
    return (
        f"SELECT {', '.join(columns)} "
        f"FROM (SELECT id, xmin, embedding, terms, {PG_USABLE} AS usable "
        f"FROM memories WHERE {where}) AS scoped"
    )


PG_IDS = "array_agg(id ORDER BY id) FILTER (WHERE usable)"
"""The current rows' ids, ascending; the other ``PG_*`` columns follow this order."""

PG_TERMS = "string_agg(terms, ''::bytea ORDER BY id) FILTER (WHERE usable)"
"""The current rows' term blobs concatenated (cut again by :func:`split_blobs`)."""

PG_LENGTHS = "array_agg(length(terms) ORDER BY id) FILTER (WHERE usable)"
"""Each current row's term blob length."""

PG_STALE = "array_agg(id ORDER BY id) FILTER (WHERE NOT usable)"
"""The ids of rows made by another model or without term hashes."""

PG_VERSIONS = "array_agg(xmin::text::bigint ORDER BY id) FILTER (WHERE usable)"
"""Each current row's version: the transaction that wrote it (PostgreSQL's ``xmin``)."""

PG_RECORDS = "string_agg(int4send(id) || vector_send(embedding), ''::bytea) FILTER (WHERE usable)"
"""The current rows' vectors for :func:`pg_matrix`, aggregated without ``ORDER BY`` (above)."""


def pg_scope(by_agent: bool, by_label: bool) -> str:
    """Return the WHERE clause of one user's memories, optionally one agent's or label's."""
    sql = "user_id = %(user_id)s"
    if by_agent:
        sql += " AND agent = %(agent)s"
    if by_label:
        sql += " AND label = %(label)s"
    return sql


PG_USABLE = "model_id = %(model_id)s AND terms IS NOT NULL"


def vector_literal(vector: npt.NDArray[np.float32]) -> str:
    """Return pgvector's text form of ``vector`` (``[x1,x2,...]``), every float32 exactly.

    Nine significant digits give back the same float32 (IEEE 754-2008, 5.12.2: 9 decimal
    digits round-trip binary32), and one ``%`` format over the tuple costs 0.14 ms at 384
    dimensions where ``repr`` of each value cost 0.42 ms.

    Raises:
        InputError: a value is NaN or infinite (pgvector refuses both; field ``query``).

    """
    if not np.isfinite(vector).all():
        raise InputError("query", "the query embedding holds NaN or infinite values")
    values = tuple(vector.astype(np.float32).tolist())
    return "[" + ",".join(["%.9g"] * len(values)) % values + "]"


def hybrid_scores(pool: Pool, key: bytes, query: str, weight: float) -> npt.NDArray[np.float32]:
    """Return each pooled memory's score for ``query``, shape ``(n,)``.

    ``cosine + weight x BM25 share + BOOST x (the query asks when and the memory holds a time
    word)``: the share of :func:`search2o.memory.lexical.bm25_shares` and the time bonus of
    :mod:`search2o.memory.temporal`. ``weight`` 0 ranks by cosine alone (no time bonus
    either: both read the term hashes).

    Args:
        pool: the candidates, their cosines and term hashes.
        key: the user's term-hash key.
        query: the query text (its terms are hashed, never kept).
        weight: ``memory.lexical_weight``.

    """
    if not weight or not pool.terms:
        return pool.cosine
    shares = bm25_shares(pool.terms, term_hashes(key, terms(query)))
    scores = pool.cosine + np.float32(weight) * shares
    if asks_when(query):
        timed = holds_any(pool.terms, term_hashes(key, time_terms()))
        scores = scores + np.float32(BOOST) * timed
    return scores.astype(np.float32)


def best(
    ids: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], limit: int, threshold: float
) -> list[tuple[int, float]]:
    """Return ``(id, score)`` of at most ``limit`` memories scoring ``>= threshold``, best first.

    Ties go to the older memory (lower id). ``np.partition`` finds the ``limit``-th best score
    in linear time; only the memories at or above it are sorted.
    """
    keep = np.nonzero(scores >= threshold)[0]
    if keep.size > limit:
        cut = np.partition(scores[keep], keep.size - limit)[keep.size - limit]
        keep = keep[scores[keep] >= cut]
    order = sorted(keep.tolist(), key=lambda i: (-float(scores[i]), int(ids[i])))[:limit]
    return [(int(ids[i]), float(scores[i])) for i in order]
