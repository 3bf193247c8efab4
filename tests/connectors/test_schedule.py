"""Scheduled sources: ``sources.due`` (periodic, in serve and worker) queues the syncs due."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from search2o.connectors.wiring import sources_of
from search2o.jobs import find_jobs
from search2o.jobs.kinds import build_registry
from search2o.runtime import Runtime
from search2o.storage.models import Source, utcnow


def test_due_sources_get_one_sync_job_each_and_manual_ones_none(
    runtime: Runtime, tmp_path: Path
) -> None:
    registry = build_registry(runtime)
    due = registry.get("sources.due")
    assert due is not None and due.every_s is not None and due.every_s >= 10
    assert registry.get("sources.sync") is not None
    sources = sources_of(runtime)
    sources.add("hourly", "folder", {"path": str(tmp_path), "public": True}, schedule_s=3600)
    sources.add("manual", "folder", {"path": str(tmp_path), "public": True})
    ctx: Any = None  # the handler reads nothing of its context
    assert due.handler(ctx, {}) == {"started": ["hourly"]}
    assert due.handler(ctx, {}) == {"started": ["hourly"]}  # same due time: one job (dedupe)
    queued = find_jobs(runtime.database, kind="sources.sync")
    assert [job.kind for job in queued] == ["sources.sync"]
    with runtime.database.session() as session:
        session.query(Source).filter_by(name="hourly").one().next_sync_at = utcnow().replace(
            year=utcnow().year + 1
        )
    assert due.handler(ctx, {}) == {"started": []}  # not due yet
