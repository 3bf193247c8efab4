"""The one exception hierarchy of search2o.

Every error the product raises on purpose is a :class:`Search2oError`. Third-party errors are
mapped at the boundary (``raise StorageError(...) from exc``). The HTTP API maps each class to
exactly one status in :data:`search2o.wire.errors.STATUS_BY_ERROR`; the CLI exits with code 2 on
an :class:`InputError` or a :class:`MissingExtraError` and 1 on any other :class:`Search2oError`.

Tree::

    Search2oError
    ├── ConfigError                  settings are missing or inconsistent        (500)
    │   └── MissingExtraError        an optional install (extra) is missing      (500)
    ├── InputError                   a request/CLI value breaks a rule           (422)
    │   ├── UnsupportedFileError     a file type no loader reads                 (422)
    │   ├── CorruptFileError         a file a loader cannot parse                (422)
    │   ├── PayloadTooLargeError     a request body over its bound               (413)
    │   └── DefinitionError          an agent definition breaks rules (agents)   (422)
    ├── AuthenticationError          no or a bad API token                       (401)
    ├── PermissionDeniedError        an admin-only action by a non-admin         (403)
    ├── NotFoundError                missing, or owned by someone else           (404)
    ├── ConflictError                the object exists / was changed meanwhile   (409)
    │   └── IndexMismatchError       vectors were made by another embedding model (409)
    ├── StorageError                 the database failed                         (503)
    ├── ProviderError                an embedding/chat provider failed           (502)
    ├── IntegrityCheckError          a sealed record was altered or moved        (500)
    ├── KeyUnavailableError          a key-encryption key cannot be used         (503)
    ├── HookError                    an enterprise hook failed or replied badly  (502)
    └── RunError                     an agent run stopped: fail, or an error in a
                                     command (the agent interpreter)             (422)

Messages name the bad value and the rule, and say the fix where there is one.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "ConfigError",
    "ConflictError",
    "CorruptFileError",
    "HookError",
    "IndexMismatchError",
    "InputError",
    "IntegrityCheckError",
    "KeyUnavailableError",
    "MissingExtraError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "ProviderError",
    "RunError",
    "Search2oError",
    "StorageError",
    "UnsupportedFileError",
]


class Search2oError(Exception):
    """Root of every error search2o raises on purpose.

    Args:
        message: a sentence for a person: what is wrong and, where possible, the fix.

    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(Search2oError):
    """Settings are missing, malformed or inconsistent (e.g. an unknown embedding provider)."""


class MissingExtraError(ConfigError):
    """A feature needs an optional dependency group (an *extra*) that is not installed.

    Commands exit 2 on it, as on bad input: the fix is an install, not a retry.

    Args:
        message: what needs it, the module that cannot be imported, and the ``pip install``.
        extra: the extra's name in ``pyproject.toml`` (``slack``).

    """

    def __init__(self, message: str, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


class InputError(Search2oError):
    """A value given by the caller breaks a rule; nothing was changed.

    Args:
        field: dotted name of the offending field (``query``, ``files[2]``, ``--k``).
        reason: the rule that was broken, e.g. ``"must not be empty"``.

    """

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class UnsupportedFileError(InputError):
    """No loader reads this file type (binary, unknown suffix)."""


class CorruptFileError(InputError):
    """A loader recognised the type but could not parse the content."""


class PayloadTooLargeError(InputError):
    """A request body is larger than its bound (``api.*`` settings); it was not read further.

    Args:
        limit: the bound in bytes.
        setting: the setting that holds it, e.g. ``api.max_body_bytes``.

    """

    def __init__(self, limit: int, setting: str) -> None:
        super().__init__("body", f"is larger than {limit} bytes ({setting})")
        self.limit = limit
        self.setting = setting


class AuthenticationError(Search2oError):
    """The request carries no API token, or one that is unknown or revoked."""


class PermissionDeniedError(Search2oError):
    """The caller is known but the action is reserved for admins."""


class NotFoundError(Search2oError):
    """The object does not exist or is not the caller's (both answer the same way)."""


class ConflictError(Search2oError):
    """The object already exists, or was changed by someone else meanwhile."""


class IndexMismatchError(ConflictError):
    """Stored vectors were made by another embedding model than the configured one.

    The fix is always ``search2o reindex``; a search never mixes vector spaces.
    """


class StorageError(Search2oError):
    """The database could not be reached, migrated or written."""


class ProviderError(Search2oError):
    """An embedding or chat-model provider failed (network, quota, bad response)."""


class IntegrityCheckError(Search2oError):
    """A sealed record did not decrypt: altered, truncated, or moved from where it belongs."""


class KeyUnavailableError(Search2oError):
    """The key-encryption key that wraps a data key cannot be used.

    It was retired, is missing, or the customer's key service refused or failed.
    """


class HookError(Search2oError):
    """An enterprise hook (e.g. the state hooks) failed, timed out or returned a malformed reply.

    Nothing was changed on our side. The message names the hook and the reason.

    Args:
        hook: the hook's name (entry point name or URL without credentials).
        operation: what was asked of it (``save``, ``restore``, ``delete_conversation``).
        reason: what went wrong, e.g. ``"timed out after 10 s"``.

    """

    def __init__(self, hook: str, operation: str, reason: str) -> None:
        super().__init__(f"hook {hook} failed on {operation}: {reason}")
        self.hook = hook
        self.operation = operation
        self.reason = reason


class RunError(Search2oError):
    """The run stopped: a ``fail`` command, or an error naming the function and command.

    Attributes:
        function, command: where it stopped (``command`` is the command key, e.g. ``llm``).

    """

    def __init__(self, message: str, function: str = "", command: str = "") -> None:
        super().__init__(message)
        self.function = function
        self.command = command
