"""Uploads are ingested by a job: 202 with the job, followed at /v1/jobs/{id}, owner-checked."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import func, select

from search2o.api.app import create_app
from search2o.runtime import Runtime
from search2o.storage.upload_models import UploadPart
from tests.api.test_api import LUNCH, PARKING, add_user, md, serve


@pytest.fixture
def api(token_runtime: Runtime) -> Iterator[httpx.Client]:
    with serve(create_app(token_runtime.settings, runtime=token_runtime)) as client:
        yield client


def follow(client: httpx.Client, location: str, headers: dict[str, str]) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = client.get(location, headers=headers).json()
        if job["state"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError("the ingestion job did not finish")


def parts(runtime: Runtime) -> int:
    with runtime.database.session() as session:
        return int(session.scalar(select(func.count()).select_from(UploadPart)) or 0)


def test_an_upload_is_a_job_its_owner_follows(token_runtime: Runtime, api: httpx.Client) -> None:
    admin = add_user(token_runtime, "ann@example.com", admin=True)
    other = add_user(token_runtime, "root@example.com", admin=True)
    accepted = api.post(
        "/v1/documents", files=[md("lunch.md", LUNCH), md("guide.md", PARKING)], headers=admin
    )
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()["job"]
    assert accepted.headers["location"] == f"/v1/jobs/{job['id']}"
    assert job["kind"] == "documents.ingest" and job["state"] in ("queued", "running", "done")
    done = follow(api, accepted.headers["location"], admin)
    assert done["state"] == "done" and done["progress"] == {
        "done": 2,
        "total": 2,
        "message": "ingested",
    }
    assert [o["status"] for o in done["result"]["outcomes"]] == ["added", "added"]
    assert sorted(d["source"] for d in api.get("/v1/documents", headers=admin).json()) == [
        "upload:guide.md",
        "upload:lunch.md",
    ]
    # Another user's job is answered like a missing one.
    foreign = api.get(accepted.headers["location"], headers=other)
    missing = api.get("/v1/jobs/" + "0" * 32, headers=other)
    assert foreign.status_code == missing.status_code == 404
    # The files wait in the database (any worker reads them) until the cleaner removes them.
    assert parts(token_runtime) == 2
    cleaned = token_runtime.jobs.enqueue("uploads.clean")
    assert token_runtime.jobs.wait(cleaned.id, 30).result == {"removed": 2}
    assert parts(token_runtime) == 0


def test_waiting_gives_the_outcomes_and_bad_waits_are_refused(
    token_runtime: Runtime, api: httpx.Client
) -> None:
    admin = add_user(token_runtime, "ann@example.com", admin=True)
    waited = api.post("/v1/documents?wait=30", files=[md("lunch.md", LUNCH)], headers=admin)
    assert waited.status_code == 201 and waited.json()[0]["status"] == "added"
    again = api.post("/v1/documents?wait=30", files=[md("lunch.md", LUNCH)], headers=admin)
    assert again.json()[0]["status"] == "unchanged"  # ingesting the same bytes is idempotent
    for bad in ("-1", "301", "soon"):
        refused = api.post(f"/v1/documents?wait={bad}", files=[md("x.md", LUNCH)], headers=admin)
        assert refused.status_code == 422 and refused.json()["detail"]["field"] == "wait"
    assert parts(token_runtime) == 2  # nothing was stored for the refused ones


def test_a_wait_that_runs_out_answers_the_job_as_it_is_now(
    token_runtime: Runtime, api: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = add_user(token_runtime, "ann@example.com", admin=True)
    ingestor = token_runtime.knowledge.ingestor
    slow = ingestor.ingest_bytes

    def slowly(*args: object, **kwargs: object) -> object:
        time.sleep(3)  # the job runs past the wait
        return slow(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ingestor, "ingest_bytes", slowly)
    accepted = api.post("/v1/documents?wait=1", files=[md("lunch.md", LUNCH)], headers=admin)
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()["job"]
    assert job["state"] == "running" and job["attempts"] == 1 and job["started_at"] is not None
    assert follow(api, accepted.headers["location"], admin)["state"] == "done"
