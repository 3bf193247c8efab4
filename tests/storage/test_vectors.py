"""Vector indexes: the NumPy cache stays exact across writes; concurrent writers never deadlock."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from sqlalchemy import delete, select

from search2o.accounts import Principal
from search2o.knowledge.access import AccessList, readable_filter
from search2o.knowledge.chunking import Chunk as ChunkPiece
from search2o.knowledge.ingest import Ingestor
from search2o.knowledge.settings import KnowledgeSettings
from search2o.storage.db import Database, bump_counter
from search2o.storage.models import Document
from search2o.storage.vectors import (
    KNOWLEDGE_COUNTER,
    NumpyVectorIndex,
    open_vector_index,
    shortlist,
    sign_codes,
)
from tests.conftest import MemoEmbedder

MODEL = MemoEmbedder.model_id


def _write(database: Database, ingestor: Ingestor, source: str, n: int) -> np.ndarray:
    pieces = [ChunkPiece(i, f"{source} piece {i}", (), 3) for i in range(n)]
    vectors = ingestor.embedder.embed([p.text for p in pieces])
    with database.session() as session:
        ingestor.write_document(
            session,
            source=source,
            title=source,
            media_type="text/plain",
            content_hash=source,
            size_bytes=1,
            pieces=pieces,
            vectors=vectors,
            access=AccessList(),
        )
    return vectors


def _brute_force(database: Database, query: np.ndarray, k: int) -> list[int]:
    fresh = NumpyVectorIndex()
    with database.session() as session:
        return [h.chunk_id for h in fresh.search(session, query, MODEL, k, None)]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_numpy_cache_refreshes_incrementally_and_stays_exact(
    database: Database, embedder: MemoEmbedder
) -> None:
    index = NumpyVectorIndex()
    ingestor = Ingestor(database, embedder, index, KnowledgeSettings())
    query = embedder.embed(["piece"])[0]

    def search() -> list[int]:
        with database.session() as session:
            return [h.chunk_id for h in index.search(session, query, MODEL, 50, None)]

    _write(database, ingestor, "a", 5)
    assert len(search()) == 5
    first = index._cache[MODEL]
    _write(database, ingestor, "b", 3)  # new chunks only
    assert sorted(search()) == sorted(_brute_force(database, query, 50))
    assert len(index._cache[MODEL].chunk_ids) == 8
    assert index._cache[MODEL] is not first
    _write(database, ingestor, "a", 2)  # a replaced: its 5 old chunks leave, 2 new arrive
    assert search() == _brute_force(database, query, 50)
    assert len(index._cache[MODEL].chunk_ids) == 5
    with database.session() as session:
        session.execute(delete(Document).where(Document.source == "b"))
        bump_counter(session, KNOWLEDGE_COUNTER)
    assert search() == _brute_force(database, query, 50)
    assert len(search()) == 2
    cached = index._cache[MODEL]
    search()
    assert index._cache[MODEL] is cached  # unchanged counter: no reload


def test_concurrent_ingests_do_not_deadlock(database: Database, embedder: MemoEmbedder) -> None:
    index = open_vector_index(database, ef_search=40, exact_max_chunks=20_000)
    ingestor = Ingestor(database, embedder, index, KnowledgeSettings())
    _write(database, ingestor, "seed", 1)  # the index (on PostgreSQL) exists from here on
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        # Each worker has its own index object, like a separate API process would.
        own = Ingestor(
            database,
            embedder,
            open_vector_index(database, ef_search=40, exact_max_chunks=20_000),
            KnowledgeSettings(),
        )
        try:
            for i in range(5):
                _write(database, own, f"{name}-{i}", 3)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("x", "y", "z")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    with database.session() as session:
        assert len(list(session.scalars(select(Document.id)))) == 16


def test_sign_codes_pack_one_bit_per_dimension_word_major() -> None:
    vectors = np.array([[1.0, -1.0, 0.0, 2.0] * 25, [-1.0] * 100], dtype=np.float32)
    codes = sign_codes(vectors)
    assert codes.shape == (2, 2)  # 100 dimensions -> 2 words of 64 bits, one column per vector
    assert codes[:, 1].tolist() == [0, 0]
    ones = sum(int(word).bit_count() for word in codes[:, 0])
    assert ones == 50  # dimensions 0 and 3 of every 4 are positive; 0.0 is not


def test_shortlist_keeps_every_tie_at_the_cut_and_the_nearest_first() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((500, 128)).astype(np.float32)
    codes = sign_codes(vectors)
    query = sign_codes(vectors[7])
    picked = shortlist(codes, query, 20)
    distance = np.array(
        [sum(int(w).bit_count() for w in codes[:, i] ^ query[:, 0]) for i in range(500)]
    )
    cut = np.sort(distance)[19]
    assert 7 in picked.tolist()
    assert set(picked.tolist()) == set(np.flatnonzero(distance <= cut).tolist())
    assert len(shortlist(codes, query, 900)) == 500


def _clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, 384)).astype(np.float32)
    vectors = centres[rng.integers(0, 20, n)] + 0.8 * rng.standard_normal((n, 384)).astype(
        np.float32
    )
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_binary_shortlist_above_the_exact_bound_finds_the_exact_top_k(
    database: Database, embedder: MemoEmbedder
) -> None:
    drawn = _clustered(3040, 11)  # the last 40 are queries near the stored ones, not stored
    vectors, queries = drawn[:3000], drawn[3000:]
    ingestor = Ingestor(database, embedder, NumpyVectorIndex(), KnowledgeSettings())
    for d in range(30):
        part = vectors[d * 100 : (d + 1) * 100]
        pieces = [ChunkPiece(i, f"doc {d} piece {i}", (), 3) for i in range(100)]
        with database.session() as session:
            ingestor.write_document(
                session,
                source=f"d{d}",
                title=f"d{d}",
                media_type="text/plain",
                content_hash=str(d),
                size_bytes=1,
                pieces=pieces,
                vectors=part,
                access=AccessList(groups=("hr",)) if d == 4 else AccessList(),
            )
    exact = NumpyVectorIndex(exact_max_chunks=10_000)
    quantized = NumpyVectorIndex(exact_max_chunks=500)
    overlap = 0
    with database.session() as session:
        readable = readable_filter(session, Principal(5, "x@example.com", ()))
        for query in queries:
            for allowed in (None, readable):
                truth = [h.chunk_id for h in exact.search(session, query, MODEL, 10, allowed)]
                found = quantized.search(session, query, MODEL, 10, allowed)
                overlap += len(set(truth) & {h.chunk_id for h in found})
                assert [h.similarity for h in found] == sorted(
                    (h.similarity for h in found), reverse=True
                )
        assert quantized._cache[MODEL].codes.size  # the shortlist path ran
        assert not exact._cache[MODEL].codes.size
        hr_chunks = set(range(401, 501))
        for query in queries[:5]:
            hits = quantized.search(session, query, MODEL, 10, readable)
            assert not {h.chunk_id for h in hits} & hr_chunks
    assert overlap / (len(queries) * 2 * 10) >= 0.95
