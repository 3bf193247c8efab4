"""``/v1/agents`` over a real uvicorn server on loopback, in token mode, on both backends."""

from __future__ import annotations

import json

import httpx
import pytest

from search2o.runtime import Runtime
from tests.agents.registry_samples import (
    BROKEN,
    BROKEN_PATHS,
    TRAVEL,
    TRAVEL_YAML,
    add_user,
    travel,
)
from tests.api.test_api import assert_input_error


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_put_get_list_replace_and_delete(token_runtime: Runtime, token_api: httpx.Client) -> None:
    _, admin_token = add_user(token_runtime, "root@example.com", admin=True)
    admin = _auth(admin_token)
    _, user_token = add_user(token_runtime, "ann@example.com")
    user = _auth(user_token)

    assert token_api.get("/v1/agents", headers=user).json() == {"agents": []}
    created = token_api.put("/v1/agents/travel", json=TRAVEL, headers=admin)
    assert created.status_code == 201, created.text
    assert created.json() == {
        "name": "travel",
        "description": "Remembers the airline you like",
        "created": True,
        "memory_labels": ["last_question"],
        "functions": ["main"],
    }
    shown = token_api.get("/v1/agents/travel", headers=admin)
    assert shown.status_code == 200
    assert shown.json() == TRAVEL
    assert list(json.loads(shown.text)["functions"]["main"]) == list(TRAVEL["functions"]["main"])

    replaced = token_api.put(
        "/v1/agents/travel", json=travel(description="Remembers airlines and seats"), headers=admin
    )
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["created"] is False
    token_api.put(
        "/v1/agents/kitchen", json=travel(name="kitchen", description="Coffee"), headers=admin
    )
    listed = token_api.get("/v1/agents", headers=user)
    assert listed.status_code == 200
    assert listed.json() == {
        "agents": [
            {"name": "kitchen", "description": "Coffee"},
            {"name": "travel", "description": "Remembers airlines and seats"},
        ]
    }

    deleted = token_api.delete("/v1/agents/travel", headers=admin)
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"deleted": "travel", "memories_deleted": 0}
    for response in (
        token_api.get("/v1/agents/travel", headers=admin),
        token_api.delete("/v1/agents/travel", headers=admin),
        token_api.get("/v1/agents/nobody", headers=admin),
    ):
        assert response.status_code == 404, response.text
        assert response.json()["detail"]["error"] == "NotFoundError"
    assert "agent 'nobody' not found" in response.json()["detail"]["message"]
    assert [a["name"] for a in token_api.get("/v1/agents", headers=user).json()["agents"]] == [
        "kitchen"
    ]


