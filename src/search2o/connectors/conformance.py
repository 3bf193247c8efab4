"""The conformance suite every connector passes: sync, resync, edit, delete, faults, resume.

Each ``check_*`` takes a :class:`SyncTarget`: a runtime, the connector kinds to use, and a
:class:`SourceDouble`, the source behind the connector under test, which the check changes
(adds, edits and removes documents, restricts their access, breaks or truncates the listing,
rejects the credentials, kills a sync halfway). It returns nothing on success and raises
:class:`ConformanceError` (an ``AssertionError``) saying what broke. Under pytest::

    @pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
    def test_my_connector(check, my_target):
        check(my_target)

Every check also compares the sync's counts with the calls the double recorded: a resync with no
change must fetch nothing and embed nothing, an edit must fetch one document and embed at most
two chunks, and no fault may delete a document. docs/connectors.md ("Writing a connector")
shows a double for a new connector.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import select

from search2o.connectors.contract import Connector
from search2o.connectors.report import SyncReport
from search2o.connectors.settings import connectors_settings
from search2o.connectors.wiring import sources_of, sync_engine
from search2o.errors import InputError
from search2o.runtime import Runtime
from search2o.storage.models import Chunk, Document, DocumentAccess, Source

__all__ = [
    "CHECKS",
    "ConformanceError",
    "Killed",
    "SourceDouble",
    "SyncTarget",
]

NAME = "conformance"


class ConformanceError(AssertionError):
    """A connector broke the contract; the message says how."""


class Killed(BaseException):
    """Raised by a double to kill a sync where it stands (what ``kill -9`` does to a process)."""


class SourceDouble(Protocol):
    """The source behind the connector under test, as the checks drive it."""

    kind: str
    takes_credentials: bool

    def settings(self) -> dict[str, Any]:
        """Return the settings of a source on this double."""
        ...

    def credentials(self) -> dict[str, str] | None:
        """Return the secrets a source on this double needs, or ``None``."""
        ...

    def put(self, key: str, text: str) -> None:
        """Add or change the document ``key`` (Markdown ``text``) in the source."""
        ...

    def remove(self, key: str) -> None:
        """Delete the document ``key`` in the source."""
        ...

    def restrict(self, group: str) -> dict[str, Any] | None:
        """Make every document readable by ``group`` only; return a settings patch or None."""
        ...

    def fail_listing(self, on: bool) -> None:
        """Make the listing (and any changes feed) fail, or work again."""
        ...

    def truncate_listing(self, on: bool) -> None:
        """Make the listing return part of the documents and say it is incomplete."""
        ...

    def reject_credentials(self, on: bool) -> None:
        """Make every request answer that the credentials are rejected (401)."""
        ...

    def kill_at_fetch(self, number: int | None) -> None:
        """Raise :class:`Killed` in the ``number``-th fetch from now (``None``: never)."""
        ...

    def fetches(self) -> int:
        """Return how many fetches the source has answered so far."""
        ...

    def requests(self) -> int:
        """Return how many requests of any kind (listing pages, fetches) it received."""
        ...


@dataclass
class SyncTarget:
    """What a check runs on.

    Attributes:
        runtime: an open runtime on a blank database.
        kinds: the connector classes by kind (the one under test among them).
        double: the source behind it.
        embedded: texts the embedding model was given so far (the checks compare).

    """

    runtime: Runtime
    kinds: Mapping[str, type[Connector]]
    double: SourceDouble
    embedded: Callable[[], int]


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceError(message)


class _Env:
    """Helpers over a target: add the source, sync it, read what is stored."""

    def __init__(self, target: SyncTarget) -> None:
        self.target = target
        self.double = target.double
        self.sources = sources_of(target.runtime, target.kinds)

    def add(self) -> None:
        self.sources.add(NAME, self.double.kind, self.double.settings(), self.double.credentials())

    def sync(self, **options: Any) -> SyncReport:
        engine = sync_engine(self.target.runtime, self.target.kinds, sleep=_no_sleep)
        return engine.sync(NAME, **options)

    def stored(self) -> dict[str, str]:
        """Return key -> the document's text (its chunks joined) of the source's documents."""
        with self.target.runtime.database.session() as session:
            keys = session.scalars(
                select(Document.source_key).where(Document.source_id.in_(self._source_ids()))
            ).all()
            rows = session.execute(
                select(Document.source_key, Chunk.text)
                .join(Chunk, Chunk.document_id == Document.id)
                .where(Document.source_id.in_(self._source_ids()))
                .order_by(Document.source_key, Chunk.ordinal)
            ).all()
        texts: dict[str, str] = {str(k): "" for k in keys}
        for key, text in rows:
            texts[str(key)] += text + "\n"
        return texts

    def access(self) -> dict[str, set[str]]:
        with self.target.runtime.database.session() as session:
            rows = session.execute(
                select(Document.source_key, DocumentAccess.principal)
                .join(DocumentAccess, DocumentAccess.document_id == Document.id)
                .where(Document.source_id.in_(self._source_ids()))
            ).all()
        found: dict[str, set[str]] = {}
        for key, principal in rows:
            found.setdefault(str(key), set()).add(principal)
        return found

    @staticmethod
    def _source_ids() -> Any:
        return select(Source.id).where(Source.name == NAME)

    def seed(self, count: int = 4) -> None:
        for number in range(1, count + 1):
            self.double.put(f"doc{number}.md", _document(number))
        self.add()
        report = self.sync()
        _require(report.counts.added == count, f"first sync added {report.counts.added}")

    @contextmanager
    def faults(self, fault: Callable[[bool], None]) -> Iterator[None]:
        fault(True)
        try:
            yield
        finally:
            fault(False)


def _no_sleep(seconds: float) -> None:
    """Let the politeness layer's waits pass at once in the checks."""


