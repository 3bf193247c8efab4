"""The body of ``GET /v1/runs/{id}`` and ``POST /v1/runs/{id}/stop`` (docs/api.md, "Runs")."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["RunPublic"]


class RunPublic(BaseModel):
    """A run as its owner sees it."""

    id: str
    conversation_id: str | None
    status: str = Field(description="running, complete, failed or interrupted")
    last_event_id: int = Field(description="the number of the last event recorded")
    stop_requested: bool
