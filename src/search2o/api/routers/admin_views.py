"""Read-only admin views: ``GET /v1/feedback``, ``GET /v1/settings``.

What the Web App's feedback and settings pages show. Settings change through the
configuration (``SEARCH2O_*``); nothing here writes. Users are :mod:`.users`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from search2o.api.deps import AdminUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.me_schemas import (
    FeedbackItemPublic,
    FeedbackPublic,
    ServerSettingsPublic,
)
from search2o.api.openapi import error_responses
from search2o.query.feedback import MAX_FEEDBACK, list_feedback

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["admin"], route_class=StrictJsonRoute)


@router.get("/feedback", responses=error_responses(401, 403, 422, 503))
def feedback(
    admin: AdminUser,
    runtime: RuntimeDep,
    rating: Annotated[
        Literal["up", "down", "any"], Query(description="which ratings; default down")
    ] = "down",
    limit: Annotated[int, Query(ge=1, le=MAX_FEEDBACK, description="1..500")] = 100,
) -> FeedbackPublic:
    """List rated answers, most recently rated first: reasons, comment, whether it kept a trace."""
    chosen = None if rating == "any" else rating
    items = list_feedback(runtime.database, runtime.vault, admin, chosen, limit)
    return FeedbackPublic(feedback=[FeedbackItemPublic(**asdict(i)) for i in items])


@router.get("/settings", responses=error_responses(401, 403, 503))
def server_settings(admin: AdminUser, runtime: RuntimeDep) -> ServerSettingsPublic:
    """Return the settings an admin may see: auth mode, backend, chat model, web search."""
    settings = runtime.settings
    profile = settings.chat.active_profile
    search = settings.chat.web_search
    return ServerSettingsPublic(
        auth_mode=settings.auth_mode,
        database=runtime.database.backend,
        chat_provider=profile.provider,
        chat_model=profile.model or None,
        web_search=search.provider is not None,
        web_search_provider=search.provider,
        retention_days=dict(settings.retention.days),
    )
