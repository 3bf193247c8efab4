"""The HTTP status of each error class: the one map the server answers by and the client reads.

Every :class:`~search2o.errors.Search2oError` subclass maps to exactly one status (the tree in
:mod:`search2o.errors`); a subclass not listed takes its nearest listed ancestor's. The body of
an error response is ``{"error": {"type", "message", "field"?, "reason"?, ...}}``
(:func:`search2o.api.errors.error_response`, docs/api.md "Errors").
"""

from __future__ import annotations

from search2o import errors

__all__ = ["STATUS_BY_ERROR"]

STATUS_BY_ERROR: dict[type[errors.Search2oError], int] = {
    errors.Search2oError: 500,
    errors.ConfigError: 500,
    errors.MissingExtraError: 500,
    errors.InputError: 422,
    errors.UnsupportedFileError: 422,
    errors.CorruptFileError: 422,
    errors.PayloadTooLargeError: 413,
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
    errors.RunError: 422,
}
