"""The HTTP API over a real uvicorn server on loopback, on both database backends."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import func, select

from search2o import accounts
from search2o.api.app import create_app
from search2o.config import Settings
from search2o.logs import JsonFormatter
from search2o.runtime import Runtime
from search2o.storage.models import Chunk, Document, DocumentAccess
from tests.conftest import MemoEmbedder

pytestmark = pytest.mark.slow

SALARIES = b"# Salary bands\n\nThe salary band for level 3 engineers is confidential.\n"
LUNCH = b"# Lunch\n\nLunch is served at noon in the cafeteria on the second floor.\n"
PARKING = (
    b"# Office guide\n\n## Parking\n\nBicycles are parked in the basement garage next to the "
    b"lockers.\n\n## Kitchen\n\nThe coffee machine is cleaned every Friday afternoon.\n"
)
BROKEN_PDF = b"%PDF-1.4 this is not really a pdf"
MD = "text/markdown"


@contextmanager
def serve(app: FastAPI, port: int = 0) -> Iterator[httpx.Client]:
    """Run ``app`` on loopback ``port`` (0: a free one) in a background thread; yield a client."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "the server thread died while starting"
        assert time.monotonic() < deadline, "the server did not start within 30 s"
        time.sleep(0.01)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        assert not thread.is_alive(), "the server did not stop"


@pytest.fixture
def local_api(runtime: Runtime) -> Iterator[httpx.Client]:
    """The API in ``auth_mode=local`` (the embedded default)."""
    assert runtime.settings.auth_mode == "local"
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        yield client


def add_user(
    runtime: Runtime, email: str, groups: tuple[str, ...] = (), admin: bool = False
) -> dict[str, str]:
    """Create a user with a token; return the ``Authorization`` header carrying it."""
    with runtime.database.session() as session:
        user = accounts.create_user(session, email, groups=list(groups), is_admin=admin)
        token = accounts.issue_token(session, user, "tests")
    return {"Authorization": f"Bearer {token}"}


def md(name: str, data: bytes) -> tuple[str, tuple[str, bytes, str]]:
    return ("files", (name, data, MD))


def sources(hits: list[dict[str, Any]]) -> list[str]:
    return [h["source"] for h in hits]


def stored(runtime: Runtime) -> tuple[int, int, int]:
    """Documents, chunks and access entries in the database."""
    with runtime.database.session() as session:
        return tuple(  # type: ignore[return-value]
            int(session.scalar(select(func.count()).select_from(table)) or 0)
            for table in (Document, Chunk, DocumentAccess)
        )


def assert_input_error(response: httpx.Response, status: int, field: str) -> dict[str, Any]:
    """Check an error of ours: status, class, and the field it names."""
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert detail["field"] == field, detail
    assert detail["error"] == "InputError"
    assert detail["message"].startswith(f"{field}: ")
    assert detail["reason"]
    return detail


def assert_validation_error(response: httpx.Response, field: str) -> None:
    """Check a request validation error has our body shape and names ``field``."""
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["error"] == "InputError" and detail["reason"], detail
    assert detail["field"].split(".")[-1] == field, detail
    assert any(err["loc"][-1] == field for err in detail["errors"]), detail


# ---------------------------------------------------------------------------------------------
# authentication
# ---------------------------------------------------------------------------------------------


