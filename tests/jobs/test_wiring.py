"""The queue wired as the product will wire it: a periodic retention sweep, and an upload
ingested by a job that its uploader follows over HTTP (``GET /v1/jobs/{id}``), inside a FastAPI
lifespan that runs the consumer, as ``search2o serve`` will.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi import FastAPI, UploadFile, status

from search2o.api.deps import CurrentUser
from search2o.api.errors import install_error_handlers
from search2o.jobs import JobContext, JobInfo, JobQueue, JobRegistry
from search2o.jobs.kinds import open_job_queue
from search2o.knowledge.access import AccessList
from search2o.query.retention import sweep
from search2o.runtime import Runtime
from tests.api.test_api import add_user, serve
from tests.jobs.conftest import FAST, wait_until
from tests.query.test_retention import _age, _rows, _start, _user

pytestmark = pytest.mark.slow

DOC = b"# Parking\n\nBicycles are parked in the basement garage next to the lockers.\n"


def _fast(runtime: Runtime, **jobs: float) -> Runtime:
    runtime.settings = runtime.settings.model_copy(
        update={"jobs": runtime.settings.jobs.model_copy(update={**FAST, **jobs})}
    )
    return runtime


def test_the_retention_sweep_runs_as_a_periodic_job(runtime: Runtime) -> None:
    ann = _user(runtime, "ann@example.com", "free")
    old = _start(runtime, ann, "remember the parking spot")
    _age(runtime, old, 8)
    registry = JobRegistry()

    @registry.job("retention.sweep", every_s=3600)
    def sweep_expired(ctx: JobContext, payload: dict[str, Any]) -> dict[str, int]:
        # Idempotent: a second run finds nothing expired left to delete.
        report = sweep(runtime.database, runtime.vault, runtime.settings.retention)
        return {"deleted": report.deleted}

    with open_job_queue(_fast(runtime), registry) as queue:
        queue.start_consumer(1)
        job: JobInfo = wait_until(
            lambda: next((j for j in queue.list_jobs(kind="retention.sweep") if j.finished), None),
            30,
            "the periodic retention sweep",
        )
    assert job.state == "done" and job.result == {"deleted": 1}
    assert job.dedupe_key == f"retention.sweep:{job.payload['slot']}"
    assert _rows(runtime, old) == (0, 0, 0)


def _upload_app(runtime: Runtime) -> FastAPI:
    """POST an upload (spooled, then ingested by a job), GET the job: what the API will do."""
    spool = runtime.settings.data_dir / "uploads"
    spool.mkdir(parents=True, exist_ok=True)
    registry = JobRegistry()

    @registry.job("documents.ingest")
    def ingest(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        # The payload names the spooled file; its bytes never enter the ledger. Ingesting the
        # same bytes again is "unchanged", so a second run changes nothing.
        data = (spool / payload["spooled"]).read_bytes()
        ctx.progress(0, 1, "ingesting")
        outcome = runtime.knowledge.ingest_bytes(
            payload["source"], payload["filename"], data, AccessList()
        )
        ctx.progress(1, 1, outcome.status)
        return {
            "status": outcome.status,
            "document_id": outcome.document_id,
            "reason": outcome.reason,  # why, when skipped
        }

    queue = open_job_queue(runtime, registry)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        queue.start_consumer()
        yield
        queue.close()

    app = FastAPI(lifespan=lifespan)
    app.state.runtime = runtime
    install_error_handlers(app)

    @app.post("/v1/documents", status_code=status.HTTP_202_ACCEPTED)
    def upload(user: CurrentUser, file: UploadFile) -> dict[str, str]:
        data = file.file.read()
        digest = hashlib.sha256(data).hexdigest()
        # Written aside, then renamed into place: a second upload of the same bytes must not
        # truncate the file under a job that is reading it (that job would ingest an empty
        # file and report it skipped).
        partial = spool / f"{digest}.{uuid.uuid4().hex}.partial"
        partial.write_bytes(data)
        os.replace(partial, spool / digest)
        job = queue.enqueue(
            "documents.ingest",
            {"spooled": digest, "source": f"upload:{file.filename}", "filename": file.filename},
            owner=user.user_id,
            dedupe_key=f"documents.ingest:{user.user_id}:{file.filename}:{digest}",
        )
        return {"job_id": job.id}

    @app.get("/v1/jobs/{job_id}")
    def get_job(user: CurrentUser, job_id: str) -> dict[str, Any]:
        return queue.get(job_id, owner=user.user_id).to_public()

    app.state.queue = queue
    return app


def test_an_upload_is_ingested_by_a_job_its_uploader_follows(token_runtime: Runtime) -> None:
    # A lease long enough that a loaded host never takes the job back mid-ingestion: a second
    # attempt would find the document in place and report "skipped", not "added".
    runtime = _fast(token_runtime, lease_s=30.0, lost_after_s=90.0)
    ann = add_user(runtime, "ann@example.com", admin=True)
    bob = add_user(runtime, "bob@example.com")
    app = _upload_app(runtime)
    with serve(app) as client:
        files = {"file": ("parking.md", DOC, "text/markdown")}
        accepted = client.post("/v1/documents", files=files, headers=ann)
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["job_id"]
        again = client.post("/v1/documents", files=files, headers=ann)
        assert again.json()["job_id"] == job_id  # the same upload is the same job

        def finished() -> dict[str, Any] | None:
            body: dict[str, Any] = client.get(f"/v1/jobs/{job_id}", headers=ann).json()
            return body if body["state"] in ("done", "failed") else None

        job = wait_until(finished, 60, "the ingestion job")
        theirs = client.get(f"/v1/jobs/{job_id}", headers=bob)
        missing = client.get(f"/v1/jobs/{'0' * 32}", headers=bob)
    assert job["state"] == "done", job
    assert job["result"]["status"] == "added", job["result"]
    assert job["result"]["document_id"] >= 1
    assert job["progress"] == {"done": 1, "total": 1, "message": "added"}
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"]["error"] == missing.json()["detail"]["error"] == "NotFoundError"
    queue: JobQueue = app.state.queue
    assert not queue.consuming  # the lifespan stopped it
    assert [d.title for d in runtime.knowledge.list_documents(runtime.local_principal())] == [
        "Parking"
    ]


def test_compactions_are_jobs_once_the_queue_is_open(settings: Any, embedder: Any) -> None:
    """The runtime's state store hands its compactions to the queue's consumer."""
    from search2o.state.settings import StateSettings
    from search2o.state.store import DatabaseStateStore
    from tests.state.conftest import new_conversation
    from tests.state.test_store import appended

    tuned = settings.model_copy(
        update={
            "state": StateSettings(compact_every=4),
            "jobs": settings.jobs.model_copy(update=FAST),
        }
    )
    with Runtime(tuned, embedder=embedder) as runtime:
        queue = runtime.jobs
        queue.start_consumer(1)
        me = runtime.local_principal()
        cid = new_conversation(runtime, me)
        store = runtime.state_store
        assert isinstance(store, DatabaseStateStore)
        version = 0
        for n in range(12):
            version = store.save(cid, me, appended(n), version)
        wait_until(lambda: store.pending_changes(cid) <= 5 or None, 30, "a compaction job")
        compactions = queue.list_jobs(kind="state.compact")
        assert compactions and any(j.state == "done" for j in compactions)
        restored = store.restore(cid, me)
        assert restored is not None and restored[1] == 12