def _document(number: int, extra: str = "") -> str:
    return (
        f"# Policy {number}\n\nRule {number}: employees book rooms {number} days ahead "
        f"through the facilities desk.\n\n## Details\n\nThe desk answers within {number} "
        f"hours on working days.{extra}\n"
    )


def check_first_sync_brings_every_document(target: SyncTarget) -> None:
    """Check that a first sync adds every document once, fetching each once."""
    env = _Env(target)
    env.seed(3)
    stored = env.stored()
    _require(sorted(stored) == ["doc1.md", "doc2.md", "doc3.md"], f"stored {sorted(stored)}")
    _require("Rule 2: employees book rooms" in stored["doc2.md"], "doc2's text is missing")
    _require(env.double.fetches() == 3, f"3 documents took {env.double.fetches()} fetches")


def check_a_resync_without_change_fetches_and_embeds_nothing(target: SyncTarget) -> None:
    """Check that a second sync with nothing changed fetches nothing and embeds nothing."""
    env = _Env(target)
    env.seed(3)
    fetches, embedded = env.double.fetches(), target.embedded()
    report = env.sync()
    counts = report.counts
    _require(counts.line() == "0 added, 0 updated, 0 deleted, 3 unchanged, 0 failed", counts.line())
    _require(env.double.fetches() == fetches, "an unchanged document was fetched again")
    _require(counts.fetched == 0 and counts.embedded == 0, f"counts say {counts}")
    _require(target.embedded() == embedded, "the model embedded text on a resync with no change")


def check_an_edit_fetches_one_document_and_embeds_its_new_chunks(target: SyncTarget) -> None:
    """Check that a one-paragraph edit fetches that document alone and embeds at most 2 chunks."""
    env = _Env(target)
    env.seed(3)
    fetches, embedded = env.double.fetches(), target.embedded()
    env.double.put("doc2.md", _document(2, " Bicycles go to the basement garage."))
    report = env.sync()
    _require(
        report.counts.line() == "0 added, 1 updated, 0 deleted, 2 unchanged, 0 failed",
        report.counts.line(),
    )
    _require(env.double.fetches() == fetches + 1, "an edit fetched more than the edited document")
    _require(target.embedded() - embedded <= 2, f"{target.embedded() - embedded} chunks embedded")
    _require("basement garage" in env.stored()["doc2.md"], "the edit is not stored")


def check_a_deletion_in_the_source_is_removed(target: SyncTarget) -> None:
    """Check that a document deleted in the source is removed at the next sync; the others stay."""
    env = _Env(target)
    env.seed(4)
    env.double.remove("doc4.md")
    report = env.sync()
    _require(report.counts.deleted == 1 and report.error is None, f"{report.counts.line()}")
    _require(sorted(env.stored()) == ["doc1.md", "doc2.md", "doc3.md"], "doc4 is still stored")


def check_a_permission_change_alone_embeds_nothing(target: SyncTarget) -> None:
    """Check that restricting access updates every access list without fetching or embedding."""
    env = _Env(target)
    env.seed(3)
    fetches, embedded = env.double.fetches(), target.embedded()
    patch = env.double.restrict("legal")
    if patch is not None:
        env.sources.update(NAME, settings=patch)
    report = env.sync()
    _require(report.counts.updated == 3, f"a permission change gave {report.counts.line()}")
    _require(env.double.fetches() == fetches, "a permission change fetched documents")
    _require(target.embedded() == embedded, "a permission change embedded text")
    access = env.access()
    _require(
        all(access.get(k) == {"group:legal"} for k in ("doc1.md", "doc2.md", "doc3.md")),
        f"access lists are {access}",
    )


def check_a_failed_listing_removes_nothing(target: SyncTarget) -> None:
    """Check that a failed listing deletes nothing and is recorded as the last error."""
    env = _Env(target)
    env.seed(3)
    env.double.remove("doc3.md")
    with env.faults(env.double.fail_listing):
        report = env.sync()
    _require(not report.complete and report.counts.deleted == 0, f"{report.counts.line()}")
    _require(len(env.stored()) == 3, "a failed listing deleted documents")
    last_error = env.sources.get(NAME).last_error
    _require(bool(last_error), "a failed listing left no last_error")