def test_token_mode_refuses_missing_bad_and_revoked_tokens(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    missing = token_api.get("/v1/documents")
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["detail"]["error"] == "AuthenticationError"
    assert "x-search2o-auth-mode" not in missing.headers

    not_bearer = token_api.get("/v1/documents", headers={"Authorization": "Basic YTpi"})
    assert not_bearer.status_code == 401
    assert not_bearer.headers["www-authenticate"] == "Bearer"

    bad = token_api.get("/v1/documents", headers={"Authorization": "Bearer s2o_not-a-token"})
    assert bad.status_code == 401
    assert bad.headers["www-authenticate"] == "Bearer"
    assert bad.json()["detail"]["message"] == "invalid or revoked API token"

    # authentication comes before validation: nothing about the body leaks out
    anonymous = token_api.post("/v1/search", json={"query": ""})
    assert anonymous.status_code == 401

    good = add_user(token_runtime, "ann@example.com")
    ok = token_api.get("/v1/documents", headers=good)
    assert ok.status_code == 200
    assert ok.json() == []

    with token_runtime.database.session() as session:
        accounts.revoke_token(session, good["Authorization"].removeprefix("Bearer "))
    revoked = token_api.get("/v1/documents", headers=good)
    assert revoked.status_code == 401
    assert revoked.headers["www-authenticate"] == "Bearer"
    # no local user was created behind the scenes
    with token_runtime.database.session() as session:
        assert [u.email for u in accounts.list_users(session)] == ["ann@example.com"]


def test_token_mode_health_is_open_and_reports_the_mode(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    response = token_api.get("/v1/health")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "version": version("search2o"),
        "database": token_runtime.database.backend,
        "auth_mode": "token",
    }
    assert "x-search2o-auth-mode" not in response.headers


def test_local_mode_acts_as_the_local_admin(
    runtime: Runtime, local_api: httpx.Client, database_url: str
) -> None:
    health = local_api.get("/v1/health")
    assert health.status_code == 200
    assert health.headers["x-search2o-auth-mode"] == "local-single-user"
    body = health.json()
    assert body["auth_mode"] == "local" and body["status"] == "ok"
    assert body["database"] == database_url.split(":")[0].split("+")[0]

    listed = local_api.get("/v1/documents")
    assert listed.status_code == 200 and listed.json() == []
    assert listed.headers["x-search2o-auth-mode"] == "local-single-user"
    with runtime.database.session() as session:
        local = accounts.get_user(session, "local@localhost")
        assert local.is_admin

    # without a token the caller may do admin things: upload
    upload = local_api.post("/v1/documents?wait=60", files=[md("lunch.md", LUNCH)])
    assert upload.status_code == 201, upload.text
    assert upload.json()[0]["status"] == "added"

    # a token still identifies its owner, who is not an admin
    reader = add_user(runtime, "reader@example.com")
    refused = local_api.post(
        "/v1/documents?wait=60", files=[md("other.md", PARKING)], headers=reader
    )
    assert refused.status_code == 403
    assert refused.headers["x-search2o-auth-mode"] == "local-single-user"
    bad = local_api.get("/v1/documents", headers={"Authorization": "Bearer s2o_nope"})
    assert bad.status_code == 401
    assert stored(runtime)[0] == 1


def test_request_id_is_echoed_or_made(local_api: httpx.Client) -> None:
    given = local_api.get("/v1/health", headers={"x-request-id": "abc123"})
    assert given.headers["x-request-id"] == "abc123"
    made = {local_api.get("/v1/health").headers["x-request-id"] for _ in range(2)}
    assert len(made) == 2 and all(len(rid) == 16 for rid in made)


# ---------------------------------------------------------------------------------------------
# uploads
# ---------------------------------------------------------------------------------------------


def test_upload_reports_each_file_and_skips_bad_ones(
    runtime: Runtime, local_api: httpx.Client
) -> None:
    files = [
        md("lunch.md", LUNCH),
        md("guide.md", PARKING),
        ("files", ("broken.pdf", BROKEN_PDF, "application/pdf")),
    ]
    first = local_api.post("/v1/documents?wait=60", files=files)
    assert first.status_code == 201, first.text
    outcomes = first.json()
    assert [(o["source"], o["status"]) for o in outcomes] == [
        ("upload:lunch.md", "added"),
        ("upload:guide.md", "added"),
        ("upload:broken.pdf", "skipped"),
    ]
    assert outcomes[0]["title"] == "Lunch" and outcomes[0]["chunks"] >= 1
    assert outcomes[1]["title"] == "Office guide" and outcomes[1]["chunks"] >= 1
    assert all(o["document_id"] for o in outcomes[:2]) and all(
        not o["reason"] for o in outcomes[:2]
    )
    skipped = outcomes[2]
    assert skipped["reason"] and skipped["chunks"] == 0 and skipped["document_id"] is None
    documents, chunks, access = stored(runtime)
    assert (documents, access) == (2, 0)
    assert chunks == outcomes[0]["chunks"] + outcomes[1]["chunks"]

    again = local_api.post("/v1/documents?wait=60", files=files)
    assert again.status_code == 201
    assert [o["status"] for o in again.json()] == ["unchanged", "unchanged", "skipped"]
    assert [o["document_id"] for o in again.json()[:2]] == [o["document_id"] for o in outcomes[:2]]
    assert stored(runtime) == (documents, chunks, access)

    listed = local_api.get("/v1/documents").json()
    assert [(d["source"], d["title"], d["media_type"], d["access"]) for d in listed] == [
        ("upload:guide.md", "Office guide", MD, []),
        ("upload:lunch.md", "Lunch", MD, []),
    ]
    assert listed[1]["size_bytes"] == len(LUNCH)


def test_changed_upload_replaces_the_document(runtime: Runtime, local_api: httpx.Client) -> None:
    first = local_api.post("/v1/documents?wait=60", files=[md("notes.md", LUNCH)]).json()[0]
    changed = local_api.post("/v1/documents?wait=60", files=[md("notes.md", PARKING)]).json()[0]
    assert changed["status"] == "updated"
    assert changed["document_id"] == first["document_id"]
    assert changed["title"] == "Office guide"
    assert stored(runtime)[0] == 1


def test_group_upload_is_invisible_outside_the_group(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    admin = add_user(token_runtime, "admin@example.com", admin=True)
    hr = add_user(token_runtime, "hr@example.com", ("hr",))
    outsider = add_user(token_runtime, "dev@example.com", ("eng",))

    secret = token_api.post(
        "/v1/documents?wait=60",
        files=[md("salaries.md", SALARIES)],
        data={"groups": "hr"},
        headers=admin,
    )
    assert secret.status_code == 201 and secret.json()[0]["status"] == "added"
    public = token_api.post("/v1/documents?wait=60", files=[md("lunch.md", LUNCH)], headers=admin)
    assert public.status_code == 201

    query = {"query": "salary band for level 3 engineers", "k": 10}
    hr_hits = token_api.post("/v1/search", json=query, headers=hr).json()["hits"]
    assert sources(hr_hits)[0] == "upload:salaries.md"
    outsider_hits = token_api.post("/v1/search", json=query, headers=outsider).json()["hits"]
    assert "upload:salaries.md" not in sources(outsider_hits)
    assert set(sources(outsider_hits)) == {"upload:lunch.md"}

    as_hr = token_api.get("/v1/documents", headers=hr).json()
    assert {d["source"]: d["access"] for d in as_hr} == {
        "upload:lunch.md": [],
        "upload:salaries.md": ["group:hr"],
    }
    as_outsider = token_api.get("/v1/documents", headers=outsider).json()
    assert [d["source"] for d in as_outsider] == ["upload:lunch.md"]
    as_admin = token_api.get("/v1/documents", headers=admin).json()
    assert len(as_admin) == 2


def test_upload_restricted_to_named_users(token_runtime: Runtime, token_api: httpx.Client) -> None:
    admin = add_user(token_runtime, "admin@example.com", admin=True)
    named = add_user(token_runtime, "named@example.com")
    other = add_user(token_runtime, "other@example.com")
    response = token_api.post(
        "/v1/documents?wait=60",
        files=[md("salaries.md", SALARIES)],
        data={"users": ["Named@Example.com"]},
        headers=admin,
    )
    assert response.status_code == 201
    assert [d["access"] for d in token_api.get("/v1/documents", headers=named).json()] == [
        ["user:named@example.com"]
    ]
    assert token_api.get("/v1/documents", headers=other).json() == []
    query = {"query": "salary band"}
    assert token_api.post("/v1/search", json=query, headers=other).json()["hits"] == []
    assert token_api.post("/v1/search", json=query, headers=named).json()["hits"]


def test_non_admin_upload_is_forbidden_and_stores_nothing(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    reader = add_user(token_runtime, "reader@example.com", ("hr",))
    response = token_api.post(
        "/v1/documents?wait=60", files=[md("lunch.md", LUNCH)], headers=reader
    )
    assert response.status_code == 403
    assert response.json()["detail"]["error"] == "PermissionDeniedError"
    assert stored(token_runtime) == (0, 0, 0)


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"groups": "h r"}, "groups"),
        ({"groups": ["hr", "-bad"]}, "groups"),
        ({"groups": ""}, "groups"),
        ({"users": "not-an-email"}, "users"),
        ({"groups": "hr", "users": ["ok@example.com", "bad"]}, "users"),
    ],
)
def test_bad_access_list_is_refused_and_stores_nothing(
    runtime: Runtime, local_api: httpx.Client, form: dict[str, Any], field: str
) -> None:
    response = local_api.post(
        "/v1/documents?wait=60", files=[md("lunch.md", LUNCH), md("guide.md", PARKING)], data=form
    )
    assert_input_error(response, 422, field)
    assert stored(runtime) == (0, 0, 0)
    assert local_api.get("/v1/documents").json() == []


