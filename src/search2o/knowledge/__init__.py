"""Knowledge Store: loaders, chunking, ingestion, and hybrid search under access rights."""

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
