"""``GET /v1/passages/{chunk_id}``: the text of a cited passage, under the reader's rights."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.knowledge.passages import read_passage
from search2o.wire.fields import INT32_MAX

__all__ = ["PassagePublic", "router"]

router = APIRouter(prefix="/v1", tags=["search"], route_class=StrictJsonRoute)

ChunkId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a chunk id (citation chunk_ids)")]


class PassagePublic(BaseModel):
    """A passage: its text (plain text), document, and heading path."""

    chunk_id: int
    document_id: int
    title: str
    source: str
    heading_path: list[str]
    text: str


@router.get("/passages/{chunk_id}", responses=error_responses(401, 404, 422, 503))
def passage(chunk_id: ChunkId, user: CurrentUser, runtime: RuntimeDep) -> PassagePublic:
    """Return a passage the caller may read (404 when missing or not readable)."""
    return PassagePublic(**asdict(read_passage(runtime.database, user, chunk_id)))
