"""``GET /v1/me``: who the caller is, so a client shows what they may use (admin pages)."""

from __future__ import annotations

from fastapi import APIRouter

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.me_schemas import MePublic
from search2o.api.openapi import error_responses

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["me"], route_class=StrictJsonRoute)


@router.get("/me", responses=error_responses(401, 503))
def me(user: CurrentUser, runtime: RuntimeDep) -> MePublic:
    """Return the caller: email, groups, admin flag, plan, and their conversations' lifetime.

    The admin flag only tells a client what to show: every admin operation checks it again.
    """
    settings = runtime.settings
    return MePublic(
        email=user.email,
        groups=list(user.groups),
        is_admin=user.is_admin,
        plan=user.plan,
        auth_mode=settings.auth_mode,
        retention_days=settings.retention.days_for(user.plan),
    )
