"""``/v1/documents``: upload (multipart), list and delete documents."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import PureWindowsPath
from typing import Annotated

from fastapi import APIRouter, File, Form, UploadFile, status

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.jsonbody import StrictJsonRoute
from search2o.api.openapi import error_responses
from search2o.api.schemas import DocumentId, DocumentPublic, IngestPublic
from search2o.api.uploads import check_name, part_filename
from search2o.errors import InputError, PermissionDeniedError
from search2o.knowledge.access import AccessList

router = APIRouter(prefix="/v1/documents", tags=["documents"], route_class=StrictJsonRoute)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses=error_responses(401, 403, 409, 413, 422, 502, 503),
)
def upload_documents(
    user: CurrentUser,
    runtime: RuntimeDep,
    files: Annotated[list[UploadFile], File(description="Markdown, text, HTML, PDF or DOCX")],
    groups: Annotated[
        list[str] | None, Form(description="readers' groups; none = everyone")
    ] = None,
    users: Annotated[list[str] | None, Form(description="readers' emails; none = everyone")] = None,
    paths: Annotated[
        list[str] | None,
        Form(description="one identity per file, e.g. its path in your tree (default: its name)"),
    ] = None,
) -> list[IngestPublic]:
    """Ingest uploaded files (admins only).

    Each file is identified by ``upload:<path>`` (``paths`` form field, one per file, else the
    file name); uploading it again replaces it, or does nothing when unchanged. Two files of
    one request may not share an identity. Bad files are reported as ``skipped`` with a
    reason and do not stop the others; nothing is stored when a field is invalid.
    """
    if not user.is_admin:
        raise PermissionDeniedError("only admins upload documents")
    access = AccessList.build(groups or [], users or [], fields=("groups", "users"))
    names = [check_name(part_filename(u), f"files[{i}]") for i, u in enumerate(files)]
    if paths is not None and len(paths) != len(files):
        raise InputError("paths", f"gives {len(paths)} paths for {len(files)} files")
    identities = (
        [check_name(p, f"paths[{i}]") for i, p in enumerate(paths)] if paths is not None else names
    )
    seen: dict[str, int] = {}
    for position, identity in enumerate(identities):
        if identity in seen:
            where = "paths" if paths is not None else "files"
            raise InputError(
                f"{where}[{position}]",
                f"{identity!r} is also {where}[{seen[identity]}]; give each file its own path",
            )
        seen[identity] = position
    limit = runtime.settings.knowledge.max_file_bytes
    outcomes = []
    for name, identity, upload in zip(names, identities, files, strict=True):
        data = upload.file.read(limit + 1)
        # The identity keeps the whole name; type and default title come from its last part.
        shown = PureWindowsPath(name).name or name
        outcome = runtime.knowledge.ingest_bytes(f"upload:{identity}", shown, data, access)
        outcomes.append(IngestPublic(**asdict(outcome)))
    return outcomes


@router.get("", responses=error_responses(401, 503))
def list_documents(user: CurrentUser, runtime: RuntimeDep) -> list[DocumentPublic]:
    """List the documents the caller may read (admins: all)."""
    return [DocumentPublic(**asdict(d)) for d in runtime.knowledge.list_documents(user)]


@router.delete("/{document_id}", responses=error_responses(401, 403, 404, 422, 503))
def delete_document(
    document_id: DocumentId, user: CurrentUser, runtime: RuntimeDep
) -> DocumentPublic:
    """Delete a document with its chunks and vectors.

    Admins only: others get 403, or 404 when they may not even read it.
    """
    return DocumentPublic(**asdict(runtime.knowledge.delete_document(user, document_id)))