def test_upload_without_files_is_a_validation_error(
    runtime: Runtime, local_api: httpx.Client
) -> None:
    assert_validation_error(local_api.post("/v1/documents?wait=60", data={"groups": "hr"}), "files")
    # an empty file name makes the part a plain form value, not a file
    empty = local_api.post("/v1/documents?wait=60", files=[("files", ("", LUNCH, MD))])
    assert empty.status_code == 422
    assert empty.json()["detail"]["errors"][0]["loc"][:2] == ["body", "files"]
    assert stored(runtime) == (0, 0, 0)


def test_upload_with_a_blank_file_name_is_refused(
    runtime: Runtime, local_api: httpx.Client
) -> None:
    response = local_api.post("/v1/documents?wait=60", files=[("files", ("  ", LUNCH, MD))])
    assert_input_error(response, 422, "files[0]")
    assert stored(runtime) == (0, 0, 0)


def test_blank_file_name_later_in_the_batch_stores_nothing(
    runtime: Runtime, local_api: httpx.Client
) -> None:
    response = local_api.post(
        "/v1/documents?wait=60", files=[md("lunch.md", LUNCH), ("files", ("  ", PARKING, MD))]
    )
    assert_input_error(response, 422, "files[1]")
    assert stored(runtime) == (0, 0, 0)


