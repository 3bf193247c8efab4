"""``GET /v1/me/conversations``: the caller's conversations by cursor, with title search.

The Web App's sidebar reads this (:mod:`search2o.query.conversation_pages` has the order, the
cursor and the search). ``GET /v1/conversations`` (offset pages) stays for scripts.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.me_schemas import ConversationPagePublic, PagedConversationPublic
from search2o.api.openapi import error_responses
from search2o.query import conversation_pages

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["conversations"], route_class=StrictJsonRoute)


@router.get("/me/conversations", responses=error_responses(401, 422, 500, 503))
def conversation_page(
    user: CurrentUser,
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=conversation_pages.MAX_PAGE, description="1..200")] = 50,
    cursor: Annotated[
        str | None,
        Query(
            max_length=200,
            description="`next_cursor` of the previous page",
            # Declared, and checked by the engine with its own message (field ``cursor``).
            json_schema_extra={"pattern": conversation_pages.CURSOR_PATTERN},
        ),
    ] = None,
    q: Annotated[
        str | None,
        Query(
            max_length=conversation_pages.MAX_QUERY_CHARS,
            description="only titles containing this (case-insensitive)",
        ),
    ] = None,
) -> ConversationPagePublic:
    """Return one page of the caller's conversations: pinned first, then most recently used.

    With ``q`` only titles that contain it; a search reads a bounded number of conversations
    per request, so a page may hold fewer than ``limit`` with a ``next_cursor`` to go on.
    """
    result = conversation_pages.page(
        runtime.database,
        runtime.vault,
        user,
        limit=limit,
        cursor=cursor,
        query=q,
        retention=runtime.settings.retention,
    )
    return ConversationPagePublic(
        conversations=[
            PagedConversationPublic(**asdict(item.info), expires_at=item.expires_at)
            for item in result.items
        ],
        next_cursor=result.next_cursor,
    )
