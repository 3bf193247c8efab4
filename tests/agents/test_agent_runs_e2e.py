"""Agent runs end to end: ``POST /v1/chat`` with ``agent``, the validate endpoint, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from search2o.runtime import Runtime
from tests.agents.registry_samples import add_user
from tests.agents.test_agents_cli import cli, same_runtime  # noqa: F401 - fixtures
from tests.agents.test_runner import TRAVEL
from tests.test_cli import Cli, out

pytestmark = pytest.mark.slow


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_ask_answer_and_remember_through_the_api(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    admin = _auth(add_user(token_runtime, "root@example.com", admin=True)[1])
    user = _auth(add_user(token_runtime, "ann@example.com")[1])
    assert token_api.put("/v1/agents/travel", json=TRAVEL, headers=admin).status_code == 201

    first = token_api.post(
        "/v1/chat",
        json={"message": "Book me a flight", "agent": "travel", "stream": False},
        headers=user,
    ).json()
    assert first["status"] == "paused" and first["text"] == "Which airline do you prefer?"
    # the next message answers the waiting question, no agent named
    answered = token_api.post(
        "/v1/chat",
        json={"message": "KLM", "conversation_id": first["conversation_id"], "stream": False},
        headers=user,
    ).json()
    assert answered["status"] == "completed" and answered["text"] == "Noted: KLM"
    memories = token_api.get("/v1/memories", headers=user).json()["memories"]
    assert [m["text"] for m in memories] == ["The user prefers to fly KLM"]
    # a new conversation: the memory answers
    streamed = token_api.post(
        "/v1/chat", json={"message": "Which airline?", "agent": "travel"}, headers=user
    )
    assert (
        "event: done" in streamed.text and "You like: The user prefers to fly KLM" in streamed.text
    )

    unknown = token_api.post(
        "/v1/chat", json={"message": "hi", "agent": "nobody", "stream": False}, headers=user
    )
    assert unknown.status_code == 404
    validated = token_api.post(
        "/v1/agents/travel/validate", json={"query": "Which airline?"}, headers=admin
    ).json()
    assert validated["event"] == "done" and [t["command"] for t in validated["trace"]] == [
        "memory",
        "if",
        "ask",
    ]
    forbidden = token_api.post(
        "/v1/agents/travel/validate", json={"query": "Which airline?"}, headers=user
    )
    assert forbidden.status_code == 403


def test_run_and_validate_from_the_cli(cli: Cli, tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "travel.json"
    path.write_text(json.dumps(TRAVEL), encoding="utf-8")
    cli.ok("agents", "push", str(path))
    asked = json.loads(cli.ok("agents", "run", "travel", "Book me a flight", "--json").stdout)
    assert asked["status"] == "paused"
    done = out(cli.ok("agents", "run", "travel", "KLM", "--conversation", asked["conversation_id"]))
    assert done.strip() == "Noted: KLM"
    traced = out(cli.ok("agents", "validate", str(path), "Which airline?"))
    assert "memory" in traced and "You like: The user prefers to fly KLM" in traced
