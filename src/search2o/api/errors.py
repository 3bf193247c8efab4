"""The one place where errors become HTTP statuses.

Every :class:`Search2oError` subclass maps to one status; the body is
``{"detail": {"error": <ClassName>, "message": ..., "field": ...}}``. An agent definition's
:class:`~search2o.agents.definition.DefinitionError` (422) also lists every problem:
``"problems": [{"path": "$.functions.main", "reason": ...}, ...]``. Request validation errors
from FastAPI keep status 422 and name the field.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from search2o import errors
from search2o.agents.definition import DefinitionError
from search2o.agents.interpreter import RunError

__all__ = ["STATUS_BY_ERROR", "install_error_handlers", "status_for", "status_for_name"]

STATUS_BY_ERROR: dict[type[errors.Search2oError], int] = {
    errors.Search2oError: 500,
    errors.ConfigError: 500,
    errors.InputError: 422,
    errors.UnsupportedFileError: 422,
    errors.CorruptFileError: 422,
    errors.AuthenticationError: 401,
    errors.PermissionDeniedError: 403,
    errors.NotFoundError: 404,
    errors.ConflictError: 409,
    errors.IndexMismatchError: 409,
    errors.StorageError: 503,
    errors.ProviderError: 502,
    errors.IntegrityCheckError: 500,
    errors.KeyUnavailableError: 503,
    errors.HookError: 502,
    # An agent run stopped: its own `fail`, or an error naming the function and command.
    RunError: 422,
}


def status_for(exc: errors.Search2oError) -> int:
    """Return the status of ``exc``'s class (the nearest mapped ancestor)."""
    for cls in type(exc).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 500


def status_for_name(name: str) -> int:
    """Return the status of the error class called ``name`` (500 for any other name)."""
    for cls, status in STATUS_BY_ERROR.items():
        if cls.__name__ == name:
            return status
    return 500


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.Search2oError)
    body: dict[str, object] = {"error": type(exc).__name__, "message": exc.message}
    if isinstance(exc, errors.InputError):
        body["field"] = exc.field
        body["reason"] = exc.reason
    if isinstance(exc, DefinitionError):
        body["problems"] = [{"path": p.path, "reason": p.reason} for p in exc.problems]
    headers = (
        {"WWW-Authenticate": "Bearer"} if isinstance(exc, errors.AuthenticationError) else None
    )
    return JSONResponse({"detail": body}, status_code=status_for(exc), headers=headers)


async def _handle_validation(request: Request, exc: Exception) -> JSONResponse:
    """Give FastAPI's own request validation errors the same body as :class:`InputError`."""
    assert isinstance(exc, RequestValidationError)
    problems = exc.errors()
    first = problems[0] if problems else {"loc": ("body",), "msg": "invalid request"}
    loc = [str(p) for p in first.get("loc", ())]
    # The first element says where the value was (body, query, path, header); the rest names it.
    # A body that is not JSON at all has a character position there, not a field.
    if first.get("type") == "json_invalid":
        field = "body"
    else:
        field = ".".join(loc[1:]) or (loc[0] if loc else "body")
    body = {
        "error": "InputError",
        "message": f"{field}: {first.get('msg', 'invalid')}",
        "field": field,
        "reason": str(first.get("msg", "invalid")),
        "errors": [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))}
            for e in problems
        ],
    }
    return JSONResponse({"detail": body}, status_code=422)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers for every :class:`Search2oError` and request validation."""
    app.add_exception_handler(errors.Search2oError, _handle)
    app.add_exception_handler(RequestValidationError, _handle_validation)
