"""One document's whole text under access rights: the MCP ``fetch`` tool and its citation URL.

The Knowledge Store keeps a document as chunks, not as the file it came from, so the text is
rebuilt from them in order (:func:`assemble`): each change of heading path opens the headings
that begin there as Markdown headings (``#`` per level of the path), and the whole sentences
:mod:`search2o.knowledge.chunking` repeats at the start of a section's next chunk are dropped
again. It is the text as indexed (what search finds), not the original bytes.

Access follows search, not the admin listing: a document is read only when it is one of
:func:`~search2o.knowledge.access.readable_documents` of the caller, so whatever ``fetch``
returns, ``search`` could have found. Any other id, a missing one included, raises the same
:class:`~search2o.errors.NotFoundError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from search2o.accounts import Principal
from search2o.errors import NotFoundError
from search2o.knowledge.access import readable_documents
from search2o.storage.models import Chunk, Document

__all__ = ["DocumentText", "assemble", "read_document"]

# Where a repeated tail can end in the next chunk: after a sentence's end mark (the chunker's
# own sentence break) or at a line break (a paragraph or line without an end mark).
_CUT = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")


@dataclass(frozen=True)
class DocumentText:
    """A document's identity and its text as indexed.

    Attributes:
        text: :func:`assemble` of its chunks, at most ``max_chars`` characters.
        truncated: the text was cut at ``max_chars``.

    """

    id: int
    title: str
    source: str
    media_type: str
    updated_at: datetime
    text: str
    truncated: bool


def _squash(text: str) -> str:
    return " ".join(text.split())


def _without_overlap(previous: str, current: str) -> str:
    """Return ``current`` without the leading whole sentences that end ``previous``.

    Whitespace is compared squashed: the chunker joins repeated sentences with one space
    where the original paragraph may have had a line break. Only cuts at sentence or line
    ends are tried, longest first, so a repeated tail is dropped whole or not at all.
    """
    tail = _squash(previous)
    best = 0
    for match in _CUT.finditer(current):
        head = _squash(current[: match.start()])
        if len(head) > len(tail):
            break
        # The repeat must begin where a sentence of ``previous`` begins, not inside a word.
        if head and (tail == head or tail.endswith(" " + head)):
            best = match.end()
    return current[best:]


def assemble(chunks: Iterable[tuple[list[str], str]]) -> str:
    """Rebuild a document's text from its chunks in order.

    Args:
        chunks: ``(heading_path, text)`` per chunk, in ordinal order.

    Returns:
        Paragraphs separated by a blank line; a heading ``"#" * depth + " " + name`` wherever
        a heading of the path begins; no sentence repeated from the previous chunk of the
        same section.

    """
    parts: list[str] = []
    previous_path: list[str] = []
    previous_text = ""
    for path, text in chunks:
        if path == previous_path and previous_text:
            body = _without_overlap(previous_text, text)
        else:
            shared = 0
            while shared < min(len(path), len(previous_path)) and (
                path[shared] == previous_path[shared]
            ):
                shared += 1
            parts.extend(f"{'#' * (depth + 1)} {path[depth]}" for depth in range(shared, len(path)))
            body = text
        if body.strip():
            parts.append(body.strip())
        previous_path, previous_text = list(path), text
    return "\n\n".join(parts)


def read_document(
    session: Session, principal: Principal, document_id: int, max_chars: int
) -> DocumentText:
    """Return a document's text if ``principal`` may read it (the rules of search).

    Args:
        document_id: the document's id.
        max_chars: the longest text returned; chunks are read in order until it is reached.

    Raises:
        NotFoundError: no such document, or one ``principal`` may not read (the same error).

    """
    readable = readable_documents(principal).where(Document.id == document_id)
    document = session.scalar(select(Document).where(Document.id.in_(readable)))
    if document is None:
        raise NotFoundError(f"no document {document_id}")
    rows = session.execute(
        select(Chunk.heading_path, Chunk.text)
        .where(Chunk.document_id == document_id)
        .order_by(Chunk.ordinal)
    )
    pieces: list[tuple[list[str], str]] = []
    size = 0
    more = False
    for path, text in rows:
        if size > max_chars:
            more = True  # enough to fill max_chars; the rest is never read
            break
        pieces.append((list(path), text))
        size += len(text)
    text = assemble(pieces)
    truncated = more or len(text) > max_chars
    return DocumentText(
        id=document.id,
        title=document.title,
        source=document.source,
        media_type=document.media_type,
        updated_at=document.updated_at,
        text=text[:max_chars],
        truncated=truncated,
    )
