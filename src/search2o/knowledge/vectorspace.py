"""The vector space rule: every stored vector comes from one embedding model.

The model id is stored with each vector and in ``vector_spaces``. Writing or searching with an
embedder whose model differs from the stored one raises :class:`IndexMismatchError`, whose fix is
``search2o reindex``; vectors of two models are never compared.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from search2o.errors import IndexMismatchError
from search2o.providers.embeddings import Embedder
from search2o.storage.models import VectorSpace

__all__ = ["check_vector_space", "claim_vector_space", "embedding_text"]


def check_vector_space(session: Session, embedder: Embedder) -> bool:
    """Return True when stored vectors (if any) were made by ``embedder``'s model.

    Returns:
        False when nothing is stored yet.

    Raises:
        IndexMismatchError: vectors of another model are stored (or a reindex is unfinished).

    """
    stored = list(session.scalars(select(VectorSpace.model_id)))
    if not stored:
        return False
    if stored != [embedder.model_id]:
        others = ", ".join(sorted(m for m in stored if m != embedder.model_id))
        raise IndexMismatchError(
            f"the knowledge index holds vectors of {others}, but the configured embedding model "
            f"is {embedder.model_id}; run `search2o reindex` to re-embed every chunk"
        )
    return True


def claim_vector_space(session: Session, embedder: Embedder) -> None:
    """Record ``embedder``'s model as the stored vector space (inside the caller's transaction).

    Raises:
        IndexMismatchError: another model's vectors are stored.

    """
    if not check_vector_space(session, embedder):
        session.add(VectorSpace(model_id=embedder.model_id, dimension=embedder.dimension))
        session.flush()


def embedding_text(title: str, heading_path: list[str] | tuple[str, ...], text: str) -> str:
    """Return what is embedded for a chunk: title and heading path give the text its context."""
    context = " > ".join([title, *heading_path])
    return f"{context}\n{text}"
