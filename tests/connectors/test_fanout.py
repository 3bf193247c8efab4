"""``connectors.fan_out``: a sync's batches as ``sources.batch`` jobs on the real queue.

In one process here (the consumer's threads and the sync's own thread share the batches; the
separate worker processes, a killed one included, are in ``tests/connectors/test_scaleout.py``
and ``bench/scaleout.py``). A real folder source through the real ``folder`` connector, on
SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from search2o.config import Settings
from search2o.connectors.fanout import BATCH
from search2o.connectors.wiring import sources_of, sync_engine
from search2o.runtime import Runtime
from search2o.storage.models import Chunk, Document
from tests.conftest import MemoEmbedder

FILES = 10
BATCH_SIZE = 3


@pytest.fixture
def fan_runtime(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, embedder: MemoEmbedder
) -> Iterator[Runtime]:
    """A runtime whose syncs fan out in batches of 3."""
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("data"),
        database_url=database_url,
        connectors={"fan_out": True, "batch_size": BATCH_SIZE},
    )
    runtime = Runtime(settings, embedder=embedder)
    try:
        yield runtime
    finally:
        runtime.close()


def _folder(root: Path) -> Path:
    folder = root / "handbook"
    folder.mkdir()
    for number in range(FILES):
        (folder / f"page{number:02}.md").write_text(
            f"# Page {number}\n\nPolicy number {number}: desks are booked {number} days ahead.\n"
        )
    return folder


def _chunks(runtime: Runtime) -> int:
    with runtime.database.session() as session:
        return int(session.scalar(select(func.count()).select_from(Chunk)) or 0)


def test_batches_run_as_jobs_and_every_document_arrives_once(
    fan_runtime: Runtime, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    sources_of(fan_runtime).add("handbook", "folder", {"path": str(folder), "public": True})
    fan_runtime.jobs.start_consumer(2)
    report = sync_engine(fan_runtime).sync("handbook")
    assert report.error is None and report.counts.added == FILES
    assert report.counts.fetched == FILES and report.counts.failed == 0
    jobs = fan_runtime.jobs.list_jobs(kind=BATCH, limit=100)
    assert len(jobs) == -(-FILES // BATCH_SIZE)  # 4 batches
    assert {job.state for job in jobs} == {"done"}
    assert sorted(k for job in jobs for k in job.payload["keys"]) == sorted(
        p.name for p in folder.iterdir()
    )
    assert report.counts.embedded == _chunks(fan_runtime)  # each chunk through the model once
    # A resync embeds nothing; a deleted file is pruned as without fan-out.
    (folder / "page03.md").unlink()
    (folder / "page04.md").write_text("# Page 4\n\nDesks are now booked a week ahead.\n")
    again = sync_engine(fan_runtime).sync("handbook")
    assert (again.counts.updated, again.counts.deleted, again.counts.embedded) == (1, 1, 1)
    with fan_runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(Document)) == FILES - 1


def test_with_no_consumer_the_sync_runs_its_own_batches(
    fan_runtime: Runtime, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    sources_of(fan_runtime).add("handbook", "folder", {"path": str(folder), "public": True})
    report = sync_engine(fan_runtime).sync("handbook")  # nobody consumes: it never waits
    assert report.error is None and report.counts.added == FILES
    assert {job.state for job in fan_runtime.jobs.list_jobs(kind=BATCH, limit=100)} == {"done"}


def test_a_batch_whose_sync_ended_touches_nothing(fan_runtime: Runtime, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    info = sources_of(fan_runtime).add("handbook", "folder", {"path": str(folder)})
    job = fan_runtime.jobs.enqueue(
        BATCH, {"source": info.id, "holder": "host:1:ended", "keys": ["page01.md"]}
    )
    assert fan_runtime.jobs.run_here(job.id)
    done = fan_runtime.jobs.get(job.id)
    assert done.state == "done" and done.result == {"superseded": True}
    assert _chunks(fan_runtime) == 0
    assert not fan_runtime.jobs.run_here(job.id)  # finished: nothing to run twice


def test_a_malformed_batch_fails_at_once_naming_the_payload(fan_runtime: Runtime) -> None:
    job = fan_runtime.jobs.enqueue(BATCH, {"source": "handbook", "keys": "page01.md"})
    assert fan_runtime.jobs.run_here(job.id)
    failed = fan_runtime.jobs.get(job.id)
    assert failed.state == "failed" and failed.attempts == 1
    assert "payload" in (failed.error or "")


def test_a_batch_too_large_for_a_job_payload_is_split(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, embedder: MemoEmbedder
) -> None:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("data"),
        database_url=database_url,
        connectors={"fan_out": True, "batch_size": 8},
        jobs={"max_payload_bytes": 512},
    )
    folder = tmp_path_factory.mktemp("long")
    for number in range(16):  # 8 keys of 60 characters: about 600 bytes a batch
        name = f"a-rather-long-file-name-for-a-payload-{number:02}-{'x' * 16}.md"
        (folder / name).write_text(f"# Note {number}\n\nRoom {number} seats {number + 2}.\n")
    with Runtime(settings, embedder=embedder) as runtime:
        sources_of(runtime).add("long", "folder", {"path": str(folder), "public": True})
        report = sync_engine(runtime).sync("long")
        assert report.error is None and report.counts.added == 16
        jobs = runtime.jobs.list_jobs(kind=BATCH, limit=100)
        assert len(jobs) > 2 and {job.state for job in jobs} == {"done"}  # split, not refused
        assert sorted(k for job in jobs for k in job.payload["keys"]) == sorted(
            p.name for p in folder.iterdir()
        )