def test_oversized_upload_is_skipped_with_the_limit(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    small = settings.model_copy(
        update={"knowledge": settings.knowledge.model_copy(update={"max_file_bytes": 64})}
    )
    rt = Runtime(small, embedder=embedder)
    try:
        with serve(create_app(small, runtime=rt)) as client:
            response = client.post(
                "/v1/documents?wait=60",
                files=[md("big.md", PARKING), md("tiny.md", b"# Tiny\n\nOk.\n")],
            )
            assert response.status_code == 201
            big, tiny = response.json()
            assert big["status"] == "skipped" and "the limit is 64" in big["reason"]
            assert tiny["status"] == "added"
            assert [d["source"] for d in client.get("/v1/documents").json()] == ["upload:tiny.md"]
    finally:
        rt.close()


# ---------------------------------------------------------------------------------------------
# search
# ---------------------------------------------------------------------------------------------


def test_search_returns_ranked_hits_with_their_context(
    runtime: Runtime, local_api: httpx.Client
) -> None:
    upload = local_api.post(
        "/v1/documents?wait=60", files=[md("guide.md", PARKING), md("lunch.md", LUNCH)]
    )
    assert upload.status_code == 201
    response = local_api.post("/v1/search", json={"query": "where do I park my bicycle", "k": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["embed_ms"] > 0 and body["search_ms"] > 0
    hits = body["hits"]
    assert 1 <= len(hits) <= 3
    best = hits[0]
    assert best["title"] == "Office guide"
    assert best["source"] == "upload:guide.md"
    assert best["heading_path"] == ["Parking"]
    assert "basement garage" in best["text"]
    assert best["score"] > 0 and best["similarity"] is not None
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    one = local_api.post("/v1/search", json={"query": "coffee machine"}).json()["hits"]
    assert one[0]["heading_path"] == ["Kitchen"]
    assert len(local_api.post("/v1/search", json={"query": "lunch", "k": 1}).json()["hits"]) == 1


def test_search_on_an_empty_store_returns_no_hits(local_api: httpx.Client) -> None:
    response = local_api.post("/v1/search", json={"query": "anything at all"})
    assert response.status_code == 200
    assert response.json()["hits"] == []


def test_query_syntax_characters_are_plain_text(local_api: httpx.Client) -> None:
    local_api.post("/v1/documents?wait=60", files=[md("guide.md", PARKING)])
    for query in ['"', "NOT AND OR", "*:", "the a of", "' | & ! ( )", "park*", "café 日本語"]:
        response = local_api.post("/v1/search", json={"query": query, "k": 100})
        assert response.status_code == 200, (query, response.text)
        assert len(response.json()["hits"]) <= 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   \n\t"}, "query"),
        ({"query": "x" * 2001}, "query"),
        ({"query": "parking", "k": 0}, "k"),
        ({"query": "parking", "k": -3}, "k"),
        ({"query": "parking", "k": 101}, "k"),
    ],
)
def test_search_rejects_bad_values_naming_the_field(
    runtime: Runtime, local_api: httpx.Client, body: dict[str, Any], field: str
) -> None:
    local_api.post("/v1/documents?wait=60", files=[md("guide.md", PARKING)])
    before = stored(runtime)
    assert_input_error(local_api.post("/v1/search", json=body), 422, field)
    assert stored(runtime) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"k": 3}, "query"),
        ({"query": "parking", "k": "many"}, "k"),
        ({"query": ["a", "b"]}, "query"),
    ],
)
def test_search_body_schema_is_validated(
    local_api: httpx.Client, body: dict[str, Any], field: str
) -> None:
    assert_validation_error(local_api.post("/v1/search", json=body), field)


