"""``/v1/memories`` over a real uvicorn server on loopback, on both backends."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import httpx
import pytest

from search2o import accounts
from search2o.accounts import Principal
from search2o.runtime import Runtime
from tests.api.test_api import assert_input_error, assert_validation_error
from tests.memory.conftest import AIRLINE, COFFEE

pytestmark = pytest.mark.slow

QUERY_CANARY = "Okapi-Api-Query-Canary-5T1"


def _user(runtime: Runtime, email: str) -> tuple[Principal, dict[str, str]]:
    with runtime.database.session() as session:
        user = accounts.create_user(session, email)
        token = accounts.issue_token(session, user, "tests")
        principal = Principal.of(user)
    return principal, {"Authorization": f"Bearer {token}"}


def test_list_search_and_delete_only_the_callers_memories(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    ann, ann_auth = _user(token_runtime, "ann@example.com")
    ben, ben_auth = _user(token_runtime, "ben@example.com")
    token_runtime.memory.store(ann, "travel", {"preferred_airline": AIRLINE})
    token_runtime.memory.store(ann, "kitchen", {"coffee_order": COFFEE})
    token_runtime.memory.store(ben, "travel", {"preferred_airline": "Ben flies Delta"})

    listed = token_api.get("/v1/memories", headers=ann_auth)
    assert listed.status_code == 200, listed.text
    memories = listed.json()["memories"]
    assert [(m["agent"], m["label"], m["text"]) for m in memories] == [
        ("kitchen", "coffee_order", COFFEE),
        ("travel", "preferred_airline", AIRLINE),
    ]
    created = datetime.fromisoformat(memories[0]["created_at"])
    assert created.utcoffset() == timedelta(0) and memories[0]["last_retrieved_at"] is None
    only = token_api.get("/v1/memories", params={"agent": "travel"}, headers=ann_auth).json()
    assert [m["label"] for m in only["memories"]] == ["preferred_airline"]
    page = token_api.get("/v1/memories", params={"limit": 1, "offset": 1}, headers=ann_auth).json()
    assert [m["agent"] for m in page["memories"]] == ["travel"]

    found = token_api.post(
        "/v1/memories/search", json={"query": "which airline do they like?"}, headers=ann_auth
    )
    assert found.status_code == 200, found.text
    hits = found.json()["memories"]
    assert [(h["agent"], h["label"], h["text"]) for h in hits] == [
        ("travel", "preferred_airline", AIRLINE)
    ]
    assert hits[0]["score"] >= token_runtime.settings.memory.min_score
    # the owner's own look-ups do not count as retrievals
    assert token_runtime.memory.list(ann, agent="travel")[0].last_retrieved_at is None
    unrelated = token_api.post(
        "/v1/memories/search", json={"query": "quantum chromodynamics"}, headers=ann_auth
    )
    assert unrelated.json() == {"memories": []}

    # another user's memory is answered like a missing one
    foreign = token_api.delete("/v1/memories/kitchen/coffee_order", headers=ben_auth)
    assert foreign.status_code == 404 and foreign.json()["detail"]["error"] == "NotFoundError"
    assert (
        token_api.delete("/v1/memories/travel/preferred_airline", headers=ann_auth).status_code
        == 204
    )
    assert (
        token_api.delete("/v1/memories/travel/preferred_airline", headers=ann_auth).status_code
        == 404
    )
    assert token_api.delete("/v1/memories/no%20such/x", headers=ann_auth).status_code == 404
    left = token_api.get("/v1/memories", headers=ann_auth).json()["memories"]
    assert [m["label"] for m in left] == ["coffee_order"]
    again = token_api.post(
        "/v1/memories/search", json={"query": "which airline do they like?"}, headers=ann_auth
    )
    assert again.json() == {"memories": []}
    ben_left = token_api.get("/v1/memories", headers=ben_auth).json()["memories"]
    assert [m["text"] for m in ben_left] == ["Ben flies Delta"]


def test_bad_input_is_422_naming_the_field(token_runtime: Runtime, token_api: httpx.Client) -> None:
    _, auth = _user(token_runtime, "cid@example.com")
    assert_validation_error(token_api.post("/v1/memories/search", json={}, headers=auth), "query")
    assert_validation_error(
        token_api.post("/v1/memories/search", json={"query": "x", "limit": "5"}, headers=auth),
        "limit",
    )
    assert_validation_error(
        token_api.post("/v1/memories/search", json={"query": "x", "extra": 1}, headers=auth),
        "extra",
    )
    assert_input_error(
        token_api.post("/v1/memories/search", json={"query": "  "}, headers=auth), 422, "query"
    )
    assert_input_error(
        token_api.post("/v1/memories/search", json={"query": "x", "limit": 0}, headers=auth),
        422,
        "limit",
    )
    assert_input_error(
        token_api.post("/v1/memories/search", json={"query": "x", "agent": "a b"}, headers=auth),
        422,
        "agent",
    )
    assert_input_error(
        token_api.get("/v1/memories", params={"offset": -1}, headers=auth), 422, "offset"
    )
    assert_input_error(
        token_api.get("/v1/memories", params={"limit": 0}, headers=auth), 422, "limit"
    )
    assert token_api.get("/v1/memories").status_code == 401


def test_the_query_is_not_in_the_server_log(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    me, auth = _user(token_runtime, "dee@example.com")
    token_runtime.memory.store(me, "travel", {"preferred_airline": AIRLINE})
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage() + " " + str(getattr(record, "fields", "")))

    handler = Collect(level=logging.DEBUG)
    for name in ("search2o", "search2o.api", "uvicorn", "uvicorn.error", ""):
        logging.getLogger(name).addHandler(handler)
    try:
        response = token_api.post(
            "/v1/memories/search",
            json={"query": f"which airline do they like? {QUERY_CANARY}"},
            headers=auth,
        )
        bad = token_api.post(
            "/v1/memories/search", json={"query": QUERY_CANARY * 200}, headers=auth
        )
    finally:
        for name in ("search2o", "search2o.api", "uvicorn", "uvicorn.error", ""):
            logging.getLogger(name).removeHandler(handler)
    assert response.status_code == 200 and bad.status_code == 422
    assert QUERY_CANARY not in bad.text  # the error names the length, not the text
    assert any("/v1/memories/search" in line for line in lines)  # the request was logged
    assert not [line for line in lines if QUERY_CANARY in line]
