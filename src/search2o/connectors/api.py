"""``/v1/sources``: create, list, get, update, delete sources; start a sync; read its progress.

Admins only: anyone else gets 404, exactly as for a source that does not exist. A sync started
here runs as a ``sources.sync`` job on the queue (``serve``'s consumer or a ``worker``); its
progress is the source's ``progress`` (and the job's). Secrets go in, never out.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Response

from search2o.accounts import Principal
from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.connectors.jobs import SYNC, sync_payload
from search2o.connectors.sources import SourceInfo
from search2o.connectors.wiring import sources_of
from search2o.errors import NotFoundError
from search2o.wire.sources import (
    SOURCE_NAME_PATTERN,
    SourceCreate,
    SourceListPublic,
    SourcePatch,
    SourcePublic,
    SyncRequest,
    SyncStarted,
)

__all__ = ["sources_router"]


def _admin_or_missing(user: CurrentUser) -> Principal:
    """Return the caller if an admin, else 404 as for a missing object (no hint)."""
    if not user.is_admin:
        raise NotFoundError("not found")
    return user


Admin = Annotated[Principal, Depends(_admin_or_missing)]
SourceName = Annotated[
    str, Path(max_length=64, pattern=SOURCE_NAME_PATTERN, description="the source's name")
]

sources_router = APIRouter(prefix="/v1", tags=["sources"], route_class=StrictJsonRoute)


def _public(info: SourceInfo) -> SourcePublic:
    return SourcePublic.model_validate(info.to_json())


@sources_router.get("/sources", responses=error_responses(401, 404, 503))
def list_sources(admin: Admin, runtime: RuntimeDep) -> SourceListPublic:
    """List every source with its documents, status, last success and last error."""
    return SourceListPublic(sources=[_public(s) for s in sources_of(runtime).all()])


@sources_router.post(
    "/sources", status_code=201, responses=error_responses(401, 404, 409, 413, 422, 503)
)
def create_source(body: SourceCreate, admin: Admin, runtime: RuntimeDep) -> SourcePublic:
    """Add a source (409 if the name is taken; 422 names a bad setting)."""
    info = sources_of(runtime, remote=True).add(
        body.name, body.kind, body.settings, body.credentials, body.schedule_s
    )
    return _public(info)


@sources_router.get("/sources/{name}", responses=error_responses(401, 404, 422, 503))
def get_source(name: SourceName, admin: Admin, runtime: RuntimeDep) -> SourcePublic:
    """One source, with the running (or last) sync's progress."""
    return _public(sources_of(runtime).get(name))


@sources_router.patch("/sources/{name}", responses=error_responses(401, 404, 413, 422, 503))
def update_source(
    name: SourceName, body: SourcePatch, admin: Admin, runtime: RuntimeDep
) -> SourcePublic:
    """Change settings (merged), secrets or schedule; access changes apply at the next sync."""
    schedule: int | str | None = "keep"
    if body.manual:
        schedule = None
    elif body.schedule_s is not None:
        schedule = body.schedule_s
    info = sources_of(runtime, remote=True).update(
        name, settings=body.settings, credentials=body.credentials, schedule_s=schedule
    )
    return _public(info)


@sources_router.delete(
    "/sources/{name}", status_code=204, responses=error_responses(401, 404, 409, 422, 503)
)
def delete_source(
    name: SourceName,
    admin: Admin,
    runtime: RuntimeDep,
    keep_documents: Annotated[
        bool, Query(description="keep its documents, untagged (default: delete them)")
    ] = False,
) -> Response:
    """Remove a source, with its documents unless ``keep_documents`` (409 while it syncs)."""
    sources_of(runtime).remove(name, keep_documents)
    return Response(status_code=204)


@sources_router.post(
    "/sources/{name}/sync", status_code=202, responses=error_responses(401, 404, 413, 422, 503)
)
def start_sync(
    name: SourceName, admin: Admin, runtime: RuntimeDep, body: SyncRequest | None = None
) -> SyncStarted:
    """Queue a sync of the source (one runs at a time; its progress is the source's)."""
    request = body or SyncRequest()
    sources_of(runtime).get(name)  # 404 before anything is queued
    payload = sync_payload(name, request.full, request.allow_mass_delete)
    job = runtime.jobs.enqueue(SYNC, payload, owner=admin.user_id)  # they follow /v1/jobs/{id}
    return SyncStarted(job=job.id, source=name)
