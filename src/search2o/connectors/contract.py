"""The connector contract: what a source must answer for the sync engine to keep it in sync.

A connector is a class with a ``kind`` name, a pydantic ``Settings`` model (strict: unknown keys
refused, a bad field named) and three operations:

* :meth:`Connector.listing` — every document that exists, with a cheap **version** (mtime and
  size, a revision, an etag) and, where the source knows it without a fetch, its access rule.
  A generator: it yields :class:`Listed` items and *returns* a :class:`ListingEnd` that says
  whether the listing **completed** (every page answered, nothing truncated, not cancelled).
  A listing that raises, or returns anything but ``ListingEnd(complete=True)``, is incomplete:
  the engine then deletes nothing (docs/connectors.md, "Deletion safety").
* :meth:`Connector.fetch` — one document's content, title, address, type and access rule.
* :meth:`Connector.changes` (optional, ``supports_changes = True``) — what changed since a
  cursor: changed items, keys deleted in the source, the next cursor.

Faults are told apart by the exceptions below, so the engine can retry, wait, stop the source
or restart a listing, and never turn a fault into deletions. Connectors are registered through
the extensions registry (:class:`search2o.extensions.Extension` ``connectors``), exactly as a
third-party connector is; the shape follows Onyx's ``interfaces.py`` (a generator whose return
value closes the listing) with the completeness flag it lacks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, TypeVar, cast

from pydantic import BaseModel

from search2o.errors import ProviderError

__all__ = [
    "AccessRule",
    "Changes",
    "Connector",
    "CredentialsRejectedError",
    "CursorRejectedError",
    "Fetched",
    "Listed",
    "ListingEnd",
    "RetryLaterError",
    "SourceError",
    "TransientSourceError",
]


@dataclass(frozen=True)
class AccessRule:
    """Who may read a document, in the terms search2o maps: user emails and group names.

    Attributes:
        users: emails of users who may read it.
        groups: names of groups whose members may read it.
        everyone: readable by every user (a public page); overrides the lists.
        unmapped: the source's rule could not be expressed in users and groups (an unknown
            principal type, a group with no name): the document is readable by nobody.

    A rule with no user, no group, not ``everyone`` and not ``unmapped`` grants the admins
    only (a source configured without an access rule).
    """

    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    everyone: bool = False
    unmapped: bool = False


@dataclass(frozen=True)
class Listed:
    """One document as a listing sees it.

    Attributes:
        key: its identity in the source, stable across syncs (a relative path, a page id);
            at most 1,000 characters.
        version: a cheap version that changes when the content may have changed (at most
            500 characters); an unchanged version is never fetched again.
        access: its access rule when the listing knows it (then a rule change alone is applied
            without a fetch), else ``None`` (the rule comes with :meth:`Connector.fetch`).

    """

    key: str
    version: str
    access: AccessRule | None = None


@dataclass(frozen=True)
class ListingEnd:
    """How a listing ended: ``complete`` only if it provably reached the end of the source."""

    complete: bool
    reason: str = ""


@dataclass(frozen=True)
class Fetched:
    """One fetched document.

    Attributes:
        key: as listed.
        version: the version of what was fetched (may be newer than the listing's).
        filename: a name whose suffix picks the loader (``guide.md``, ``page.html``).
        data: the content's bytes.
        access: who may read it.
        title: the source's title, or ``""`` for the loader's.
        url: the address that opens it, or ``""``.
        modified: when the source last changed it, if known.

    """

    key: str
    version: str
    filename: str
    data: bytes
    access: AccessRule
    title: str = ""
    url: str = ""
    modified: datetime | None = None


@dataclass(frozen=True)
class Changes:
    """What changed since a cursor: changed items, keys deleted in the source, the next cursor.

    A delete event here is explicit, so the engine removes those keys without a full listing.
    """

    changed: list[Listed] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    cursor: str = ""


class SourceError(ProviderError):
    """A source did not answer as the contract needs; the sync records it, deletes nothing."""


class TransientSourceError(SourceError):
    """A fault worth retrying: a connection reset, a timeout, a 5xx (retried with backoff)."""


class RetryLaterError(SourceError):
    """The source asked to wait (429 or 503 with ``Retry-After``, RFC 9110 section 10.2.3).

    Attributes:
        after_s: seconds to wait at least; the engine never retries sooner.

    """

    def __init__(self, after_s: float, message: str = "") -> None:
        super().__init__(message or f"the source asked to wait {after_s:g} s (Retry-After)")
        self.after_s = max(0.0, after_s)


class CredentialsRejectedError(SourceError):
    """The source refused the credentials (401): the source stops until they are replaced."""


class CursorRejectedError(SourceError):
    """The source no longer accepts the change cursor: the engine restarts from a full listing."""


T = TypeVar("T")


def _direct(request: Callable[[], Any]) -> Any:
    return request()


class Connector(ABC):
    """A kind of source (see the module docstring).

    Class attributes:
        kind: the kind's name (``folder``), ``[a-z][a-z0-9_]*``.
        Settings: its settings model; ``model_config = ConfigDict(extra="forbid")``.
        credential_fields: names of the secrets it needs (sealed, never shown), e.g.
            ``("token",)``.
        supports_changes: it implements :meth:`changes`.

    Args:
        settings: validated ``Settings``.
        credentials: the opened secrets, or ``None`` when none are set.

    """

    kind: ClassVar[str]
    Settings: ClassVar[type[BaseModel]]
    credential_fields: ClassVar[tuple[str, ...]] = ()
    supports_changes: ClassVar[bool] = False

    def __init__(self, settings: Any, credentials: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.credentials = credentials or {}
        self._call: Callable[[Callable[[], Any]], Any] = _direct

    @classmethod  # noqa: B027 - an optional hook: accepting everything is the default
    def check_new(cls, settings: BaseModel, rules: Any, remote: bool) -> None:
        """Refuse settings that cannot work or are not allowed when a source is added or changed.

        Args:
            settings: the validated settings.
            rules: the ``connectors`` settings section
                (:class:`~search2o.connectors.settings.ConnectorsSettings`).
            remote: the source comes over the API (an admin's browser or script), not from
                the host's own command line.

        Raises:
            InputError: the field and the reason.

        """

    def bind(self, call: Callable[[Callable[[], Any]], Any]) -> None:
        """Route :meth:`call` through ``call`` (the engine's :class:`~.politeness.Polite`)."""
        self._call = call

    def call(self, request: Callable[[], T]) -> T:
        """Run one request to the source politely: rate, retries, ``Retry-After``.

        A connector sends each page of a listing through it; the engine already does so for
        each :meth:`fetch`.
        """
        return cast(T, self._call(request))

    @abstractmethod
    def listing(self) -> Generator[Listed, None, ListingEnd]:
        """Yield every document with its version; return how the listing ended.

        Raises:
            SourceError: the listing failed (the engine treats it as incomplete).

        """

    @abstractmethod
    def fetch(self, key: str) -> Fetched:
        """Return one document.

        Raises:
            SourceError: it could not be fetched (counted as failed, never deleted).

        """

    def changes(self, cursor: str) -> Changes:
        """Return what changed since ``cursor`` (only when ``supports_changes``).

        Raises:
            CursorRejectedError: the cursor is too old or unknown.
            SourceError: the feed failed.

        """
        raise CursorRejectedError(f"the {self.kind} connector has no changes feed")

    def start_cursor(self) -> str | None:
        """Return the cursor from which :meth:`changes` reports what changes from now on.

        Called before a full listing; ``None`` when there is no changes feed.
        """
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release what the connector holds (HTTP clients); called after each sync."""
