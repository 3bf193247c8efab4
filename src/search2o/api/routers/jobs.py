"""``GET /v1/jobs/{id}``: a background job of the caller (an upload's ingestion, ...).

Another user's job is answered exactly like a missing one (404).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.jobs import JobInfo, find_job

__all__ = ["JobProgressPublic", "JobPublic", "router"]

router = APIRouter(prefix="/v1", tags=["jobs"], route_class=StrictJsonRoute)

JobId = Annotated[str, Path(max_length=64, description="the job's id")]


class JobProgressPublic(BaseModel):
    """How far a running job got."""

    done: int
    total: int | None
    message: str | None = None


class JobPublic(BaseModel):
    """A job as its owner sees it (no payload, lease or dedupe key)."""

    id: str
    kind: str = Field(description="e.g. documents.ingest")
    state: str = Field(description="queued, running, done or failed")
    attempts: int
    max_attempts: int
    progress: JobProgressPublic | None
    result: Any = Field(description="when done: what the job returns (documents.ingest: outcomes)")
    error: str | None = Field(description="when failed: why")
    created_at: str
    started_at: str | None
    finished_at: str | None

    @classmethod
    def of(cls, job: JobInfo) -> JobPublic:
        """Describe a job."""
        return cls.model_validate(job.to_public())


@router.get("/jobs/{job_id}", responses=error_responses(401, 404, 422, 503))
def get_job(job_id: JobId, user: CurrentUser, runtime: RuntimeDep) -> JobPublic:
    """Return one of the caller's jobs: its state, progress, and result or error."""
    return JobPublic.of(find_job(runtime.database, job_id, owner=user.user_id))
