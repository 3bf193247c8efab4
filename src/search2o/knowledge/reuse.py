"""Never embed the same text twice: chunk vectors are reused by the hash of their text.

Each chunk stores ``text_hash``, the SHA-256 of the exact text its vector was made from
(:func:`search2o.knowledge.vectorspace.embedding_text`: title, heading path and chunk text). When
a document is written again, every text whose hash already has a vector of the configured model
takes that vector; only new texts go through the model. An edit of one paragraph therefore
embeds the one or two chunks it touched, a re-sync of an unchanged document embeds nothing, and
a paragraph copied into another document costs no model call either. A vector is a function of
the text and the model alone, so sharing one between documents reveals nothing of either.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlalchemy import select

from search2o.providers.embeddings import Embedder
from search2o.storage.db import Database
from search2o.storage.models import Chunk, ChunkEmbedding

__all__ = ["Embedded", "embed_reusing", "text_hash"]

_LOOKUP_BATCH = 500  # hashes per IN (...) list: well under SQLite's 32,766 bound parameters


def text_hash(text: str) -> str:
    """Return the SHA-256 of ``text`` (UTF-8) as 64 hex digits."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Embedded:
    """Vectors for a list of texts, and how many went through the model.

    Attributes:
        vectors: ``(len(texts), dimension)`` float32, row ``i`` for text ``i``.
        hashes: :func:`text_hash` of each text, in order.
        embedded: how many distinct texts the model embedded (the rest were reused).
        fresh: the hashes of those texts.

    """

    vectors: npt.NDArray[np.float32]
    hashes: list[str]
    embedded: int
    fresh: frozenset[str] = frozenset()


def embed_reusing(database: Database, embedder: Embedder, texts: Sequence[str]) -> Embedded:
    """Return vectors for ``texts``, embedding only those no stored chunk has a vector for.

    Reads stored vectors in its own short transaction; the model runs outside any.

    Raises:
        ProviderError: the model could not be loaded or the endpoint failed.

    """
    hashes = [text_hash(t) for t in texts]
    known: dict[str, npt.NDArray[np.float32]] = {}
    wanted = sorted(set(hashes))
    with database.session() as session:
        for start in range(0, len(wanted), _LOOKUP_BATCH):
            rows = session.execute(
                select(Chunk.text_hash, ChunkEmbedding.embedding)
                .join(ChunkEmbedding, ChunkEmbedding.chunk_id == Chunk.id)
                .where(
                    Chunk.text_hash.in_(wanted[start : start + _LOOKUP_BATCH]),
                    ChunkEmbedding.model_id == embedder.model_id,
                )
            )
            for digest, vector in rows:
                if digest is not None and len(vector) == embedder.dimension:
                    known.setdefault(digest, np.asarray(vector, dtype=np.float32))
    missing: dict[str, str] = {}
    for digest, text in zip(hashes, texts, strict=True):
        if digest not in known:
            missing.setdefault(digest, text)
    if missing:
        fresh = embedder.embed(list(missing.values()))
        known.update(zip(missing, fresh, strict=True))
    vectors = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
    for row, digest in enumerate(hashes):
        vectors[row] = known[digest]
    return Embedded(vectors, hashes, len(missing), frozenset(missing))
