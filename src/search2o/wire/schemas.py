"""Request and response bodies of search, documents and health, with limits declared on fields."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from search2o.wire.fields import JsonInt, text_field

__all__ = [
    "DocumentPublic",
    "DocumentTextPublic",
    "HealthPublic",
    "IngestPublic",
    "SearchHitPublic",
    "SearchPublic",
    "SearchRequest",
]


class SearchRequest(BaseModel):
    """``POST /v1/search``: a query and how many hits to return.

    Types are strict: ``"5"`` or ``true`` are not a ``k``; unknown fields are refused.
    """

    model_config = ConfigDict(extra="forbid")

    query: StrictStr = text_field("free text; not empty, at most knowledge.max_query_chars")
    k: JsonInt = Field(default=5, ge=1, description="1..knowledge.max_k")


class SearchHitPublic(BaseModel):
    """One hit: the chunk text with its document's title and path, heading path and scores."""

    chunk_id: int
    document_id: int
    title: str
    source: str
    heading_path: list[str]
    text: str
    score: float
    similarity: float | None
    vector_rank: int | None
    lexical_rank: int | None


class SearchPublic(BaseModel):
    """Search results, best first, with timings in milliseconds."""

    hits: list[SearchHitPublic]
    embed_ms: float
    search_ms: float


class DocumentPublic(BaseModel):
    """A stored document as listed."""

    id: int
    source: str
    title: str
    media_type: str
    size_bytes: int
    chunk_count: int
    access: list[str]
    updated_at: datetime


class DocumentTextPublic(BaseModel):
    """A document's text as indexed: its chunks in order, headings as Markdown headings."""

    id: int
    source: str
    title: str
    media_type: str
    updated_at: datetime
    text: str
    truncated: bool = Field(description="the text was cut at knowledge.max_extracted_chars")


class IngestPublic(BaseModel):
    """Outcome of one uploaded file: ``added``, ``updated``, ``unchanged`` or ``skipped``."""

    source: str
    status: str
    chunks: int
    reason: str
    document_id: int | None
    title: str
    access_before: list[str] | None = Field(
        default=None, description="the access list before this upload changed it ([] = everyone)"
    )


class HealthPublic(BaseModel):
    """Liveness and the mode the server runs in."""

    status: str
    version: str
    database: str
    auth_mode: str