def test_search_without_a_json_body_is_refused(local_api: httpx.Client) -> None:
    response = local_api.post(
        "/v1/search", content=b"query=parking", headers={"content-type": "text/plain"}
    )
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail["error"] == "InputError" and detail["errors"], detail


# ---------------------------------------------------------------------------------------------
# deletion
# ---------------------------------------------------------------------------------------------


def test_delete_rules_and_effect(token_runtime: Runtime, token_api: httpx.Client) -> None:
    admin = add_user(token_runtime, "admin@example.com", admin=True)
    hr = add_user(token_runtime, "hr@example.com", ("hr",))
    outsider = add_user(token_runtime, "dev@example.com", ("eng",))
    uploaded = token_api.post(
        "/v1/documents?wait=60",
        files=[md("salaries.md", SALARIES)],
        data={"groups": "hr"},
        headers=admin,
    ).json()[0]
    token_api.post("/v1/documents?wait=60", files=[md("lunch.md", LUNCH)], headers=admin)
    doc_id = uploaded["document_id"]
    before = stored(token_runtime)

    hidden = token_api.delete(f"/v1/documents/{doc_id}", headers=outsider)
    missing = token_api.delete("/v1/documents/999999", headers=outsider)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["detail"]["error"] == missing.json()["detail"]["error"] == "NotFoundError"
    assert hidden.json()["detail"]["message"] == f"no document {doc_id}"

    forbidden = token_api.delete(f"/v1/documents/{doc_id}", headers=hr)
    assert forbidden.status_code == 403
    assert forbidden.json()["detail"]["error"] == "PermissionDeniedError"
    assert stored(token_runtime) == before

    query = {"query": "salary band for level 3 engineers", "k": 10}
    assert "upload:salaries.md" in sources(
        token_api.post("/v1/search", json=query, headers=hr).json()["hits"]
    )
    deleted = token_api.delete(f"/v1/documents/{doc_id}", headers=admin)
    assert deleted.status_code == 200
    assert deleted.json()["id"] == doc_id
    assert deleted.json()["source"] == "upload:salaries.md"
    assert deleted.json()["access"] == ["group:hr"]

    for who in (hr, admin):
        hits = token_api.post("/v1/search", json=query, headers=who).json()["hits"]
        assert "upload:salaries.md" not in sources(hits)
        assert all(h["document_id"] != doc_id for h in hits)
        listed = token_api.get("/v1/documents", headers=who).json()
        assert [d["source"] for d in listed] == ["upload:lunch.md"]
    with token_runtime.database.session() as session:
        assert session.scalar(select(func.count()).where(Chunk.document_id == doc_id)) == 0
    assert token_api.delete(f"/v1/documents/{doc_id}", headers=admin).status_code == 404


