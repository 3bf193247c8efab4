"""The ``runs`` settings section: answers that run on after their client left."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

__all__ = ["RunSettings"]


class RunSettings(BaseModel):
    """Answers in flight (runs): how their events are recorded, followed and cleaned up.

    An answer's events are recorded in batches at most ``flush_s`` apart, sealed; the process
    writing it renews its heartbeat every ``heartbeat_s``; a run whose heartbeat is older than
    ``stale_s`` lost its process (``kill -9``, a crash) and is marked interrupted with the part
    of the answer recorded so far. A follower on another process polls every ``poll_s``. Events
    are kept ``keep_s`` after the answer is stored, for a client that reconnects late, then
    removed (the answer itself stays in the conversation).
    """

    model_config = ConfigDict(extra="forbid")

    flush_s: float = Field(default=0.1, gt=0, le=10, description="record batches this often")
    heartbeat_s: float = Field(default=1.0, gt=0, le=60)
    stale_s: float = Field(default=30.0, gt=0, le=3600, description="no heartbeat: orphaned")
    poll_s: float = Field(default=0.2, gt=0, le=10, description="followers on other processes")
    keep_s: float = Field(default=600.0, ge=0, le=86400, description="events kept after the end")
    sweep_interval_s: float = Field(default=15.0, ge=0, le=3600, description="0 = never")

    @model_validator(mode="after")
    def _stale_after_heartbeats(self) -> RunSettings:
        if self.stale_s < 5 * self.heartbeat_s:
            raise ValueError("stale_s must be at least 5 x heartbeat_s")
        return self
