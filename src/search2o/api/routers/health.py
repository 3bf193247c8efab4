"""``GET /v1/health`` (liveness) and ``GET /v1/health/ready`` (readiness).

Liveness answers as long as the process serves HTTP: no database call, so a database outage
does not make an orchestrator restart every API process. Readiness says whether this process
should get traffic (:mod:`search2o.api.readiness`): 200 when every check passes, else 503
with the same body naming the failed checks. Both answer without a token.
"""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from search2o.api.deps import RuntimeDep
from search2o.api.readiness import ReadinessPublic, check_readiness
from search2o.wire.schemas import HealthPublic

router = APIRouter(prefix="/v1", tags=["health"])


@router.get("/health")
def health(runtime: RuntimeDep) -> HealthPublic:
    """Report that the process answers: version, database backend and auth mode (no I/O)."""
    return HealthPublic(
        status="ok",
        version=version("search2o"),
        database=runtime.database.backend,
        auth_mode=runtime.settings.auth_mode,
    )


@router.get(
    "/health/ready",
    response_model=ReadinessPublic,
    responses={
        503: {
            "model": ReadinessPublic,
            "description": "not ready: `failed` names the checks that failed",
        }
    },
)
async def ready(request: Request, runtime: RuntimeDep) -> Response:
    """Report whether this process should get traffic: database, migrations, jobs, threads."""
    state = request.app.state
    report = await check_readiness(runtime, state.ready_probe, state.head_revision)
    return JSONResponse(report.model_dump(), status_code=503 if report.failed else 200)
