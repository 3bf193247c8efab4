"""The sync engine under faults, on the fake service: waits, retries, access, the lease, cursors."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from search2o.connectors.engine import SyncEngine
from search2o.connectors.sources import Sources
from search2o.connectors.wiring import sources_of, sync_engine
from search2o.errors import ConflictError
from search2o.runtime import Runtime
from search2o.storage.models import Source, utcnow
from tests.connectors.doubles import FakeConnector, FakeDouble

KINDS = {"fake": FakeConnector}


@pytest.fixture
def fake() -> Iterator[FakeDouble]:
    double = FakeDouble(uuid.uuid4().hex)
    for number in range(1, 4):
        double.put(f"doc{number}.md", f"# Doc {number}\n\nText number {number} about desks.\n")
    yield double


def _setup(runtime: Runtime, fake: FakeDouble) -> tuple[Sources, SyncEngine]:
    sources = sources_of(runtime, KINDS)
    sources.add("space", "fake", fake.settings(), fake.credentials())
    sleeps: list[float] = []
    return sources, sync_engine(runtime, KINDS, sleep=sleeps.append)


def test_a_long_retry_after_checkpoints_and_reschedules_without_deleting(
    runtime: Runtime, fake: FakeDouble
) -> None:
    sources, engine = _setup(runtime, fake)
    engine.sync("space")
    fake.remove("doc3.md")
    fake.space.faults.retry_after = 7200
    report = engine.sync("space", full=True)
    assert report.counts.deleted == 0 and report.status == "idle"
    assert "Retry-After" in (report.error or "") and "resumes at" in (report.error or "")
    shown = sources.get("space")
    assert shown.documents == 3 and shown.next_sync_at is not None
    assert timedelta(seconds=7000) < shown.next_sync_at - utcnow() <= timedelta(seconds=7200)
    assert sources.due() == []  # not before its time
    with runtime.database.session() as session:
        row = session.query(Source).one()
        assert row.checkpoint is not None  # kept for the resume
        row.next_sync_at = utcnow()
    assert [name for name, _ in sources.due()] == ["space"]
    resumed = engine.sync("space", full=True)
    assert resumed.resumed and resumed.counts.deleted == 1 and resumed.error is None


def test_a_short_retry_after_and_transient_faults_are_retried_in_place(
    runtime: Runtime, fake: FakeDouble
) -> None:
    _, engine = _setup(runtime, fake)
    fake.space.faults.retry_after = 2
    fake.space.faults.flaky_fetches = 2
    report = engine.sync("space")
    assert report.counts.line() == "3 added, 0 updated, 0 deleted, 0 unchanged, 0 failed"
    assert report.error is None


def test_a_document_that_keeps_failing_is_counted_and_kept(
    runtime: Runtime, fake: FakeDouble
) -> None:
    sources, engine = _setup(runtime, fake)
    engine.sync("space")
    fake.put("doc2.md", "# Doc 2\n\nA new text.\n")
    fake.space.faults.flaky_fetches = 100
    report = engine.sync("space")
    assert report.counts.failed == 1 and report.counts.deleted == 0
    assert "doc2.md: could not be fetched" in report.counts.failures[0]
    assert sources.get("space").documents == 3


def test_an_unmappable_access_rule_is_readable_by_nobody_and_counted(
    runtime: Runtime, fake: FakeDouble
) -> None:
    sources, engine = _setup(runtime, fake)
    fake.space.documents["doc1.md"].unmapped = True
    engine.sync("space")
    assert sources.get("space").unmapped == 1
    admin = runtime.local_principal()
    hits = runtime.knowledge.search(admin, "Text number 1 about desks", 5).hits
    assert "space:doc1.md" not in [hit.source for hit in hits]  # not even the admin
    assert "space:doc2.md" in [hit.source for hit in hits]


def test_one_sync_per_source_and_a_dead_holder_is_taken_over(
    runtime: Runtime, fake: FakeDouble
) -> None:
    sources, engine = _setup(runtime, fake)
    sources.claim("space", "elsewhere:1:abc", 600)  # a live sync on another host
    with pytest.raises(ConflictError, match="is running"):
        engine.sync("space")
    assert sources.get("space").status == "running"
    sources.claim("space", "elsewhere:1:abc", -1)  # its lease ran out
    assert sources.get("space").status == "interrupted"
    assert engine.sync("space").counts.added == 3


def test_a_rejected_cursor_falls_back_to_a_full_listing(runtime: Runtime, fake: FakeDouble) -> None:
    _, engine = _setup(runtime, fake)
    engine.sync("space")
    with runtime.database.session() as session:
        session.query(Source).one().cursor = "999999"  # from the future: unknown to the feed
    fake.remove("doc1.md")
    report = engine.sync("space")
    assert report.complete and report.counts.deleted == 1
    assert any("cursor rejected" in failure for failure in report.counts.failures)
