"""Vector indexes: the NumPy cache stays exact across writes; concurrent writers never deadlock."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from sqlalchemy import delete, select

from search2o.config import KnowledgeSettings
from search2o.knowledge.access import AccessList
from search2o.knowledge.chunking import Chunk as ChunkPiece
from search2o.knowledge.ingest import Ingestor
from search2o.storage.db import Database, bump_counter
from search2o.storage.models import Document
from search2o.storage.vectors import KNOWLEDGE_COUNTER, NumpyVectorIndex, open_vector_index
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
