"""API behaviours found by trying the product as a user: uploads that share names, concurrent
writes of one source, strict body types, and access-list changes reported back."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from search2o.api.app import create_app
from search2o.runtime import Runtime
from tests.api.test_api import assert_input_error, md, serve, stored


@pytest.fixture
def api(runtime: Runtime) -> Iterator[httpx.Client]:
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        yield client


def test_same_file_name_in_two_folders_can_be_kept_apart_with_paths(
    runtime: Runtime, api: httpx.Client
) -> None:
    first = api.post(
        "/v1/documents?wait=60",
        files=[md("notes.md", b"# Notes\n\nHR notes about payroll.\n")],
        data={"paths": "hr/notes.md", "groups": "hr"},
    )
    second = api.post(
        "/v1/documents?wait=60",
        files=[md("notes.md", b"# Notes\n\nEngineering notes about deploys.\n")],
        data={"paths": "eng/notes.md"},
    )
    assert [o["status"] for o in first.json() + second.json()] == ["added", "added"]
    sources = sorted(d["source"] for d in api.get("/v1/documents").json())
    assert sources == ["upload:eng/notes.md", "upload:hr/notes.md"]


def test_duplicate_identities_in_one_request_are_refused(
    runtime: Runtime, api: httpx.Client
) -> None:
    same = api.post(
        "/v1/documents?wait=60", files=[md("a.md", b"# A\n\nOne.\n"), md("a.md", b"# A\n\nTwo.\n")]
    )
    assert_input_error(same, 422, "files[1]")
    mismatch = api.post(
        "/v1/documents?wait=60", files=[md("a.md", b"# A\n\nOne.\n")], data={"paths": ["x", "y"]}
    )
    assert_input_error(mismatch, 422, "paths")
    assert stored(runtime) == (0, 0, 0)


def test_concurrent_uploads_of_one_source_never_fail(runtime: Runtime, api: httpx.Client) -> None:
    statuses: list[int] = []
    bodies = [f"# Race\n\nVersion {i} of the race document.\n".encode() for i in range(4)]

    def upload(body: bytes) -> None:
        statuses.append(api.post("/v1/documents?wait=60", files=[md("race.md", body)]).status_code)

    threads = [threading.Thread(target=upload, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert statuses == [201, 201, 201, 201]
    docs = api.get("/v1/documents").json()
    assert [d["source"] for d in docs] == ["upload:race.md"] and docs[0]["chunk_count"] == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [({"query": "x", "k": "5"}, "k"), ({"query": "x", "k": True}, "k"), ({"query": 5}, "query")],
)
def test_search_types_are_strict(api: httpx.Client, body: dict[str, object], field: str) -> None:
    response = api.post("/v1/search", json=body)
    assert_input_error(response, 422, field)


def test_an_upload_that_widens_access_says_so(api: httpx.Client) -> None:
    doc = md("pay.md", b"# Pay\n\nSalary bands are confidential.\n")
    api.post("/v1/documents?wait=60", files=[doc], data={"groups": "hr"})
    widened = api.post("/v1/documents?wait=60", files=[doc]).json()[0]
    assert widened["status"] == "updated" and widened["access_before"] == ["group:hr"]
    same = api.post("/v1/documents?wait=60", files=[doc]).json()[0]
    assert same["status"] == "unchanged" and same["access_before"] is None


def test_long_or_unprintable_request_ids_are_replaced(api: httpx.Client) -> None:
    long_id = api.get("/v1/health", headers={"x-request-id": "x" * 500})
    assert len(long_id.headers["x-request-id"]) == 16
    kept = api.get("/v1/health", headers={"x-request-id": "abc-123"})
    assert kept.headers["x-request-id"] == "abc-123"


def test_api_pages_work_offline(api: httpx.Client) -> None:
    page = api.get("/docs")
    assert page.status_code == 200
    assert "cdn.jsdelivr" not in page.text and "/swagger-ui-bundle.js" in page.text
    script = page.text.split('src="')[1].split('"')[0]
    asset = api.get(script)
    assert asset.status_code == 200 and len(asset.content) > 100_000
    assert api.get("/redoc").status_code == 200
