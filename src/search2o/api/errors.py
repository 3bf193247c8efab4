"""The one place where errors become HTTP statuses and bodies.

Every :class:`Search2oError` subclass maps to one status; the body is
``{"detail": {"error": <ClassName>, "message": ..., "field": ...}}``. An agent definition's
:class:`~search2o.agents.definition.DefinitionError` (422) also lists every problem:
``"problems": [{"path": "$.functions.main", "reason": ...}, ...]``. Request validation errors
from FastAPI keep status 422 and name the field. Errors raised by the framework itself (an
unknown path, a method the path does not serve, a body over its bound, a multipart body that
does not parse) get the same body: nothing answers in FastAPI's own ``{"detail": "..."}``
shape. A 405 names every method the path serves in ``Allow`` (RFC 9110, section 15.5.6), not
only those of the first route that matched.
"""

from __future__ import annotations

import functools
import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import compile_path

from search2o import errors
from search2o.agents.definition import DefinitionError
from search2o.wire.errors import STATUS_BY_ERROR

__all__ = [
    "BODY_SETTING_KEY",
    "STATUS_BY_ERROR",
    "error_response",
    "install_error_handlers",
    "status_for",
    "status_for_name",
]

BODY_SETTING_KEY = "search2o.body_setting"
"""Where :mod:`search2o.api.ingress` notes, in the ASGI scope, which setting bounds the body."""


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


def error_response(exc: errors.Search2oError) -> JSONResponse:
    """Return the JSON response for ``exc``: its class's status and our error body."""
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


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.Search2oError)
    return error_response(exc)


# Framework errors that are no Search2oError: the class name our body gives each status.
_FRAMEWORK_ERRORS = {
    404: "NotFoundError",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    415: "UnsupportedMediaType",
}


@functools.lru_cache(maxsize=256)
def _template(path: str) -> re.Pattern[str]:
    return compile_path(path)[0]


def _allowed_methods(request: Request, fallback: str) -> list[str]:
    """Every method the app's operations serve at the request's path (``HEAD`` with ``GET``).

    The OpenAPI document lists every operation, whichever router holds it; ``fallback`` (the
    framework's own ``Allow``) covers pages outside the document.
    """
    methods: set[str] = set()
    for template, operations in request.app.openapi().get("paths", {}).items():
        if _template(template).match(request.url.path):
            methods |= {method.upper() for method in operations}
    if not methods:
        methods = {m.strip() for m in fallback.split(",") if m.strip()}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def _body_problem(cause: BaseException | None) -> str:
    """Say why a body did not parse, from the exception FastAPI or Starlette wrapped."""
    if isinstance(cause, UnicodeDecodeError):
        return f"is not valid UTF-8 (byte {cause.start})"
    if isinstance(cause, RecursionError):
        return "nests arrays or objects too deeply"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return "holds a number with too many digits (at most 4300)"
    return "cannot be parsed"


def _innermost(exc: BaseException) -> str:
    """Return the message of the deepest exception ``exc`` was raised from (bounded)."""
    messages = [str(getattr(exc, "detail", "") or exc)]
    seen = {id(exc)}
    current = exc.__cause__ or exc.__context__
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        messages.append(str(current))
        current = current.__cause__ or current.__context__
    text = "; ".join(dict.fromkeys(m.strip() for m in messages if m.strip()))
    return text[:300]


async def _handle_disconnect(request: Request, exc: Exception) -> JSONResponse:
    """Answer a client that went away before its body arrived as bad input, not a 500.

    Routes that read the raw body (the messengers' webhooks) meet Starlette's
    :class:`ClientDisconnect`; the answer reaches nobody, but the request is logged as the
    422 of a body that never arrived (as the API's other routes log it) instead of a 500
    with a traceback.
    """
    return error_response(
        errors.InputError("body", "the client closed the connection before sending it all")
    )


async def _handle_http(request: Request, exc: Exception) -> JSONResponse:
    """Give the framework's own errors (404, 405, 413, 400 ...) our error body."""
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status == 413:
        limit = int(request.scope.get("starlette.max_body_size") or 0)
        setting = str(request.scope.get(BODY_SETTING_KEY, "api.max_body_bytes"))
        refusal = error_response(errors.PayloadTooLargeError(limit, setting))
        # The rest of the body is never read: close rather than read it all to keep the
        # connection (RFC 9112, section 9.6; api.ingress).
        refusal.headers["connection"] = "close"
        return refusal
    if status == 400:
        # A body that does not parse (bad multipart, invalid UTF-8, too deep) is bad input.
        reason = _body_problem(exc.__cause__)
        if exc.__cause__ is None:
            reason = f"cannot be parsed: {_innermost(exc)}"
        return error_response(errors.InputError("body", reason))
    name = _FRAMEWORK_ERRORS.get(status, "Search2oError")
    headers = dict(exc.headers or {})
    message = str(exc.detail)
    if status == 404:
        message = f"no such path: {request.url.path}"
    elif status == 405:
        allowed = _allowed_methods(request, headers.get("Allow", ""))
        headers["Allow"] = ", ".join(allowed)
        message = f"{request.method} is not allowed here; allowed: {', '.join(allowed)}"
    return JSONResponse(
        {"detail": {"error": name, "message": message}}, status_code=status, headers=headers
    )


async def _handle_validation(request: Request, exc: Exception) -> JSONResponse:
    """Give FastAPI's own request validation errors the same body as :class:`InputError`."""
    assert isinstance(exc, RequestValidationError)
    problems = exc.errors()
    first = problems[0] if problems else {"loc": ("body",), "msg": "invalid request"}
    loc = [str(p) for p in first.get("loc", ())]
    # The first element says where the value was (body, query, path, header); the rest names it.
    # A body that is not JSON at all has a character position there, not a field.
    reason = str(first.get("msg", "invalid"))
    if first.get("type") == "json_invalid":
        field = "body"
        context = first.get("ctx")
        detail = context.get("error") if isinstance(context, dict) else None
        reason = f"is not valid JSON: {detail}" if detail else "is not valid JSON"
    else:
        field = ".".join(loc[1:]) or (loc[0] if loc else "body")
    body = {
        "error": "InputError",
        "message": f"{field}: {reason}",
        "field": field,
        "reason": reason,
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
    app.add_exception_handler(HTTPException, _handle_http)
    app.add_exception_handler(ClientDisconnect, _handle_disconnect)