def check_a_truncated_listing_removes_nothing(target: SyncTarget) -> None:
    """Check that a listing that says it is incomplete deletes nothing, even on a full sync."""
    env = _Env(target)
    env.seed(4)
    with env.faults(env.double.truncate_listing):
        report = env.sync(full=True)
    _require(not report.complete and report.counts.deleted == 0, f"{report.counts.line()}")
    _require(len(env.stored()) == 4, "a truncated listing deleted documents")
    _require("incomplete" in (report.error or ""), f"error says {report.error!r}")


def check_a_mass_deletion_stops_before_deleting(target: SyncTarget) -> None:
    """Check that deleting more than max_delete_share stops first; --allow-mass-delete goes on."""
    env = _Env(target)
    env.seed(4)
    section = connectors_settings(target.runtime.settings)
    if section.mass_delete_floor >= 3 or section.max_delete_share >= 0.75:
        raise unittest.SkipTest(
            "needs connectors.mass_delete_floor < 3 and max_delete_share < 0.75"
        )
    for key in ("doc1.md", "doc2.md", "doc3.md"):
        env.double.remove(key)
    report = env.sync()
    _require(report.status == "blocked" and report.counts.deleted == 0, report.counts.line())
    _require("--allow-mass-delete" in (report.error or ""), f"error says {report.error!r}")
    _require(len(env.stored()) == 4, "the mass-delete stop deleted documents")
    allowed = env.sync(allow_mass_delete=True)
    _require(allowed.counts.deleted == 3 and sorted(env.stored()) == ["doc4.md"], "not allowed")


def check_an_empty_listing_is_suspect(target: SyncTarget) -> None:
    """Check that a listing of no document where some are stored deletes nothing."""
    env = _Env(target)
    env.seed(2)
    env.double.remove("doc1.md")
    env.double.remove("doc2.md")
    report = env.sync(full=True)
    _require(report.counts.deleted == 0 and report.error is not None, report.counts.line())
    _require(len(env.stored()) == 2, "an empty listing deleted documents")


def check_a_killed_sync_resumes_to_exactly_the_source(target: SyncTarget) -> None:
    """Check that a sync killed at any fetch, then run again, holds each document once."""
    env = _Env(target)
    for number in range(1, 7):
        env.double.put(f"doc{number}.md", _document(number))
    env.add()
    for kill_at in (1, 3, 6):
        env.double.kill_at_fetch(kill_at)
        try:
            env.sync()
        except Killed:
            pass
        else:
            raise ConformanceError(f"the double did not kill the sync at fetch {kill_at}")
        env.double.put(f"doc{kill_at}.md", _document(kill_at, f" Revision {kill_at}."))
    env.double.kill_at_fetch(None)
    report = env.sync()
    _require(report.error is None, f"the resumed sync failed: {report.error}")
    stored = env.stored()
    _require(sorted(stored) == [f"doc{n}.md" for n in range(1, 7)], f"stored {sorted(stored)}")
    for number in (1, 3, 6):
        _require(f"Revision {number}." in stored[f"doc{number}.md"], f"doc{number} is stale")
    again = env.sync()
    _require(again.counts.fetched == 0, "documents were fetched again after convergence")


def check_bad_settings_are_refused_naming_the_field(target: SyncTarget) -> None:
    """Check that unknown or malformed settings are refused, naming the field; nothing is stored."""
    env = _Env(target)
    try:
        env.sources.add(NAME, env.double.kind, {**env.double.settings(), "bogus": 1})
    except InputError as exc:
        _require(exc.field == "settings.bogus", f"the error names {exc.field!r}")
    else:
        raise ConformanceError("an unknown setting was accepted")
    _require(env.sources.all() == [], "a refused source was stored")


def check_rejected_credentials_stop_the_source(target: SyncTarget) -> None:
    """Check that rejected credentials stop the source after at most 3 tries and delete nothing."""
    if not target.double.takes_credentials:
        raise unittest.SkipTest("this connector takes no credentials")
    env = _Env(target)
    env.seed(3)
    env.double.remove("doc1.md")
    before = env.double.requests()
    with env.faults(env.double.reject_credentials):
        report = env.sync(full=True)
    _require(report.status == "stopped" and report.counts.deleted == 0, report.counts.line())
    _require("credentials" in (report.error or ""), f"error says {report.error!r}")
    _require(env.double.requests() - before <= 3, "rejected credentials were tried over 3 times")
    _require(len(env.stored()) == 3, "rejected credentials deleted documents")


CHECKS: list[Callable[[SyncTarget], None]] = [
    check_first_sync_brings_every_document,
    check_a_resync_without_change_fetches_and_embeds_nothing,
    check_an_edit_fetches_one_document_and_embeds_its_new_chunks,
    check_a_deletion_in_the_source_is_removed,
    check_a_permission_change_alone_embeds_nothing,
    check_a_failed_listing_removes_nothing,
    check_a_truncated_listing_removes_nothing,
    check_a_mass_deletion_stops_before_deleting,
    check_an_empty_listing_is_suspect,
    check_a_killed_sync_resumes_to_exactly_the_source,
    check_bad_settings_are_refused_naming_the_field,
    check_rejected_credentials_stop_the_source,
]
"""Every check, in the order a connector author would meet them."""
