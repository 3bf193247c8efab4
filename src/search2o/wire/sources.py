"""The wire models of ``/v1/sources`` (admins only; docs/connectors.md).

A source's credentials go in and never come out: an answer says ``"set"`` or ``"not set"``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from search2o.wire.fields import JsonInt

__all__ = [
    "SOURCE_NAME_PATTERN",
    "SourceCreate",
    "SourceListPublic",
    "SourcePatch",
    "SourcePublic",
    "SyncRequest",
    "SyncStarted",
]

SOURCE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
"""A source's name (also :data:`search2o.connectors.sources.NAME_PATTERN`)."""


class SourceCreate(BaseModel):
    """A new source: its name, connector kind, settings, secrets and schedule."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(
        max_length=64, pattern=SOURCE_NAME_PATTERN, description="unique, e.g. handbook"
    )
    kind: StrictStr = Field(max_length=32, description="an installed connector, e.g. folder")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="the connector's settings (docs/connectors.md)"
    )
    credentials: dict[str, StrictStr] | None = Field(
        default=None, description="the connector's secrets; sealed, never returned"
    )
    schedule_s: JsonInt | None = Field(
        default=None, ge=60, le=2_592_000, description="sync every N seconds; null: manual"
    )


class SourcePatch(BaseModel):
    """A change: settings merged into the stored ones, new secrets, a new schedule."""

    model_config = ConfigDict(extra="forbid")

    settings: dict[str, Any] | None = None
    credentials: dict[str, StrictStr] | None = None
    schedule_s: JsonInt | None = Field(default=None, ge=60, le=2_592_000)
    manual: StrictBool = Field(default=False, description="true: sync only on demand")


class SourcePublic(BaseModel):
    """A source as an admin sees it (never its secrets)."""

    id: int
    name: str
    kind: str
    settings: dict[str, Any]
    credentials: Literal["set", "not set"]
    schedule_s: int | None
    status: Literal["idle", "running", "blocked", "stopped", "interrupted"]
    documents: int = Field(description="documents it brought in")
    unmapped: int = Field(description="of them, readable by nobody: access not mapped")
    last_started_at: datetime | None
    last_success: datetime | None
    last_error: str | None
    last_error_at: datetime | None
    last_counts: dict[str, Any] | None = Field(description="the last sync's counts")
    progress: dict[str, Any] | None = Field(description="the running (or last) sync's counts")
    next_sync_at: datetime | None
    created_at: datetime
    updated_at: datetime


class SourceListPublic(BaseModel):
    """Every source, by name."""

    sources: list[SourcePublic]


class SyncRequest(BaseModel):
    """How to sync: a full listing, and whether a mass deletion is accepted."""

    model_config = ConfigDict(extra="forbid")

    full: StrictBool = False
    allow_mass_delete: StrictBool = False


class SyncStarted(BaseModel):
    """A sync queued as a job: follow it with ``GET /v1/jobs/{job}`` or the source's progress."""

    job: str
    source: str
