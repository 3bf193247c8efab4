"""Error responses of the API back into the exception tree of :mod:`search2o.errors`.

The server answers every error as ``{"detail": {"error": <class>, "message", "field"?,
"reason"?, ...}}`` with the status of that class (:data:`search2o.wire.errors.STATUS_BY_ERROR`).
:data:`ERROR_CLASSES` inverts that one table (with the subclasses of its classes, such as an
agent definition's ``DefinitionError``), so a client raises the very class the server raised:
``InputError`` (``field`` and ``reason`` from the body), ``NotFoundError``,
``AuthenticationError``, ``PermissionDeniedError``, ``ConflictError``, ``ProviderError``,
``StorageError`` and every other. The body's other fields (``problems`` of an agent
definition, ``conversation_id`` ...) become attributes of the exception. A class name the
tree does not have (``InternalError``, a framework's ``MethodNotAllowed``) or a body that is
not ours (a proxy's error page) maps by status (:data:`CLASS_BY_STATUS`).
"""

from __future__ import annotations

from typing import Any

import httpx

from search2o import errors
from search2o.wire.errors import STATUS_BY_ERROR

__all__ = ["CLASS_BY_STATUS", "ERROR_CLASSES", "error_from_body", "error_from_response"]


def _tree(root: type[errors.Search2oError]) -> list[type[errors.Search2oError]]:
    found, pending = [], [root]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


# Subclasses count too: the server names an error's own class (DefinitionError) while its
# status comes from the nearest mapped ancestor (InputError, 422).
ERROR_CLASSES: dict[str, type[errors.Search2oError]] = {
    cls.__name__: cls for cls in sorted({*STATUS_BY_ERROR, *_tree(errors.Search2oError)}, key=str)
}
"""Every error class of the server, by name: the mapped ones and their subclasses."""

CLASS_BY_STATUS: dict[int, type[errors.Search2oError]] = {
    400: errors.InputError,
    401: errors.AuthenticationError,
    403: errors.PermissionDeniedError,
    404: errors.NotFoundError,
    409: errors.ConflictError,
    413: errors.InputError,
    422: errors.InputError,
    502: errors.ProviderError,
    503: errors.StorageError,
    504: errors.ProviderError,
}
"""The class of an error whose body names none the tree has."""

_KNOWN = frozenset({"error", "message", "field", "reason"})


def error_from_body(status: int, body: Any) -> errors.Search2oError:
    """Return the exception an error response stands for (see the module docstring).

    Args:
        status: the HTTP status.
        body: the parsed JSON body, or anything else for a body that is not ours.

    """
    detail = body.get("detail") if isinstance(body, dict) else None
    if not isinstance(detail, dict):
        detail = {}
    name = detail.get("error")
    cls = ERROR_CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        cls = CLASS_BY_STATUS.get(status, errors.Search2oError)
    message = detail.get("message")
    if not isinstance(message, str) or not message:
        message = f"the server answered {status}"
    # Built without the class's own __init__ (whose arguments differ per class, e.g.
    # PayloadTooLargeError(limit, setting)): the message is the server's, written for people.
    exc = cls.__new__(cls)
    if isinstance(exc, errors.InputError):
        field = detail.get("field")
        reason = detail.get("reason")
        errors.InputError.__init__(
            exc,
            field if isinstance(field, str) and field else "body",
            reason if isinstance(reason, str) and reason else message,
        )
    errors.Search2oError.__init__(exc, message)
    for key, value in detail.items():
        if key not in _KNOWN and key.isidentifier() and not hasattr(exc, key):
            setattr(exc, key, value)
    return exc


def error_from_response(response: httpx.Response) -> errors.Search2oError:
    """Return the exception an error response stands for; the response must have been read."""
    try:
        body = response.json()
    except ValueError:
        body = None
    exc = error_from_body(response.status_code, body)
    if body is None and response.text.strip():
        exc.message = f"{exc.message}: {response.text.strip()[:200]}"
        exc.args = (exc.message,)
    return exc
