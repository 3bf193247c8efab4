"""``/v1/documents``: upload (multipart), list and delete documents."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, File, Form, UploadFile, status

from search2o.api.deps import CurrentUser, RuntimeDep
from search2o.api.schemas import DocumentPublic, IngestPublic
from search2o.errors import InputError, PermissionDeniedError
from search2o.knowledge.access import AccessList

router = APIRouter(prefix="/v1/documents", tags=["documents"])


@router.post("", status_code=status.HTTP_201_CREATED)
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
    names = [(upload.filename or "").strip() for upload in files]
    for position, name in enumerate(names):
        if not name:
            raise InputError(f"files[{position}]", "has no file name")
    if paths is not None and len(paths) != len(files):
        raise InputError("paths", f"gives {len(paths)} paths for {len(files)} files")
    identities = [p.strip() for p in paths] if paths is not None else names
    seen: dict[str, int] = {}
    for position, identity in enumerate(identities):
        if not identity:
            raise InputError(f"paths[{position}]", "must not be empty")
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
        outcome = runtime.knowledge.ingest_bytes(f"upload:{identity}", name, data, access)
        outcomes.append(IngestPublic(**asdict(outcome)))
    return outcomes


@router.get("")
def list_documents(user: CurrentUser, runtime: RuntimeDep) -> list[DocumentPublic]:
    """List the documents the caller may read (admins: all)."""
    return [DocumentPublic(**asdict(d)) for d in runtime.knowledge.list_documents(user)]


@router.delete("/{document_id}")
def delete_document(document_id: int, user: CurrentUser, runtime: RuntimeDep) -> DocumentPublic:
    """Delete a document with its chunks and vectors.

    Admins only: others get 403, or 404 when they may not even read it.
    """
    return DocumentPublic(**asdict(runtime.knowledge.delete_document(user, document_id)))
