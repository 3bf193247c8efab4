"""Listing and deleting documents, and the ``is_empty`` question, under access rights.

Admins see and delete every document; other users see the documents they may read and cannot
delete. A document a caller may not read is answered exactly like a missing one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.errors import NotFoundError, PermissionDeniedError
from search2o.knowledge.access import readable_documents
from search2o.storage.db import bump_counter
from search2o.storage.models import Document
from search2o.storage.vectors import KNOWLEDGE_COUNTER

__all__ = ["DocumentInfo", "delete_document", "is_empty", "list_documents"]


@dataclass(frozen=True)
class DocumentInfo:
    """A document as listed: identity, size, chunk count and access list."""

    id: int
    source: str
    title: str
    media_type: str
    size_bytes: int
    chunk_count: int
    access: list[str]
    updated_at: datetime

    @classmethod
    def of(cls, document: Document) -> DocumentInfo:
        """Describe a stored document."""
        return cls(
            document.id,
            document.source,
            document.title,
            document.media_type,
            document.size_bytes,
            document.chunk_count,
            sorted(a.principal for a in document.access),
            document.updated_at,
        )


def list_documents(session: Session, principal: Principal) -> list[DocumentInfo]:
    """Return the documents ``principal`` may see, ordered by source."""
    stmt = select(Document).order_by(Document.source)
    if not principal.is_admin:
        stmt = stmt.where(Document.id.in_(readable_documents(principal)))
    return [DocumentInfo.of(d) for d in session.scalars(stmt)]


def delete_document(session: Session, principal: Principal, document_id: int) -> DocumentInfo:
    """Delete a document with its chunks and vectors.

    Raises:
        NotFoundError: no such document, or one the caller may not read.
        PermissionDeniedError: the caller may read it but is not an admin.

    """
    document = session.get(Document, document_id)
    if document is None:
        raise NotFoundError(f"no document {document_id}")
    if not principal.is_admin:
        mine = readable_documents(principal).where(Document.id == document_id)
        readable = session.scalar(select(mine.exists()))
        if not readable:
            raise NotFoundError(f"no document {document_id}")
        raise PermissionDeniedError("only admins delete documents")
    info = DocumentInfo.of(document)
    session.execute(delete(Document).where(Document.id == document_id))
    bump_counter(session, KNOWLEDGE_COUNTER)
    return info


def is_empty(session: Session, principal: Principal) -> bool:
    """Return True when ``principal`` may read no document at all."""
    return not session.scalar(select(readable_documents(principal).exists()))
