"""The caller's long-term memories: list, search, delete.

Another user's memory is answered exactly like a missing one (404). Searching here does not
count as a retrieval (eviction order is what agents retrieve), and the query is never logged:
it travels in the body of a POST, and the request log holds the path only.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.memory_schemas import (
    MemoryHitPublic,
    MemoryListPublic,
    MemoryPublic,
    MemorySearchPublic,
    MemorySearchRequest,
)
from search2o.api.openapi import error_responses
from search2o.api.params import AgentName, MemoryLabel, Offset

router = APIRouter(prefix="/v1", tags=["memories"], route_class=StrictJsonRoute)


@router.get("/memories", responses=error_responses(401, 422, 503))
def list_memories(
    user: CurrentUser,
    runtime: RuntimeDep,
    agent: Annotated[
        str | None, Query(max_length=100, description="only this agent's memories")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="1..1000")] = 100,
    offset: Offset = 0,
) -> MemoryListPublic:
    """List the caller's memories, ordered by agent, then label."""
    rows = runtime.memory.list(user, agent=agent, limit=limit, offset=offset)
    return MemoryListPublic(
        memories=[
            MemoryPublic(
                agent=r.agent,
                label=r.label,
                text=r.text,
                created_at=r.created_at,
                last_retrieved_at=r.last_retrieved_at,
            )
            for r in rows
        ]
    )


@router.post("/memories/search", responses=error_responses(401, 413, 422, 502, 503))
def search_memories(
    body: MemorySearchRequest, user: CurrentUser, runtime: RuntimeDep
) -> MemorySearchPublic:
    """Find the caller's memories by meaning, best first; an unrelated query finds none."""
    hits = runtime.memory.search(
        user, body.query, agent=body.agent, label=body.label, limit=body.limit, touch=False
    )
    return MemorySearchPublic(
        memories=[
            MemoryHitPublic(
                agent=h.agent, label=h.label, text=h.text, created_at=h.created_at, score=h.score
            )
            for h in hits
        ]
    )


@router.delete(
    "/memories/{agent}/{label}", status_code=204, responses=error_responses(401, 404, 422, 503)
)
def delete_memory(
    agent: AgentName, label: MemoryLabel, user: CurrentUser, runtime: RuntimeDep
) -> Response:
    """Delete one of the caller's memories (404 when missing or another user's)."""
    runtime.memory.delete(user, agent, label)
    return Response(status_code=204)
