"""``GET /v1/health``: liveness, version, database and auth mode."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter
from sqlalchemy import text

from search2o.api.deps import RuntimeDep
from search2o.api.openapi import error_responses
from search2o.api.schemas import HealthPublic

router = APIRouter(prefix="/v1", tags=["health"])


@router.get("/health", responses=error_responses(503))
def health(runtime: RuntimeDep) -> HealthPublic:
    """Report that the server and its database answer."""
    with runtime.database.session() as session:
        session.execute(text("SELECT 1"))
    return HealthPublic(
        status="ok",
        version=version("search2o"),
        database=runtime.database.backend,
        auth_mode=runtime.settings.auth_mode,
    )
