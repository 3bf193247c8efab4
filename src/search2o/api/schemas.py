"""Request and response bodies of the HTTP API, with limits declared on fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

__all__ = [
    "TEXT_PATTERN",
    "DocumentId",
    "DocumentPublic",
    "DocumentTextPublic",
    "HealthPublic",
    "IngestPublic",
    "MemoryLabel",
    "MessageId",
    "Offset",
    "SearchHitPublic",
    "SearchPublic",
    "SearchRequest",
    "text_field",
]

INT32_MAX = 2_147_483_647
"""The largest id or offset a query may carry (PostgreSQL ``integer``; also SQLite's bound)."""

DocumentId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a document id")]
Offset = Annotated[int, Query(ge=0, le=INT32_MAX, description="rows to skip, 0 or more")]
ConversationId = Annotated[str, Path(max_length=64, description="a conversation id")]
MessageId = Annotated[str, Path(max_length=64, description="a message id")]
AgentName = Annotated[str, Path(max_length=100, description="an agent's name")]
MemoryLabel = Annotated[str, Path(max_length=64, description="a memory's label")]

TEXT_PATTERN = r"^[^\u0000]*\S[^\u0000]*$"
"""Text that is not blank and holds no NUL (ECMA-262 syntax, as JSON Schema's ``pattern``)."""


def text_field(description: str, **kwargs: Any) -> Any:
    """Return a ``Field`` for user text, documented as non-blank without NUL.

    The rule is enforced by :func:`search2o.textrules.check_text` where the text is used, whose
    errors name the field and the rule; the pattern only documents it.
    """
    return Field(
        description=description, json_schema_extra={"pattern": TEXT_PATTERN}, **kwargs
    )


class SearchRequest(BaseModel):
    """``POST /v1/search``: a query and how many hits to return.

    Types are strict: ``"5"`` or ``true`` are not a ``k``; unknown fields are refused.
    """

    model_config = ConfigDict(extra="forbid")

    query: StrictStr = text_field("free text; not empty, at most knowledge.max_query_chars")
    k: StrictInt = Field(default=5, ge=1, description="1..knowledge.max_k")


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
