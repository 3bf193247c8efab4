"""The tools of a turn: ``search_knowledge`` and ``web_search``.

A tool runs one call and returns a :class:`ToolOutcome`: the sources it found and a trace entry
(query, hits with scores, timing). Calls of one turn run concurrently; afterwards
:func:`number_results` numbers their sources in call order with the turn's
:class:`~search2o.query.citations.CitationRegistry` (unique per document section across all
calls, the same on every run); :func:`search2o.providers.chat.render_passages` gives the text a
remote model reads: ``[n] title — location`` followed by the passage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from search2o.accounts import Principal
from search2o.errors import InputError
from search2o.knowledge.store import KnowledgeStore
from search2o.providers.chat import Passage, ToolSpec
from search2o.query.citations import CitationRegistry, safe_link, section_key
from search2o.query.websearch import WebSearchProvider

__all__ = [
    "Found",
    "KnowledgeTool",
    "Tool",
    "ToolOutcome",
    "WebSearchTool",
    "number_results",
    "query_argument",
]

_QUERY_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "A self-contained search query: resolve pronouns and follow-ups "
            "from the conversation so it makes sense on its own.",
        }
    },
    "required": ["query"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Found:
    """One source a tool found, keyed by document section or by address.

    ``key`` is a section's (:func:`~search2o.query.citations.section_key`) or
    ``url:<address>``; ``url`` is a link target (an http/https address from
    :func:`~search2o.query.citations.safe_link`) or ``None``; ``source`` is the address as the
    engine sent it, as text.
    """

    key: str
    title: str
    source: str
    text: str
    similarity: float | None = None
    heading_path: list[str] = field(default_factory=list)
    document_id: int | None = None
    chunk_id: int | None = None
    url: str | None = None


@dataclass
class ToolOutcome:
    """What one tool call returned: the sources, best first, and its ``trace`` entry."""

    found: list[Found] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)


class Tool(Protocol):
    """A tool offered to the chat model in one turn."""

    spec: ToolSpec

    def run(self, principal: Principal, arguments: dict[str, Any]) -> ToolOutcome:
        """Run one call for ``principal``; errors are :class:`~search2o.errors.Search2oError`."""
        ...


def query_argument(arguments: dict[str, Any], max_chars: int) -> str:
    """Return the stripped ``query`` argument of a tool call.

    Raises:
        InputError: ``query`` is missing, not a string, empty, or longer than ``max_chars``.

    """
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InputError("query", "the tool call needs a non-empty string `query`")
    if len(query) > max_chars:
        raise InputError("query", f"is {len(query)} characters long; the limit is {max_chars}")
    return query.strip()


def number_results(found: list[Found], registry: CitationRegistry) -> list[Passage]:
    """Give ``found`` citation numbers from ``registry``; return them as passages, in order."""
    passages = []
    for item in found:
        number = registry.register(
            item.key,
            title=item.title,
            source=item.source,
            heading_path=item.heading_path,
            document_id=item.document_id,
            chunk_id=item.chunk_id,
            url=item.url,
        )
        location = " > ".join([item.source, *item.heading_path])
        passages.append(
            Passage(
                number, item.title, location, item.text, item.similarity, tuple(item.heading_path)
            )
        )
    return passages


class KnowledgeTool:
    """``search_knowledge(query)``: hybrid search of the Knowledge Store under the caller's rights.

    A passage's ``similarity`` is the query-chunk cosine; a chunk only the keyword retriever
    found (outside the vector retriever's candidates) gets 0.0, so it never counts as a close
    match on its own.
    """

    spec = ToolSpec(
        name="search_knowledge",
        description="Search the company's knowledge base (documents the user may read). "
        "Returns numbered passages; cite them as [n].",
        parameters=_QUERY_SCHEMA,
    )

    def __init__(self, knowledge: KnowledgeStore, k: int) -> None:
        self._knowledge = knowledge
        self._k = k

    def run(self, principal: Principal, arguments: dict[str, Any]) -> ToolOutcome:
        """Search the Knowledge Store; see :class:`Tool`.

        Raises:
            InputError: a bad ``query`` argument.
            ProviderError, StorageError: the embedder or the database failed.

        """
        query = query_argument(arguments, self._knowledge.settings.max_query_chars)
        started = time.perf_counter()
        result = self._knowledge.search(principal, query, self._k)
        found = [
            Found(
                key=section_key(hit.document_id, hit.heading_path),
                title=hit.title,
                source=hit.source,
                text=hit.text,
                similarity=hit.similarity if hit.similarity is not None else 0.0,
                heading_path=hit.heading_path,
                document_id=hit.document_id,
                chunk_id=hit.chunk_id,
            )
            for hit in result.hits
        ]
        trace = {
            "query": query,
            "hits": [
                {
                    "chunk_id": h.chunk_id,
                    "document_id": h.document_id,
                    "score": round(h.score, 6),
                    "similarity": None if h.similarity is None else round(h.similarity, 4),
                    "vector_rank": h.vector_rank,
                    "lexical_rank": h.lexical_rank,
                }
                for h in result.hits
            ],
            "embed_ms": round(result.embed_ms, 2),
            "search_ms": round(result.search_ms, 2),
            "ms": round((time.perf_counter() - started) * 1000, 2),
        }
        return ToolOutcome(found, trace)


class WebSearchTool:
    """``web_search(query)``: the admin-configured :class:`WebSearchProvider`."""

    spec = ToolSpec(
        name="web_search",
        description="Search the public web. Returns numbered pages; cite them as [n].",
        parameters=_QUERY_SCHEMA,
    )

    def __init__(self, provider: WebSearchProvider, k: int, max_query_chars: int) -> None:
        self._provider = provider
        self._k = k
        self._max_chars = max_query_chars

    def run(self, principal: Principal, arguments: dict[str, Any]) -> ToolOutcome:
        """Search the web; see :class:`Tool`.

        Raises:
            InputError: a bad ``query`` argument.
            ProviderError: the provider failed.

        """
        query = query_argument(arguments, self._max_chars)
        started = time.perf_counter()
        results = self._provider.search(query, self._k)
        found = [
            Found(
                key=f"url:{r.url}",
                title=r.title,
                source=r.url,
                text=r.snippet,
                url=safe_link(r.url),
            )
            for r in results
        ]
        trace = {
            "query": query,
            "hits": [{"url": f.url} for f in found],
            "ms": round((time.perf_counter() - started) * 1000, 2),
        }
        return ToolOutcome(found, trace)
