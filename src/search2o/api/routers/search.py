"""``POST /v1/search``: hybrid search under the caller's access rights."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.wire.schemas import SearchHitPublic, SearchPublic, SearchRequest

router = APIRouter(prefix="/v1", tags=["search"], route_class=StrictJsonRoute)


@router.post("/search", responses=error_responses(401, 409, 413, 422, 502, 503))
def search(body: SearchRequest, user: CurrentUser, runtime: RuntimeDep) -> SearchPublic:
    """Return up to ``k`` chunks the caller may read, best first (422 on an empty query)."""
    result = runtime.knowledge.search(user, body.query, body.k)
    return SearchPublic(
        hits=[SearchHitPublic(**asdict(h)) for h in result.hits],
        embed_ms=result.embed_ms,
        search_ms=result.search_ms,
    )
