"""One passage (chunk) by id, for the reader who may read its document.

A citation names the chunks an answer drew on (``chunk_ids``); a client that shows "the cited
passage itself" reads it here. The document's access list decides, as for every search
(:func:`~search2o.knowledge.access.readable_documents`; admins read every document, as they
list them): a chunk of a document the caller may not read is answered exactly like a missing
one.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from search2o.accounts import Principal
from search2o.errors import NotFoundError
from search2o.knowledge.access import readable_documents
from search2o.storage.db import Database
from search2o.storage.models import Chunk, Document

__all__ = ["PassageInfo", "read_passage"]


@dataclass(frozen=True)
class PassageInfo:
    """A chunk's text with its document's id, title and source and its heading path."""

    chunk_id: int
    document_id: int
    title: str
    source: str
    heading_path: list[str]
    text: str


def read_passage(database: Database, principal: Principal, chunk_id: int) -> PassageInfo:
    """Return chunk ``chunk_id`` if ``principal`` may read its document.

    Raises:
        NotFoundError: no such chunk, or one of a document the caller may not read (the same
            message for both).

    """
    statement = (
        select(Chunk, Document.title, Document.source)
        .join(Document, Document.id == Chunk.document_id)
        .where(Chunk.id == chunk_id)
    )
    if not principal.is_admin:
        statement = statement.where(Chunk.document_id.in_(readable_documents(principal)))
    with database.session() as session:
        row = session.execute(statement).first()
        if row is None:
            raise NotFoundError(f"no passage {chunk_id}")
        chunk, title, source = row
        return PassageInfo(
            chunk.id, chunk.document_id, title, source, list(chunk.heading_path), chunk.text
        )
