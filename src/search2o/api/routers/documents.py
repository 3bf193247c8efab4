"""``/v1/documents``: upload (multipart), list, read and delete documents."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import PureWindowsPath
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Query, Response, UploadFile, status
from pydantic import BaseModel

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.api.params import DocumentId, EmailText, GroupName, UploadPath
from search2o.api.routers.jobs import JobPublic
from search2o.api.uploads import check_name, part_filename
from search2o.errors import InputError, PermissionDeniedError
from search2o.jobs.kinds import INGEST, ingest_dedupe_key
from search2o.knowledge.access import AccessList
from search2o.knowledge.reading import read_document
from search2o.observability.tracing import traceparent
from search2o.storage.models import new_id
from search2o.storage.upload_models import UploadPart
from search2o.wire.schemas import DocumentPublic, DocumentTextPublic, IngestPublic

MAX_WAIT_S = 300.0
"""The longest ``wait`` an upload may ask for, in seconds."""


class UploadAcceptedPublic(BaseModel):
    """An accepted upload: the job that ingests it (``GET /v1/jobs/{id}``)."""

    job: JobPublic


router = APIRouter(prefix="/v1/documents", tags=["documents"], route_class=StrictJsonRoute)


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    responses={
        201: {
            "model": list[IngestPublic],
            "description": "with `wait`: ingested in time; one outcome per file, in order",
        },
        202: {"model": UploadAcceptedPublic, "description": "accepted: follow the job"},
        **error_responses(401, 403, 409, 413, 422, 502, 503),
    },
)
def upload_documents(
    user: CurrentUser,
    runtime: RuntimeDep,
    response: Response,
    files: Annotated[
        list[UploadFile],
        File(description="Markdown, text, HTML, PDF or DOCX", json_schema_extra={"minItems": 1}),
    ],
    # Lists without a null: a multipart field is text, so "null" would be a value, not none.
    groups: Annotated[list[GroupName], Form(description="readers' groups; none = everyone")] = [],  # noqa: B006 (FastAPI copies a default per request)
    users: Annotated[list[EmailText], Form(description="readers' emails; none = everyone")] = [],  # noqa: B006
    paths: Annotated[
        list[UploadPath],
        Form(description="one identity per file, e.g. its path in your tree (default: its name)"),
    ] = [],  # noqa: B006
    wait: Annotated[
        float,
        Query(ge=0, le=MAX_WAIT_S, description="seconds to wait for the ingestion (0: none)"),
    ] = 0,
) -> Any:
    """Upload files to ingest (admins only): a job ingests them; follow it at ``/v1/jobs/{id}``.

    Each file is identified by ``upload:<path>`` (``paths`` form field, one per file, else the
    file name); uploading it again replaces it, or does nothing when unchanged. Two files of
    one request may not share an identity. The answer is 202 with the job (``Location``
    names it); its result, once ``done``, lists one outcome per file: ``added``, ``updated``,
    ``unchanged`` or ``skipped`` with a reason (bad files never stop the others). With
    ``wait``, the server waits up to that many seconds and answers 201 with the outcomes when
    the job is done by then. Nothing is stored when a field is invalid.
    """
    if not user.is_admin:
        raise PermissionDeniedError("only admins upload documents")
    access = AccessList.build(groups, users, fields=("groups", "users"))
    names = [check_name(part_filename(u), f"files[{i}]") for i, u in enumerate(files)]
    if paths and len(paths) != len(files):
        raise InputError("paths", f"gives {len(paths)} paths for {len(files)} files")
    identities = [check_name(p, f"paths[{i}]") for i, p in enumerate(paths)] if paths else names
    seen: dict[str, int] = {}
    for position, identity in enumerate(identities):
        if identity in seen:
            where = "paths" if paths else "files"
            raise InputError(
                f"{where}[{position}]",
                f"{identity!r} is also {where}[{seen[identity]}]; give each file its own path",
            )
        seen[identity] = position
    limit = runtime.settings.knowledge.max_file_bytes
    upload_id = new_id()
    with runtime.database.session() as session:
        for position, (name, identity, upload) in enumerate(
            zip(names, identities, files, strict=True)
        ):
            # The identity keeps the whole name; type and default title come from its last part.
            session.add(
                UploadPart(
                    upload_id=upload_id,
                    position=position,
                    filename=PureWindowsPath(name).name or name,
                    source=f"upload:{identity}",
                    data=upload.file.read(limit + 1),  # one byte over: skipped as too large
                )
            )
    payload: dict[str, Any] = {
        "upload": upload_id,
        "groups": list(access.groups),
        "users": list(access.users),
    }
    if (parent := traceparent()) is not None:  # the job's span joins this request's trace
        payload["traceparent"] = parent
    job = runtime.jobs.enqueue(
        INGEST,
        payload,
        dedupe_key=ingest_dedupe_key(upload_id),
        owner=user.user_id,
    )
    if wait > 0:
        try:
            job = runtime.jobs.wait(job.id, wait)
        except TimeoutError:
            job = runtime.jobs.get(job.id)  # as it is now (running, attempts), not as queued
        if job.state == "done":
            response.status_code = status.HTTP_201_CREATED
            outcomes = (job.result or {}).get("outcomes", [])
            return [IngestPublic(**outcome) for outcome in outcomes]
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return UploadAcceptedPublic(job=JobPublic.of(job))


@router.get("", responses=error_responses(401, 503))
def list_documents(user: CurrentUser, runtime: RuntimeDep) -> list[DocumentPublic]:
    """List the documents the caller may read (admins: all)."""
    return [DocumentPublic(**asdict(d)) for d in runtime.knowledge.list_documents(user)]


@router.get("/{document_id}/text", responses=error_responses(401, 404, 422, 503))
def read_document_text(
    document_id: DocumentId, user: CurrentUser, runtime: RuntimeDep
) -> DocumentTextPublic:
    """Return a document's text as indexed (the URL MCP tools cite, docs/mcp.md).

    Readable under the rules of search: a document the caller may not read answers 404
    like a missing one, for admins too.
    """
    limit = runtime.settings.knowledge.max_extracted_chars
    with runtime.database.session() as session:
        document = read_document(session, user, document_id, limit)
    return DocumentTextPublic(**asdict(document))


@router.delete("/{document_id}", responses=error_responses(401, 403, 404, 422, 503))
def delete_document(
    document_id: DocumentId, user: CurrentUser, runtime: RuntimeDep
) -> DocumentPublic:
    """Delete a document with its chunks and vectors.

    Admins only: others get 403, or 404 when they may not even read it.
    """
    return DocumentPublic(**asdict(runtime.knowledge.delete_document(user, document_id)))
