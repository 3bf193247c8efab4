"""What the MCP tools do, for one caller: blocking calls into the Knowledge Store.

The retrieval is the chat's: ``search`` and ``search_knowledge`` call
:meth:`~search2o.knowledge.store.KnowledgeStore.search` as the caller, which filters by their
access rights before ranking; ``fetch`` reads a document only under the same rules
(:func:`~search2o.knowledge.reading.read_document`). A document the caller may not read is
neither found nor fetched, and its id answers exactly like a missing one.

Nothing here knows about the MCP SDK (:mod:`search2o.surfaces.mcp.server` registers these as
tools); errors are :class:`~search2o.errors.Search2oError`.
"""

from __future__ import annotations

from search2o.accounts import Principal
from search2o.errors import InputError, NotFoundError
from search2o.knowledge.reading import read_document
from search2o.knowledge.search import validate_query
from search2o.runtime import Runtime
from search2o.surfaces.mcp.schemas import (
    FetchedDocument,
    Finding,
    Findings,
    SearchResult,
    SearchResults,
)
from search2o.surfaces.mcp.settings import mcp_settings
from search2o.surfaces.mcp.urls import McpUrls

__all__ = ["MAX_DOCUMENT_IDS", "KnowledgeTools"]

MAX_DOCUMENT_IDS = 100
"""The most ``document_ids`` one ``search_knowledge`` call may name."""

# Ids are INTEGER columns (32-bit on PostgreSQL): a larger number names no document, and
# PostgreSQL would refuse to compare it.
_INT32_MAX = 2**31 - 1


def _document_id(value: str, field: str) -> int | None:
    """Parse an id as ``search`` gives it (decimal digits); ``None`` when no row can have it.

    Raises:
        InputError: ``value`` is not decimal digits (names ``field``).

    """
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        raise InputError(field, f"{value[:40]!r} is not a document id (digits, as `search` gives)")
    number = int(text)
    return number if 1 <= number <= _INT32_MAX else None


class KnowledgeTools:
    """``search``, ``fetch`` and ``search_knowledge`` over one runtime.

    Args:
        runtime: the process's runtime (Knowledge Store, database, settings).
        urls: where documents are cited (:meth:`McpUrls.document`).

    """

    def __init__(self, runtime: Runtime, urls: McpUrls) -> None:
        self._runtime = runtime
        self._urls = urls

    def search(self, principal: Principal, query: str) -> SearchResults:
        """Find documents for ``query``: the distinct documents of the best chunks.

        ``mcp.search_k`` chunks are retrieved; each document appears once, at its best chunk.

        Raises:
            InputError: the query is empty, too long, or holds NUL or a lone surrogate.
            IndexMismatchError, ProviderError, StorageError: as the Knowledge Store's search.

        """
        depth = mcp_settings(self._runtime.settings).search_k
        found = self._runtime.knowledge.search(principal, query, depth)
        results: dict[int, SearchResult] = {}
        for hit in found.hits:
            if hit.document_id not in results:
                results[hit.document_id] = SearchResult(
                    id=str(hit.document_id),
                    title=hit.title,
                    url=self._urls.document(hit.document_id),
                )
        return SearchResults(results=list(results.values()))

    def fetch(self, principal: Principal, document_id: str) -> FetchedDocument:
        """Return one document's text, at most ``mcp.max_fetch_chars`` characters.

        Raises:
            InputError: ``id`` is not decimal digits.
            NotFoundError: no such document, or one ``principal`` may not read (same message).

        """
        number = _document_id(document_id, "id")
        if number is None:
            raise NotFoundError(f"no document {document_id.strip()}")
        limit = mcp_settings(self._runtime.settings).max_fetch_chars
        with self._runtime.database.session() as session:
            document = read_document(session, principal, number, limit)
        return FetchedDocument(
            id=str(document.id),
            title=document.title,
            text=document.text,
            url=self._urls.document(document.id),
            metadata={
                "source": document.source,
                "media_type": document.media_type,
                "updated_at": document.updated_at.isoformat(),
                "truncated": "true" if document.truncated else "false",
            },
        )

    def search_knowledge(
        self, principal: Principal, query: str, k: int, document_ids: list[str] | None
    ) -> Findings:
        """Return the ``k`` best passages for ``query``, optionally from some documents only.

        With ``document_ids``, the caller's search runs ``knowledge.max_k`` deep and keeps the
        passages of those documents: the same ranking, narrowed (a document outside the
        caller's top ``max_k`` passages contributes none).

        Raises:
            InputError: a bad query, ``k`` outside ``1..knowledge.max_k``, more than
                :data:`MAX_DOCUMENT_IDS` ids, or an id that is not decimal digits.
            IndexMismatchError, ProviderError, StorageError: as the Knowledge Store's search.

        """
        settings = self._runtime.settings.knowledge
        validate_query(query, k, settings)
        wanted: set[int] | None = None
        if document_ids is not None:
            if len(document_ids) > MAX_DOCUMENT_IDS:
                raise InputError(
                    "document_ids", f"names {len(document_ids)} ids; at most {MAX_DOCUMENT_IDS}"
                )
            parsed = [_document_id(v, f"document_ids[{i}]") for i, v in enumerate(document_ids)]
            wanted = {n for n in parsed if n is not None}
        depth = k if wanted is None else settings.max_k
        found = self._runtime.knowledge.search(principal, query, depth)
        hits = [h for h in found.hits if wanted is None or h.document_id in wanted][:k]
        return Findings(
            findings=[
                Finding(
                    id=str(hit.document_id),
                    title=hit.title,
                    source=hit.source,
                    heading_path=hit.heading_path,
                    text=hit.text,
                    score=round(hit.score, 6),
                    url=self._urls.document(hit.document_id),
                )
                for hit in hits
            ]
        )
