"""Ingestion: files in, documents with chunks and vectors out, one transaction per document.

For each file: size check, content hash (SHA-256), then — only when the hash changed — load,
chunk, embed (outside any transaction, it is the slow part), and finally one transaction that
replaces the document's chunks and vectors. An interruption (Ctrl-C) therefore leaves every
document either fully indexed, as before, or absent.

One bad file never stops a batch: whatever goes wrong while one document is read, loaded,
chunked, embedded or stored (other than Ctrl-C, and other than vectors of another embedding
model, which concerns every document) makes that document ``skipped`` with a one-line reason,
its transaction is rolled back so nothing of it is kept, and the next file goes on. A bad
file's own problems (:class:`~search2o.errors.InputError`: unsupported, corrupt, over a
``knowledge.*`` bound) are expected; anything else is also logged with its traceback.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from search2o.errors import IndexMismatchError, InputError, Search2oError
from search2o.knowledge.access import AccessList
from search2o.knowledge.chunking import Chunk as ChunkPiece
from search2o.knowledge.chunking import chunk_document
from search2o.knowledge.loaders import SUPPORTED_SUFFIXES, load_document
from search2o.knowledge.reuse import embed_reusing
from search2o.knowledge.settings import KnowledgeSettings
from search2o.knowledge.vectorspace import claim_vector_space, embedding_text
from search2o.providers.embeddings import Embedder
from search2o.storage.db import Database, bump_counter
from search2o.storage.models import Chunk, ChunkEmbedding, Document, DocumentAccess, utcnow
from search2o.storage.vectors import KNOWLEDGE_COUNTER, VectorIndex
from search2o.textrules import text_problem

__all__ = ["IngestOutcome", "IngestSummary", "Ingestor", "Origin", "Prepared", "iter_files"]

log = logging.getLogger("search2o.knowledge")

# documents.source is a String(2000) column; PostgreSQL refuses longer values (SQLite would not).
_MAX_SOURCE_CHARS: int = getattr(Document.__table__.c.source.type, "length", None) or 2000
_MAX_REASON_CHARS = 300
_STORE_BATCH = 500  # chunks built, flushed and let go at a time by write_document


class _Stage:
    """Names the step one document is at, for the reason when that step fails."""

    def __init__(self) -> None:
        self.name = "read"


def _failure(stage: str, exc: Exception) -> str:
    """One line saying what failed: our own message, or the error's type and first line.

    Database errors give the driver's message only (no SQL, no parameters, which would hold
    the document's text).
    """
    if isinstance(exc, Search2oError):
        message = exc.message
    else:
        original = getattr(exc, "orig", None) or exc
        first = (str(original).strip().splitlines() or [""])[0]
        message = f"{type(original).__name__}: {first}" if first else type(original).__name__
    message = " ".join(message.split())
    if len(message) > _MAX_REASON_CHARS:
        message = message[: _MAX_REASON_CHARS - 1] + "\u2026"
    return f"could not be {stage}: {message}"


Status = Literal["added", "updated", "unchanged", "skipped"]
T = TypeVar("T")


@dataclass(frozen=True)
class Origin:
    """Where a synced document comes from: its source, its key and version there, its address.

    Attributes:
        source_id: the ``sources`` row.
        key: the document's key in the source (a relative path, a page id).
        version: the cheap version the source lists it with (mtime+size, revision, etag).
        url: the address that opens it (``file://``, ``https://``), or ``""``.
        title: the title the source gives it, or ``""`` for the loader's.

    """

    source_id: int
    key: str
    version: str
    url: str = ""
    title: str = ""


@dataclass(frozen=True)
class IngestOutcome:
    """What happened to one file: ``status``, chunk count, and the reason when skipped.

    ``access_before`` is set when an existing document's access list was changed: its entries
    before (``[]`` = everyone), so callers can warn when reading rights widened. ``embedded``
    counts the chunks that went through the model (the others reused a stored vector:
    :mod:`search2o.knowledge.reuse`).
    """

    source: str
    status: Status
    chunks: int = 0
    reason: str = ""
    document_id: int | None = None
    title: str = ""
    access_before: list[str] | None = None
    embedded: int = 0


@dataclass
class Prepared:
    """One document loaded and chunked, waiting for its vectors (:meth:`Ingestor.store`).

    ``texts`` are what is embedded, one per piece (:func:`embedding_text`); ``stage`` names
    the step it is at, for the reason if a later step fails.
    """

    source: str
    title: str
    media_type: str
    digest: str
    size_bytes: int
    pieces: list[ChunkPiece]
    texts: list[str]
    access: AccessList
    origin: Origin | None
    access_before: list[str] | None
    stage: _Stage


@dataclass
class IngestSummary:
    """Totals of one ingestion batch; ``seconds`` is wall time."""

    outcomes: list[IngestOutcome] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: Status) -> int:
        """Return how many files ended with ``status``."""
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def chunks(self) -> int:
        """Chunks written in this batch (unchanged files count zero)."""
        return sum(o.chunks for o in self.outcomes if o.status in ("added", "updated"))

    @property
    def embedded(self) -> int:
        """Chunks that went through the model (the rest reused a stored vector of their text)."""
        return sum(o.embedded for o in self.outcomes)

    def line(self) -> str:
        """One summary line for people: ``... skipped; 12 chunks (3 embedded) in 1.2 s``."""
        return (
            f"{len(self.outcomes)} files: {self.count('added')} added, "
            f"{self.count('updated')} updated, {self.count('unchanged')} unchanged, "
            f"{self.count('skipped')} skipped; {self.chunks} chunks ({self.embedded} embedded) "
            f"in {self.seconds:.1f} s"
        )


def iter_files(paths: Iterable[Path]) -> Iterator[Path]:
    """Yield files under ``paths`` (recursively, sorted, hidden entries skipped).

    Raises:
        InputError: a path does not exist (field ``path``).

    """
    for path in paths:
        if not path.exists():
            raise InputError("path", f"{path} does not exist")
        if path.is_file():
            yield path
            continue
        for child in sorted(path.rglob("*")):
            relative = child.relative_to(path).parts
            if child.is_file() and not any(part.startswith(".") for part in relative):
                yield child


class Ingestor:
    """Writes documents into the Knowledge Store.

    Args:
        database: the open database.
        embedder: makes chunk vectors; its tokenizer sizes chunks.
        index: the backend's vector index (prepared once per model).
        settings: chunk size, overlap and file size limit.

    """

    def __init__(
        self,
        database: Database,
        embedder: Embedder,
        index: VectorIndex,
        settings: KnowledgeSettings,
    ) -> None:
        self.database = database
        self.embedder = embedder
        self.index = index
        self.settings = settings

    def prepare_file(self, file: Path, access: AccessList) -> IngestOutcome | Prepared:
        """Read one file and :meth:`prepare` it (its absolute path is its ``source``)."""
        try:
            source = str(file.resolve())
        except (OSError, RuntimeError) as exc:  # a symlink loop, a vanished folder
            return IngestOutcome(str(file), "skipped", reason=f"unreadable: {exc}")
        if file.suffix.lower() not in SUPPORTED_SUFFIXES:
            return IngestOutcome(source, "skipped", reason=f"unsupported file type {file.suffix!r}")
        try:
            size = file.stat().st_size
            if size > self.settings.max_file_bytes:
                return IngestOutcome(source, "skipped", reason=self._too_large(size))
            data = file.read_bytes()
        except OSError as exc:
            return IngestOutcome(source, "skipped", reason=f"unreadable: {exc.strerror or exc}")
        return self.prepare(source, file.name, data, access)

    def _too_large(self, size: int) -> str:
        return f"file is {size} bytes; the limit is {self.settings.max_file_bytes}"

    def ingest_bytes(
        self,
        source: str,
        filename: str,
        data: bytes,
        access: AccessList,
        origin: Origin | None = None,
    ) -> IngestOutcome:
        """Ingest one file's content under ``source`` (its identity: re-ingesting replaces).

        Args:
            origin: for a synced document, its source, key, version and address, stored with
                it (an unchanged content with a new version stores the version alone).

        Returns:
            ``unchanged`` when hash and access list match the stored document, ``updated``
            when it existed, ``added`` otherwise, ``skipped`` (with a one-line reason) for a
            bad file or any failure of this one document (see the module docstring); a
            skipped document leaves nothing written.

        Raises:
            IndexMismatchError: stored vectors come from another embedding model.

        """
        prepared = self.prepare(source, filename, data, access, origin)
        if isinstance(prepared, IngestOutcome):
            return prepared
        return self.guarded(prepared.source, prepared.stage, lambda: self.embed_store(prepared))

    def prepare(
        self,
        source: str,
        filename: str,
        data: bytes,
        access: AccessList,
        origin: Origin | None = None,
    ) -> IngestOutcome | Prepared:
        """Check, hash, load and chunk one file: the steps before the model.

        Returns:
            The final outcome when nothing is left to embed (``unchanged``, an access-only
            ``updated``, ``skipped``), else the :class:`Prepared` document to embed and store
            (:meth:`store`).

        Raises:
            IndexMismatchError: as :meth:`ingest_bytes`.

        """
        problem = text_problem(source)
        if problem is not None:
            return IngestOutcome(source, "skipped", reason=f"source {problem}")
        if len(source) > _MAX_SOURCE_CHARS:
            reason = f"source is {len(source)} characters long; the limit is {_MAX_SOURCE_CHARS}"
            return IngestOutcome(source, "skipped", reason=reason)
        if len(data) > self.settings.max_file_bytes:
            reason = f"file is over the size limit; the limit is {self.settings.max_file_bytes}"
            return IngestOutcome(source, "skipped", reason=reason)
        stage = _Stage()
        return self.guarded(
            source, stage, lambda: self._prepare(source, filename, data, access, stage, origin)
        )

    def guarded(self, source: str, stage: _Stage, work: Callable[[], T]) -> T | IngestOutcome:
        """Run one document's ``work``; any failure of it (see the module) becomes ``skipped``.

        Raises:
            IndexMismatchError: vectors of another model are stored (every document's concern).

        """
        try:
            return work()
        except IndexMismatchError:
            raise
        except InputError as exc:
            return IngestOutcome(source, "skipped", reason=exc.reason)
        except Exception as exc:  # anything else of this one document; Ctrl-C is not caught
            log.warning(
                "ingest.skipped",
                extra={"fields": {"source": source, "stage": stage.name}},
                exc_info=exc,
            )
            return IngestOutcome(source, "skipped", reason=_failure(stage.name, exc))

    def _prepare(
        self,
        source: str,
        filename: str,
        data: bytes,
        access: AccessList,
        stage: _Stage,
        origin: Origin | None,
    ) -> IngestOutcome | Prepared:
        digest = hashlib.sha256(data).hexdigest()
        stage.name = "stored"
        with self.database.session() as session:
            existing = session.scalar(select(Document).where(Document.source == source))
            before = sorted(a.principal for a in existing.access) if existing else None
            changed = before if before is not None and set(before) != access.entries() else None
            if existing is not None and existing.content_hash == digest:
                if origin is not None:
                    _tag(existing, origin)
                if changed is None:
                    return IngestOutcome(
                        source,
                        "unchanged",
                        existing.chunk_count,
                        document_id=existing.id,
                        title=existing.title,
                    )
                self.set_access(session, existing, access)
                return IngestOutcome(
                    source,
                    "updated",
                    existing.chunk_count,
                    document_id=existing.id,
                    title=existing.title,
                    access_before=changed,
                )
        stage.name = "loaded"
        loaded = load_document(filename, data, self.settings)
        stage.name = "chunked"
        pieces = chunk_document(
            loaded,
            self.embedder.count_tokens,
            chunk_tokens=self.settings.chunk_tokens,
            overlap_tokens=self.settings.overlap_tokens,
            max_chunks=self.settings.max_chunks_per_document,
        )
        title = origin.title if origin is not None and origin.title else loaded.title
        stage.name = "embedded"
        texts = [embedding_text(title, p.heading_path, p.text) for p in pieces]
        return Prepared(
            source,
            title,
            loaded.media_type,
            digest,
            len(data),
            pieces,
            texts,
            access,
            origin,
            changed,
            stage,
        )

    def embed_store(self, prepared: Prepared) -> IngestOutcome:
        """Embed a prepared document's new texts (:func:`embed_reusing`) and :meth:`store` it."""
        embedded = embed_reusing(self.database, self.embedder, prepared.texts)
        return self.store(prepared, embedded.vectors, embedded.hashes, embedded.embedded)

    def store(
        self,
        prepared: Prepared,
        vectors: npt.NDArray[np.float32],
        hashes: list[str],
        embedded: int,
    ) -> IngestOutcome:
        """Write a prepared document with its chunk vectors in one transaction.

        Args:
            vectors: one row per ``prepared.texts``; ``hashes`` their text hashes.
            embedded: how many of them went through the model (for the outcome).

        Raises:
            IndexMismatchError: stored vectors come from another embedding model; any other
                failure propagates (callers wrap this in :meth:`guarded`).

        """
        prepared.stage.name = "stored"
        for attempt in (1, 2):
            try:
                with self.database.session() as session:
                    document, status = self.write_document(
                        session,
                        source=prepared.source,
                        title=prepared.title,
                        media_type=prepared.media_type,
                        content_hash=prepared.digest,
                        size_bytes=prepared.size_bytes,
                        pieces=prepared.pieces,
                        vectors=vectors,
                        access=prepared.access,
                        hashes=hashes,
                        origin=prepared.origin,
                    )
                break
            except IntegrityError:
                # Another writer added the same source (or the first vector space) between our
                # read and our insert; the second attempt sees its row and replaces it.
                if attempt == 2:
                    raise
        return IngestOutcome(
            prepared.source,
            status,
            len(prepared.pieces),
            document_id=document.id,
            title=document.title,
            access_before=prepared.access_before,
            embedded=embedded,
        )

    def write_document(
        self,
        session: Session,
        *,
        source: str,
        title: str,
        media_type: str,
        content_hash: str,
        size_bytes: int,
        pieces: list[ChunkPiece],
        vectors: npt.NDArray[np.float32],
        access: AccessList,
        hashes: list[str] | None = None,
        origin: Origin | None = None,
    ) -> tuple[Document, Literal["added", "updated"]]:
        """Insert or replace one document with its chunks and vectors.

        Runs inside ``session``'s transaction; the caller commits, so a search sees the old
        chunks or the new ones, never neither and never both.

        Args:
            pieces: the chunks, in order; ``vectors`` has shape ``(len(pieces), dimension)``.
            hashes: each chunk's :func:`~search2o.knowledge.reuse.text_hash`, stored so a later
                write can reuse its vector; ``None``: not stored.
            origin: the synced document's source, key, version and address.

        Raises:
            IndexMismatchError: stored vectors come from another embedding model.

        """
        claim_vector_space(session, self.embedder)
        self.index.prepare(session, self.embedder.model_id, self.embedder.dimension)
        document = session.scalar(select(Document).where(Document.source == source))
        status: Literal["added", "updated"] = "updated" if document else "added"
        if document is None:
            document = Document(source=source)
            session.add(document)
        else:
            session.execute(delete(Chunk).where(Chunk.document_id == document.id))
        document.title = title[:500]
        document.media_type = media_type
        document.content_hash = content_hash
        document.size_bytes = size_bytes
        document.chunk_count = len(pieces)
        document.updated_at = utcnow()
        if origin is not None:
            _tag(document, origin)
        session.flush()
        self.set_access(session, document, access)
        # In slices: the rows of one slice are written and dropped before the next is built, so
        # a 3,000-chunk document never holds 6,000 ORM objects (one transaction all the same).
        for start in range(0, len(pieces), _STORE_BATCH):
            rows = [
                Chunk(
                    document_id=document.id,
                    ordinal=p.ordinal,
                    heading=" > ".join(p.heading_path),
                    heading_path=list(p.heading_path),
                    text=p.text,
                    token_count=p.token_count,
                    text_hash=hashes[i] if hashes is not None else None,
                )
                for i, p in enumerate(pieces[start : start + _STORE_BATCH], start)
            ]
            session.add_all(rows)
            session.flush()
            session.add_all(
                ChunkEmbedding(chunk_id=row.id, model_id=self.embedder.model_id, embedding=vector)
                for row, vector in zip(rows, vectors[start : start + _STORE_BATCH], strict=True)
            )
            session.flush()
        bump_counter(session, KNOWLEDGE_COUNTER)
        session.flush()
        return document, status

    @staticmethod
    def set_access(session: Session, document: Document, access: AccessList) -> None:
        """Replace ``document``'s access list inside ``session``'s transaction."""
        session.execute(delete(DocumentAccess).where(DocumentAccess.document_id == document.id))
        session.add_all(
            DocumentAccess(document_id=document.id, principal=entry)
            for entry in sorted(access.entries())
        )
        document.is_public = access.is_public
        session.flush()
        session.expire(document, ["access"])


def _tag(document: Document, origin: Origin) -> None:
    """Record ``origin`` on ``document`` (its source, key, version, address)."""
    document.source_id = origin.source_id
    document.source_key = origin.key
    document.version = origin.version
    document.url = origin.url or None
