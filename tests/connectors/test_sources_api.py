"""``/v1/sources`` through a real server: admins only, secrets never returned, syncs as jobs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from search2o.api.app import create_app
from search2o.config import Settings
from search2o.connectors.settings import ConnectorsSettings
from search2o.runtime import Runtime
from tests.api.test_api import add_user, assert_input_error, serve
from tests.conftest import MemoEmbedder


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    folder = tmp_path / "shared"
    folder.mkdir()
    return folder


@pytest.fixture
def rooted_runtime(settings: Settings, embedder: MemoEmbedder, roots: Path) -> Iterator[Runtime]:
    """Token mode, with connectors.folder_roots = [roots]."""
    section = ConnectorsSettings(folder_roots=[str(roots)])
    runtime = Runtime(
        settings.model_copy(update={"auth_mode": "token", "connectors": section}),
        embedder=embedder,
    )
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def rooted_api(rooted_runtime: Runtime) -> Iterator[httpx.Client]:
    with serve(create_app(rooted_runtime.settings, runtime=rooted_runtime)) as client:
        yield client


def _wait_for_job(api: httpx.Client, job: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        found = api.get(f"/v1/jobs/{job}", headers=headers).json()
        if found["state"] in ("done", "failed"):
            return found  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, found
        time.sleep(0.1)


def test_an_admin_manages_a_source_and_syncs_it_as_a_job(
    rooted_runtime: Runtime, rooted_api: httpx.Client, roots: Path
) -> None:
    token_runtime, token_api = rooted_runtime, rooted_api
    ann = add_user(token_runtime, "ann@example.com", admin=True)
    bob = add_user(token_runtime, "bob@example.com", ("hr",))
    folder = roots / "handbook"
    folder.mkdir()
    (folder / "vacation.md").write_text("# Vacation\n\nEveryone gets 30 days of vacation.\n")
    body = {
        "name": "handbook",
        "kind": "folder",
        "settings": {"path": str(folder), "groups": ["hr"]},
        "schedule_s": 3600,
    }
    created = token_api.post("/v1/sources", json=body, headers=ann)
    assert created.status_code == 201, created.text
    assert created.json()["credentials"] == "not set" and created.json()["documents"] == 0
    assert token_api.post("/v1/sources", json=body, headers=ann).status_code == 409

    started = token_api.post("/v1/sources/handbook/sync", json={}, headers=ann)
    assert started.status_code == 202, started.text
    job = _wait_for_job(token_api, started.json()["job"], ann)
    assert job["state"] == "done", job
    shown = token_api.get("/v1/sources/handbook", headers=ann).json()
    assert shown["documents"] == 1 and shown["last_error"] is None
    assert shown["last_counts"]["added"] == 1 and shown["last_success"] is not None
    hits = token_api.post("/v1/search", json={"query": "how many vacation days"}, headers=bob)
    assert hits.json()["hits"][0]["source"] == "handbook:vacation.md"

    patched = token_api.patch(
        "/v1/sources/handbook", json={"settings": {"groups": ["eng"]}, "manual": True}, headers=ann
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["settings"]["groups"] == ["eng"] and patched.json()["schedule_s"] is None

    listed = token_api.get("/v1/sources", headers=ann).json()["sources"]
    assert [s["name"] for s in listed] == ["handbook"]
    gone = token_api.delete("/v1/sources/handbook", headers=ann)
    assert gone.status_code == 204
    assert token_api.get("/v1/sources/handbook", headers=ann).status_code == 404
    assert (
        token_api.post("/v1/search", json={"query": "vacation"}, headers=bob).json()["hits"] == []
    )


def test_everyone_but_an_admin_gets_404_and_bad_input_names_the_field(
    token_runtime: Runtime, token_api: httpx.Client, tmp_path: Path
) -> None:
    ann = add_user(token_runtime, "ann@example.com", admin=True)
    bob = add_user(token_runtime, "bob@example.com")
    body = {"name": "docs", "kind": "folder", "settings": {"path": str(tmp_path)}}
    for method, path in [
        ("GET", "/v1/sources"),
        ("POST", "/v1/sources"),
        ("GET", "/v1/sources/docs"),
        ("PATCH", "/v1/sources/docs"),
        ("DELETE", "/v1/sources/docs"),
        ("POST", "/v1/sources/docs/sync"),
    ]:
        refused = token_api.request(
            method, path, json=body if method == "POST" else {}, headers=bob
        )
        assert refused.status_code == 404, (method, path, refused.text)
    assert token_api.get("/v1/sources").status_code == 401

    assert_input_error(
        token_api.post("/v1/sources", json={**body, "kind": "nosuch"}, headers=ann), 422, "kind"
    )
    unknown = {**body, "settings": {"path": str(tmp_path), "colour": "red"}}
    assert_input_error(
        token_api.post("/v1/sources", json=unknown, headers=ann), 422, "settings.colour"
    )
    # With no connectors.folder_roots, the API adds no folder source: the host's files are not
    # an admin's browser's to read (the host's command line may).
    outside = assert_input_error(
        token_api.post("/v1/sources", json=body, headers=ann), 422, "settings.path"
    )
    assert "connectors.folder_roots" in outside["reason"]
    relative = {**body, "settings": {"path": "docs"}}
    assert_input_error(
        token_api.post("/v1/sources", json=relative, headers=ann), 422, "settings.path"
    )
    secret = {**body, "credentials": {"token": "s3cr3t"}}
    assert_input_error(
        token_api.post("/v1/sources", json=secret, headers=ann), 422, "credentials.token"
    )
    assert token_api.get("/v1/sources", headers=ann).json()["sources"] == []
    assert token_api.post("/v1/sources/nope/sync", json={}, headers=ann).status_code == 404


def test_under_folder_roots_only(
    rooted_runtime: Runtime, rooted_api: httpx.Client, roots: Path, tmp_path: Path
) -> None:
    ann = add_user(rooted_runtime, "ann@example.com", admin=True)
    inside = {"name": "inside", "kind": "folder", "settings": {"path": str(roots)}}
    assert rooted_api.post("/v1/sources", json=inside, headers=ann).status_code == 201
    outside = {"name": "outside", "kind": "folder", "settings": {"path": str(tmp_path)}}
    refused = rooted_api.post("/v1/sources", json=outside, headers=ann)
    assert (
        "outside connectors.folder_roots"
        in assert_input_error(refused, 422, "settings.path")["reason"]
    )
    escape = rooted_api.patch("/v1/sources/inside", json={"settings": {"path": "/"}}, headers=ann)
    assert_input_error(escape, 422, "settings.path")
    shown = rooted_api.get("/v1/sources/inside", headers=ann).json()
    assert shown["settings"]["path"] == str(roots)
