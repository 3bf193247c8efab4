"""The sources behind the connectors under test: a real folder, and an in-repo fake service.

:class:`FolderDouble` drives a real folder on disk through the real ``folder`` connector,
instrumented only to count its fetches and to inject the faults a disk cannot make on demand
(a failing or truncated listing, a process killed mid-fetch). :class:`FakeConnector` is a small
connector of its own over :class:`FakeSpace`, an in-memory service with versions, per-document
access, paged listings and a changes feed with a sequence cursor; it checks a bearer token and
can reject it (401) as a real service does.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from search2o.connectors.conformance import Killed
from search2o.connectors.contract import (
    AccessRule,
    Changes,
    Connector,
    CredentialsRejectedError,
    CursorRejectedError,
    Fetched,
    Listed,
    ListingEnd,
    RetryLaterError,
    SourceError,
    TransientSourceError,
)
from search2o.connectors.folder.connector import FolderConnector


@dataclass
class Faults:
    """Faults a double injects, and what it counted."""

    fail_listing: bool = False
    truncate_listing: bool = False
    reject_credentials: bool = False
    kill_at: int | None = None
    retry_after: float | None = None  # answer 429 with this Retry-After, once
    flaky_fetches: int = 0  # this many fetches answer 503 before one succeeds
    fetches: int = 0
    requests: int = 0

    def fetched(self) -> None:
        self.fetches += 1
        self.requests += 1
        if self.kill_at is not None:
            self.kill_at -= 1
            if self.kill_at == 0:
                self.kill_at = None
                raise Killed("killed at a fetch")


class _Faulty:
    """The fault switches every double shares (the SourceDouble protocol's half)."""

    faults: Faults

    def fail_listing(self, on: bool) -> None:
        self.faults.fail_listing = on

    def truncate_listing(self, on: bool) -> None:
        self.faults.truncate_listing = on

    def reject_credentials(self, on: bool) -> None:
        self.faults.reject_credentials = on

    def kill_at_fetch(self, number: int | None) -> None:
        self.faults.kill_at = number

    def fetches(self) -> int:
        return self.faults.fetches

    def requests(self) -> int:
        return self.faults.requests


class InstrumentedFolder(FolderConnector):
    """The real folder connector, with the faults of the folder's :class:`FolderDouble`."""

    FAULTS: ClassVar[dict[str, Faults]] = {}

    def _faults(self) -> Faults:
        return self.FAULTS.setdefault(self.settings.path, Faults())

    def listing(self) -> Generator[Listed, None, ListingEnd]:
        faults = self._faults()
        faults.requests += 1
        if faults.fail_listing:
            raise SourceError("the folder's disk is offline")
        items = super().listing()
        count = 0
        while True:
            try:
                item = next(items)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            count += 1
            if faults.truncate_listing and count > 1:
                return ListingEnd(False, "truncated after one entry")
            yield item

    def fetch(self, key: str) -> Fetched:
        self._faults().fetched()
        return super().fetch(key)


class FolderDouble(_Faulty):
    """A real folder behind :class:`InstrumentedFolder`."""

    kind = "folder"
    takes_credentials = False

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.faults = InstrumentedFolder.FAULTS.setdefault(str(root), Faults())

    def settings(self) -> dict[str, Any]:
        return {"path": str(self.root), "public": True}

    def credentials(self) -> dict[str, str] | None:
        return None

    def put(self, key: str, text: str) -> None:
        path = self.root / key
        existed = path.exists()
        before = path.stat().st_mtime_ns if existed else 0
        path.write_text(text)
        if existed and path.stat().st_mtime_ns == before:  # a coarse clock: still a change
            import os

            os.utime(path, ns=(before + 1_000_000, before + 1_000_000))

    def remove(self, key: str) -> None:
        (self.root / key).unlink()

    def restrict(self, group: str) -> dict[str, Any] | None:
        return {"groups": [group], "public": False}


class FakeSettings(BaseModel):
    """Settings of a fake source: which space, and the listing's page size."""

    model_config = ConfigDict(extra="forbid")

    space: str = Field(min_length=1, max_length=50)
    page_size: int = Field(default=2, ge=1, le=100)


@dataclass
class FakeDocument:
    version: int
    text: str
    groups: tuple[str, ...] = ()
    unmapped: bool = False


@dataclass
class FakeSpace(_Faulty):
    """The fake service's state: documents, a change log, the accepted token, faults."""

    token: str = "fake-token"
    documents: dict[str, FakeDocument] = field(default_factory=dict)
    log: list[tuple[int, str, str]] = field(default_factory=list)  # (seq, key, event)
    faults: Faults = field(default_factory=Faults)
    clock: int = 0

    def event(self, key: str, kind: str) -> None:
        self.clock += 1
        self.log.append((self.clock, key, kind))

    def check(self, token: str | None) -> None:
        self.faults.requests += 1
        if self.faults.reject_credentials or token != self.token:
            raise CredentialsRejectedError("401 Unauthorized: bad token")
        if self.faults.retry_after is not None:
            wait, self.faults.retry_after = self.faults.retry_after, None
            raise RetryLaterError(wait, f"429 Too Many Requests, Retry-After: {wait:g}")

    def listed(self, key: str) -> Listed:
        document = self.documents[key]
        return Listed(key, str(document.version), _rule(document))


SPACES: dict[str, FakeSpace] = {}


def _rule(document: FakeDocument) -> AccessRule:
    if document.unmapped:
        return AccessRule(unmapped=True)
    return AccessRule(groups=document.groups) if document.groups else AccessRule(everyone=True)


class FakeConnector(Connector):
    """A connector over a :class:`FakeSpace`, with paged listings and a changes feed."""

    kind = "fake"
    Settings = FakeSettings
    credential_fields = ("token",)
    supports_changes = True

    settings: FakeSettings

    @property
    def space(self) -> FakeSpace:
        return SPACES[self.settings.space]

    def listing(self) -> Generator[Listed, None, ListingEnd]:
        space = self.space
        keys = sorted(space.documents)
        size = self.settings.page_size
        for start in range(0, max(len(keys), 1), size):
            page = self.call(lambda start=start: self._page(keys, start, size))
            yield from page
            if space.faults.truncate_listing:
                return ListingEnd(False, "the service answered a truncated page")
        return ListingEnd(True)

    def _page(self, keys: list[str], start: int, size: int) -> list[Listed]:
        space = self.space
        space.check(self.credentials.get("token"))
        if space.faults.fail_listing:
            raise SourceError("503 Service Unavailable, again and again")
        return [space.listed(k) for k in keys[start : start + size] if k in space.documents]

    def fetch(self, key: str) -> Fetched:
        space = self.space
        space.check(self.credentials.get("token"))
        space.faults.fetches += 1
        if space.faults.kill_at is not None:
            space.faults.requests -= 1  # fetched() counts the request again
            space.faults.fetches -= 1
            space.faults.fetched()
        if space.faults.flaky_fetches:
            space.faults.flaky_fetches -= 1
            raise TransientSourceError("503 Service Unavailable")
        document = space.documents.get(key)
        if document is None:
            raise SourceError(f"404: {key} is gone")
        return Fetched(
            key,
            str(document.version),
            key,
            document.text.encode(),
            _rule(document),
            url=f"https://fake.example/{key}",
        )

    def start_cursor(self) -> str | None:
        return str(self.space.clock)

    def changes(self, cursor: str) -> Changes:
        space = self.space
        space.check(self.credentials.get("token"))
        if space.faults.fail_listing:
            raise SourceError("503 Service Unavailable on the changes feed")
        if not cursor.isdigit() or int(cursor) > space.clock:
            raise CursorRejectedError(f"cursor {cursor!r} is unknown")
        since = int(cursor)
        touched = {key for seq, key, _ in space.log if seq > since}
        return Changes(
            changed=[space.listed(k) for k in sorted(touched) if k in space.documents],
            deleted=sorted(k for k in touched if k not in space.documents),
            cursor=str(space.clock),
        )


class FakeDouble:
    """A :class:`FakeSpace` as the conformance checks drive it."""

    kind = "fake"
    takes_credentials = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.space = SPACES[name] = FakeSpace()

    def settings(self) -> dict[str, Any]:
        return {"space": self.name}

    def credentials(self) -> dict[str, str] | None:
        return {"token": self.space.token}

    def put(self, key: str, text: str) -> None:
        known = self.space.documents.get(key)
        version = known.version + 1 if known else 1
        groups = known.groups if known else ()
        self.space.documents[key] = FakeDocument(version, text, groups)
        self.space.event(key, "changed")

    def remove(self, key: str) -> None:
        del self.space.documents[key]
        self.space.event(key, "deleted")

    def restrict(self, group: str) -> dict[str, Any] | None:
        for key, document in self.space.documents.items():
            document.groups = (group,)
            self.space.event(key, "access")
        return None

    def __getattr__(self, name: str) -> Any:  # the fault switches live on the space
        return getattr(self.space, name)
