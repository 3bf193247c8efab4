"""A caller allowed 1 document out of 10,000 still gets their k results, on both backends and
through every vector path (NumPy exact, pgvector exact, pgvector HNSW with fallback)."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import insert

from search2o.accounts import Principal
from search2o.knowledge.access import readable_filter
from search2o.storage.db import Database, bump_counter
from search2o.storage.lexical import lexical_search
from search2o.storage.models import Chunk, ChunkEmbedding, Document, DocumentAccess, VectorSpace
from search2o.storage.vectors import KNOWLEDGE_COUNTER, PgVectorIndex, open_vector_index

MODEL = "test/synthetic"
DIM = 384
DOCS = 10_000
HR_CHUNKS = 12

pytestmark = pytest.mark.slow


def _load(database: Database) -> np.ndarray:
    """10,000 'eng' documents very close to the query, one 'hr' document further away."""
    rng = np.random.default_rng(7)
    query = rng.normal(size=DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    eng = query + rng.normal(scale=0.02, size=(DOCS, DIM)).astype(np.float32)
    hr = query + rng.normal(scale=0.5, size=(HR_CHUNKS, DIM)).astype(np.float32)
    vectors = np.vstack([eng, hr])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    now = Document.created_at.default.arg(None)  # type: ignore[union-attr]
    docs = [
        {
            "id": i + 1,
            "source": f"s{i}",
            "title": f"t{i}",
            "media_type": "text/plain",
            "content_hash": "x",
            "size_bytes": 1,
            "chunk_count": 1,
            "is_public": False,
            "created_at": now,
            "updated_at": now,
        }
        for i in range(DOCS)
    ]
    docs.append({**docs[0], "id": DOCS + 1, "source": "hr", "chunk_count": HR_CHUNKS})
    chunks = [
        {
            "id": i + 1,
            "document_id": i + 1,
            "ordinal": 0,
            "heading": "",
            "heading_path": [],
            "text": f"quarterly roadmap item {i}",
            "token_count": 4,
        }
        for i in range(DOCS)
    ] + [
        {
            "id": DOCS + 1 + j,
            "document_id": DOCS + 1,
            "ordinal": j,
            "heading": "",
            "heading_path": [],
            "text": f"quarterly roadmap hr note {j}",
            "token_count": 5,
        }
        for j in range(HR_CHUNKS)
    ]
    access = [{"document_id": i + 1, "principal": "group:eng"} for i in range(DOCS)]
    access.append({"document_id": DOCS + 1, "principal": "group:hr"})
    embeddings = [
        {"chunk_id": c["id"], "model_id": MODEL, "embedding": vectors[n]}
        for n, c in enumerate(chunks)
    ]
    with database.session() as session:
        session.execute(insert(Document), docs)
        session.execute(insert(Chunk), chunks)
        session.execute(insert(DocumentAccess), access)
        session.execute(insert(ChunkEmbedding), embeddings)
        session.add(VectorSpace(model_id=MODEL, dimension=DIM))
        bump_counter(session, KNOWLEDGE_COUNTER)
    return query


def test_one_readable_document_out_of_ten_thousand_still_fills_k(database: Database) -> None:
    query = _load(database)
    hr = Principal(1, "hr@example.com", ("hr",))
    eng = Principal(2, "eng@example.com", ("eng",))
    nobody = Principal(3, "nobody@example.com", ())
    indexes = [open_vector_index(database, ef_search=40, exact_max_chunks=20_000)]
    if database.backend == "postgresql":
        with database.session() as session:
            indexes[0].prepare(session, MODEL, DIM)
        # exact_max_chunks=0 forces the HNSW path, whose filter leaves < k rows -> exact fallback
        indexes.append(PgVectorIndex(ef_search=40, exact_max_chunks=0))
    hr_chunk_ids = set(range(DOCS + 1, DOCS + 1 + HR_CHUNKS))
    for index in indexes:
        with database.session() as session:
            readable = readable_filter(session, hr)
            hits = index.search(session, query, MODEL, 10, readable)
            assert len(hits) == 10
            assert {h.chunk_id for h in hits} <= hr_chunk_ids
            assert [h.similarity for h in hits] == sorted(
                (h.similarity for h in hits), reverse=True
            )

            eng_hits = index.search(session, query, MODEL, 10, readable_filter(session, eng))
            assert len(eng_hits) == 10 and not {h.chunk_id for h in eng_hits} & hr_chunk_ids
            assert index.search(session, query, MODEL, 10, readable_filter(session, nobody)) == []

    with database.session() as session:
        lexical = lexical_search(session, "quarterly roadmap", 10, readable_filter(session, hr))
        assert len(lexical) == 10 and {cid for cid, _ in lexical} <= hr_chunk_ids
