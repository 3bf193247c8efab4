"""Request and response bodies of the memory endpoints (``/v1/memories``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from search2o.wire.fields import NAME_PATTERN, JsonInt, text_field
from search2o.wire.names import json_rule

__all__ = [
    "MemoryHitPublic",
    "MemoryListPublic",
    "MemoryPublic",
    "MemorySearchPublic",
    "MemorySearchRequest",
]


class MemorySearchRequest(BaseModel):
    """``POST /v1/memories/search``: find the caller's memories by meaning.

    Types are strict: ``"5"`` is not a ``limit``.
    """

    model_config = ConfigDict(extra="forbid")

    query: StrictStr = text_field(
        "free text; not empty, at most memory.max_query_chars; never stored or logged"
    )
    agent: StrictStr | None = Field(
        default=None,
        max_length=100,
        description="only this agent's memories",
        json_schema_extra=json_rule(NAME_PATTERN, 100),
    )
    label: StrictStr | None = Field(
        default=None,
        max_length=64,
        description="only memories with this label",
        json_schema_extra=json_rule(NAME_PATTERN, 64),
    )
    limit: JsonInt = Field(default=10, ge=1, description="most matches, 1..memory.max_limit")


class MemoryPublic(BaseModel):
    """One of the caller's memories as listed."""

    agent: str = Field(description="the agent that stored it")
    label: str = Field(description="its label; storing under it again replaces the text")
    text: str = Field(description="the text, exactly as stored")
    created_at: datetime = Field(description="when it was last stored")
    last_retrieved_at: datetime | None = Field(
        description="when an agent's query last returned it (eviction keeps recent ones)"
    )


class MemoryListPublic(BaseModel):
    """The caller's memories, ordered by agent, then label."""

    memories: list[MemoryPublic]


class MemoryHitPublic(BaseModel):
    """One memory that matched, with its cosine similarity to the query."""

    agent: str = Field(description="the agent that stored it")
    label: str = Field(description="its label")
    text: str = Field(description="the text, exactly as stored")
    created_at: datetime = Field(description="when it was last stored")
    score: float = Field(description="cosine similarity, at least memory.min_score")


class MemorySearchPublic(BaseModel):
    """Matches, best first; empty when nothing is relevant enough."""

    memories: list[MemoryHitPublic]
