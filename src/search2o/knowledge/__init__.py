"""Knowledge Store: loaders, chunking, ingestion, and hybrid search under access rights.

The public names are imported on first use (:mod:`search2o.lazy`): a child process that only
parses a file (:mod:`search2o.knowledge.isolation`) does not load the store and its database.
"""

from typing import TYPE_CHECKING

from search2o.lazy import lazy_exports

if TYPE_CHECKING:
    from search2o.knowledge.access import AccessList
    from search2o.knowledge.ingest import IngestOutcome, IngestSummary
    from search2o.knowledge.search import SearchHit, SearchResult
    from search2o.knowledge.store import KnowledgeStore

__all__ = [
    "AccessList",
    "IngestOutcome",
    "IngestSummary",
    "KnowledgeStore",
    "SearchHit",
    "SearchResult",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AccessList": "search2o.knowledge.access",
        "IngestOutcome": "search2o.knowledge.ingest",
        "IngestSummary": "search2o.knowledge.ingest",
        "KnowledgeStore": "search2o.knowledge.store",
        "SearchHit": "search2o.knowledge.search",
        "SearchResult": "search2o.knowledge.search",
    },
)