def test_delete_with_a_bad_id_is_a_validation_error(
    runtime: Runtime, local_api: httpx.Client
) -> None:
    local_api.post("/v1/documents?wait=60", files=[md("lunch.md", LUNCH)])
    assert_validation_error(local_api.delete("/v1/documents/lunch"), "document_id")
    assert stored(runtime)[0] == 1


# ---------------------------------------------------------------------------------------------
# logs and schema
# ---------------------------------------------------------------------------------------------


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_each_request_is_one_structured_log_line(local_api: httpx.Client) -> None:
    capture = _Lines()
    logger = logging.getLogger("search2o.api")
    logger.addHandler(capture)
    try:
        health = local_api.get("/v1/health", headers={"x-request-id": "req-1"})
        refused = local_api.post("/v1/search", json={"query": ""})
        missing = local_api.get("/v1/nowhere")
        # The server thread logs a request after its response has gone out: on a busy machine
        # the client can read the last response before that line is written.
        deadline = time.monotonic() + 10
        while len(capture.lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        logger.removeHandler(capture)
    assert [r.status_code for r in (health, refused, missing)] == [200, 422, 404]
    records = [json.loads(line) for line in capture.lines]
    assert all("\n" not in line for line in capture.lines)
    assert [(r["method"], r["path"], r["status"]) for r in records] == [
        ("GET", "/v1/health", 200),
        ("POST", "/v1/search", 422),
        ("GET", "/v1/nowhere", 404),
    ]
    for record, response in zip(records, (health, refused, missing), strict=True):
        assert record["event"] == "request"
        assert record["logger"] == "search2o.api"
        assert record["level"] == "info"
        assert isinstance(record["ms"], int | float) and record["ms"] >= 0
        assert record["request_id"] == response.headers["x-request-id"]
        assert record["ts"].endswith("Z")
    assert records[0]["request_id"] == "req-1"


def test_openapi_lists_the_endpoints(local_api: httpx.Client) -> None:
    response = local_api.get("/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["info"]["title"] == "search2o"
    assert schema["info"]["version"] == version("search2o")
    paths = schema["paths"]
    assert "post" in paths["/v1/search"]
    assert {"get", "post"} <= set(paths["/v1/documents"])
    assert "delete" in paths["/v1/documents/{document_id}"]
    assert "get" in paths["/v1/health"]
    assert "HTTPBearer" in schema["components"]["securitySchemes"]
    assert {"SearchRequest", "SearchPublic", "DocumentPublic", "IngestPublic"} <= set(
        schema["components"]["schemas"]
    )