def test_bad_definitions_are_422_and_change_nothing(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    _, token = add_user(token_runtime, "root@example.com", admin=True)
    admin = _auth(token)
    assert token_api.put("/v1/agents/travel", json=TRAVEL, headers=admin).status_code == 201

    broken = token_api.put("/v1/agents/travel", json=BROKEN, headers=admin)
    assert broken.status_code == 422, broken.text
    detail = broken.json()["detail"]
    assert (detail["error"], detail["field"]) == ("DefinitionError", "definition")
    assert [p["path"] for p in detail["problems"]] == BROKEN_PATHS
    assert all(p["reason"] for p in detail["problems"])
    assert "unknown model profile 'gpt9'" in detail["problems"][1]["reason"]
    for path in BROKEN_PATHS:
        assert path in detail["message"]

    # A body named otherwise than its path is a conflict with the target (RFC 9110, 9.3.4).
    mismatch = token_api.put("/v1/agents/flights", json=TRAVEL, headers=admin)
    assert mismatch.status_code == 409, mismatch.text
    conflict = mismatch.json()["detail"]
    assert conflict["error"] == "ConflictError"
    assert "'travel'" in conflict["message"] and "'flights'" in conflict["message"]
    assert token_api.get("/v1/agents/flights", headers=admin).status_code == 404

    malformed = token_api.put(
        "/v1/agents/travel",
        content=b'{"name": "travel",',
        headers={**admin, "Content-Type": "application/json"},
    )
    assert malformed.status_code == 422
    problems = malformed.json()["detail"]["problems"]
    assert [p["path"] for p in problems] == ["$"] and "not valid JSON" in problems[0]["reason"]

    assert_input_error(
        token_api.put(
            "/v1/agents/travel",
            content=json.dumps(TRAVEL),
            headers={**admin, "Content-Type": "text/plain"},
        ),
        422,
        "content-type",
    )
    too_large = token_api.put(
        "/v1/agents/travel",
        content=b" " * 1_000_001,
        headers={**admin, "Content-Type": "application/json"},
    )
    assert too_large.status_code == 413
    assert too_large.json()["detail"]["field"] == "body"
    assert "api.max_definition_bytes" in too_large.json()["detail"]["reason"]
    assert token_api.get("/v1/agents/travel", headers=admin).json() == TRAVEL


@pytest.mark.parametrize("media", ["application/yaml", "text/yaml; charset=utf-8"])
def test_a_yaml_body_is_accepted(
    token_runtime: Runtime, token_api: httpx.Client, media: str
) -> None:
    _, token = add_user(token_runtime, "root@example.com", admin=True)
    admin = _auth(token)
    response = token_api.put(
        "/v1/agents/travel",
        content=TRAVEL_YAML.encode(),
        headers={**admin, "Content-Type": media},
    )
    assert response.status_code == 201, response.text
    assert response.json()["memory_labels"] == ["last_question"]
    stored = token_api.get("/v1/agents/travel", headers=admin).json()
    assert stored["description"] == "Se souvient de la compagnie aérienne que vous préférez"
    assert stored["functions"]["main"]["memory.note"] == {
        "store": {"last_question": "{ sys.query }"}
    }


def test_only_admins_manage_agents_everyone_lists_them(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    _, admin_token = add_user(token_runtime, "root@example.com", admin=True)
    _, user_token = add_user(token_runtime, "ann@example.com")
    admin, user = _auth(admin_token), _auth(user_token)
    token_api.put("/v1/agents/travel", json=TRAVEL, headers=admin)

    for response in (
        token_api.put("/v1/agents/travel", json=travel(description="mine now"), headers=user),
        token_api.put("/v1/agents/other", json=BROKEN, headers=user),  # refused before checks
        token_api.get("/v1/agents/travel", headers=user),
        token_api.delete("/v1/agents/travel", headers=user),
    ):
        assert response.status_code == 403, response.text
        assert response.json()["detail"]["error"] == "PermissionDeniedError"
    listed = token_api.get("/v1/agents", headers=user)
    assert listed.status_code == 200
    assert listed.json() == {
        "agents": [{"name": "travel", "description": "Remembers the airline you like"}]
    }
    assert token_api.get("/v1/agents").status_code == 401
    assert token_api.put("/v1/agents/travel", json=TRAVEL).status_code == 401
    assert token_api.get("/v1/agents/travel", headers=admin).json() == TRAVEL


@pytest.mark.slow
def test_delete_removes_the_agents_memories_of_every_user(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    _, admin_token = add_user(token_runtime, "root@example.com", admin=True)
    ann, ann_token = add_user(token_runtime, "ann@example.com")
    ben, _ = add_user(token_runtime, "ben@example.com")
    admin = _auth(admin_token)
    token_api.put("/v1/agents/travel", json=TRAVEL, headers=admin)
    token_runtime.memory.store(ann, "travel", {"preferred_airline": "Ann flies KLM"})
    token_runtime.memory.store(ben, "travel", {"preferred_airline": "Ben flies Delta"})
    token_runtime.memory.store(ann, "kitchen", {"coffee": "Ann drinks it black"})

    deleted = token_api.delete("/v1/agents/travel", headers=admin)
    assert deleted.json() == {"deleted": "travel", "memories_deleted": 2}
    left = token_api.get("/v1/memories", headers=_auth(ann_token)).json()["memories"]
    assert [(m["agent"], m["label"]) for m in left] == [("kitchen", "coffee")]
    assert token_runtime.memory.count(ben) == 0
