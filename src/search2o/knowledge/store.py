"""The Knowledge Store: one object that ingests, searches, lists, deletes and reindexes.

It wires the database, the embedder and the backend's vector index together; the CLI and the
HTTP API call only this.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import delete, func, select

from search2o.accounts import Principal
from search2o.knowledge import documents as documents_module
from search2o.knowledge import search as search_module
from search2o.knowledge.access import AccessList
from search2o.knowledge.documents import DocumentInfo
from search2o.knowledge.ingest import Ingestor, IngestOutcome, IngestSummary, Origin
from search2o.knowledge.pipeline import ingest_paths
from search2o.knowledge.search import SearchResult
from search2o.knowledge.settings import KnowledgeSettings
from search2o.knowledge.vectorspace import embedding_text
from search2o.providers.embeddings import Embedder
from search2o.storage.db import Database, bump_counter
from search2o.storage.models import Chunk, ChunkEmbedding, Document, VectorSpace
from search2o.storage.vectors import KNOWLEDGE_COUNTER, open_vector_index

__all__ = ["KnowledgeStore"]


class KnowledgeStore:
    """Documents, chunks and vectors under access rights.

    Args:
        database: the open database (SQLite or PostgreSQL).
        embedder: the configured embedding model.
        settings: chunking, search and ingestion limits.

    """

    def __init__(self, database: Database, embedder: Embedder, settings: KnowledgeSettings) -> None:
        self.database = database
        self.embedder = embedder
        self.settings = settings
        self.index = open_vector_index(
            database, settings.hnsw_ef_search, settings.exact_search_max_chunks
        )
        self.ingestor = Ingestor(database, embedder, self.index, settings)

    def ingest_paths(
        self,
        paths: list[Path],
        access: AccessList,
        on_file: Callable[[IngestOutcome], None] | None = None,
        on_total: Callable[[int], None] | None = None,
    ) -> IngestSummary:
        """Ingest files and folders; see :func:`search2o.knowledge.pipeline.ingest_paths`."""
        return ingest_paths(self.ingestor, paths, access, on_file, on_total)

    def ingest_bytes(
        self,
        source: str,
        filename: str,
        data: bytes,
        access: AccessList,
        origin: Origin | None = None,
    ) -> IngestOutcome:
        """Ingest one uploaded or synced file; see :meth:`Ingestor.ingest_bytes`."""
        return self.ingestor.ingest_bytes(source, filename, data, access, origin)

    def search(self, principal: Principal, query: str, k: int = 5) -> SearchResult:
        """Hybrid search under ``principal``'s rights; see :func:`search.search`."""
        with self.database.session() as session:
            return search_module.search(
                session,
                principal,
                query,
                k,
                embedder=self.embedder,
                index=self.index,
                settings=self.settings,
            )

    def is_empty(self, principal: Principal) -> bool:
        """Return True when ``principal`` may read no document."""
        with self.database.session() as session:
            return documents_module.is_empty(session, principal)

    def list_documents(self, principal: Principal) -> list[DocumentInfo]:
        """List the documents ``principal`` may see."""
        with self.database.session() as session:
            return documents_module.list_documents(session, principal)

    def delete_document(self, principal: Principal, document_id: int) -> DocumentInfo:
        """Delete a document (admins only); see :func:`documents.delete_document`."""
        with self.database.session() as session:
            return documents_module.delete_document(session, principal, document_id)

    def set_access(self, source: str, access: AccessList) -> bool:
        """Replace the access list of the document ``source``; its chunks stay as they are.

        Returns:
            False when there is no such document.

        """
        with self.database.session() as session:
            document = session.scalar(select(Document).where(Document.source == source))
            if document is None:
                return False
            self.ingestor.set_access(session, document, access)
            bump_counter(session, KNOWLEDGE_COUNTER)
            return True

    def delete_documents(self, ids: list[int]) -> int:
        """Delete the documents ``ids`` with their chunks and vectors, in one transaction.

        Returns:
            How many existed and were deleted.

        """
        if not ids:
            return 0
        with self.database.session() as session:
            result = session.execute(delete(Document).where(Document.id.in_(ids)))
            bump_counter(session, KNOWLEDGE_COUNTER)
            return int(getattr(result, "rowcount", 0) or 0)

    def reindex(
        self,
        batch_size: int = 256,
        on_total: Callable[[int], None] | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> tuple[int, float]:
        """Re-embed every chunk lacking a vector of the configured model, batch by batch.

        Each batch commits on its own, so an interrupted reindex resumes where it stopped.
        When all chunks are done, other models' vectors and vector spaces are removed.

        Returns:
            ``(chunks re-embedded, seconds)``.

        """
        started = time.perf_counter()
        model_id = self.embedder.model_id
        done_ids = select(ChunkEmbedding.chunk_id).where(ChunkEmbedding.model_id == model_id)
        with self.database.session() as session:
            total = session.scalar(
                select(func.count()).select_from(Chunk).where(Chunk.id.not_in(done_ids))
            )
            if session.get(VectorSpace, model_id) is None:
                session.add(VectorSpace(model_id=model_id, dimension=self.embedder.dimension))
        if on_total is not None:
            on_total(int(total or 0))
        count = 0
        while True:
            with self.database.session() as session:
                rows = session.execute(
                    select(Chunk.id, Chunk.heading_path, Chunk.text, Document.title)
                    .join(Document)
                    .where(Chunk.id.not_in(done_ids))
                    .order_by(Chunk.id)
                    .limit(batch_size)
                ).all()
            if not rows:
                break
            # Embedding happens outside any transaction; each batch is then written in one.
            vectors = self.embedder.embed([embedding_text(r[3], r[1], r[2]) for r in rows])
            ids = [r[0] for r in rows]
            with self.database.session() as session:
                session.execute(delete(ChunkEmbedding).where(ChunkEmbedding.chunk_id.in_(ids)))
                session.add_all(
                    ChunkEmbedding(chunk_id=cid, model_id=model_id, embedding=v)
                    for cid, v in zip(ids, vectors, strict=True)
                )
                bump_counter(session, KNOWLEDGE_COUNTER)
            count += len(rows)
            if on_batch is not None:
                on_batch(len(rows))
        with self.database.session() as session:
            session.execute(delete(ChunkEmbedding).where(ChunkEmbedding.model_id != model_id))
            session.execute(delete(VectorSpace).where(VectorSpace.model_id != model_id))
            # Built once over all vectors (faster than maintaining it row by row meanwhile).
            self.index.prepare(session, model_id, self.embedder.dimension)
            bump_counter(session, KNOWLEDGE_COUNTER)
        return count, time.perf_counter() - started
