"""The example agents of ``examples/agents`` end to end, through the API and the CLI.

With the built-in model on both backends; the travel assistant also with the real llama.cpp
server of the model-provider tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from search2o.api.app import create_app
from search2o.runtime import Runtime
from tests.agents.registry_samples import add_user
from tests.api.test_api import serve
from tests.providers.test_llamacpp import llama_profile, llama_url  # noqa: F401 - fixture
from tests.query.doubles import ingest, use_profile
from tests.test_cli import Cli, out

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
DEVICES = Path(__file__).resolve().parents[3] / "shared" / "data" / "handbook"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _push(api: httpx.Client, admin: dict[str, str], name: str) -> None:
    path = EXAMPLES / name
    if path.suffix == ".yaml":
        response = api.put(
            f"/v1/agents/{path.stem}",
            content=path.read_bytes(),
            headers={**admin, "Content-Type": "application/yaml"},
        )
    else:
        response = api.put(
            f"/v1/agents/{path.stem}", json=json.loads(path.read_text()), headers=admin
        )
    assert response.status_code in (200, 201), response.text


def _chat(api: httpx.Client, user: dict[str, str], **body: Any) -> dict[str, Any]:
    response = api.post("/v1/chat", json={"stream": False, **body}, headers=user, timeout=120)
    assert response.status_code == 200, response.text
    return dict(response.json())


@pytest.fixture
def users(token_runtime: Runtime, token_api: httpx.Client) -> tuple[dict[str, str], dict[str, str]]:
    admin = _auth(add_user(token_runtime, "root@example.com", admin=True)[1])
    user = _auth(add_user(token_runtime, "ann@example.com")[1])
    return admin, user


def test_travel_remembers_the_airline_across_conversations(
    token_api: httpx.Client, users: tuple[dict[str, str], dict[str, str]]
) -> None:
    admin, user = users
    _push(token_api, admin, "travel.json")
    asked = _chat(token_api, user, message="Book me a flight to Lisbon", agent="travel")
    assert asked["status"] == "paused" and asked["text"] == "Which airline do you prefer to fly?"
    refused = _chat(token_api, user, message="x", conversation_id=asked["conversation_id"])
    assert refused["status"] == "paused" and "Please name one airline" in refused["text"]
    noted = _chat(token_api, user, message="KLM", conversation_id=asked["conversation_id"])
    assert noted["status"] == "completed" and noted["text"].startswith(
        "Noted: you prefer to fly KLM"
    )
    later = _chat(token_api, user, message="I need to fly to Rome next week", agent="travel")
    assert later["status"] == "completed" and later["text"] == "The user prefers to fly KLM [1]"
    assert [c["title"] for c in later["citations"]] == ["What I remember"]
    assert later["conversation_id"] != asked["conversation_id"]


def test_helpdesk_asks_once_then_answers_with_citations(
    token_runtime: Runtime,
    token_api: httpx.Client,
    users: tuple[dict[str, str], dict[str, str]],
) -> None:
    admin, user = users
    name = "managing-work-devices.md"
    ingest(token_runtime, {name: (DEVICES / name).read_text(encoding="utf-8")})
    _push(token_api, admin, "helpdesk.yaml")
    question = "Can I keep company code on my own computer?"
    asked = _chat(token_api, user, message=question, agent="helpdesk")
    assert asked["status"] == "paused" and "Which device" in asked["text"]
    answer = _chat(token_api, user, message="a phone", conversation_id=asked["conversation_id"])
    assert answer["status"] == "completed"
    assert "not okay to store 37signals code" in answer["text"] and "[1]" in answer["text"]
    # every source is a section of the devices page (a quote from two of its sections cites two)
    assert {c["title"] for c in answer["citations"]} == {"Managing work devices"}
    messages = token_api.get(f"/v1/conversations/{asked['conversation_id']}", headers=user).json()[
        "messages"
    ]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert {c["title"] for c in messages[-1]["citations"]} == {"Managing work devices"}


def test_two_agents_share_conv_variables_and_keep_their_own(
    token_runtime: Runtime,
    token_api: httpx.Client,
    users: tuple[dict[str, str], dict[str, str]],
) -> None:
    admin, user = users
    _push(token_api, admin, "trip_planner.json")
    _push(token_api, admin, "packing_list.json")
    first = _chat(token_api, user, message="Lisbon", agent="trip_planner")
    conversation = first["conversation_id"]
    packed = _chat(
        token_api, user, message="pack", agent="packing_list", conversation_id=conversation
    )
    assert packed["output"] == {
        "destination": "Lisbon",
        "list_number": 1,
        "items": ["passport", "charger", "sunscreen"],
    }
    _chat(token_api, user, message="Oslo", agent="trip_planner", conversation_id=conversation)
    again = _chat(
        token_api, user, message="pack", agent="packing_list", conversation_id=conversation
    )
    assert again["output"]["destination"] == "Oslo" and again["output"]["list_number"] == 2
    alone = token_api.post(
        "/v1/chat", json={"message": "pack", "agent": "packing_list", "stream": False}, headers=user
    )
    assert alone.status_code == 422  # the agent's own `fail`: no destination yet
    assert "No destination yet" in alone.json()["detail"]["message"]


def test_the_examples_from_the_cli(cli: Cli) -> None:
    for path in sorted(EXAMPLES.glob("*.json")) + sorted(EXAMPLES.glob("*.yaml")):
        cli.ok("agents", "push", str(path))
    asked = json.loads(cli.ok("agents", "run", "travel", "Book a flight", "--json").stdout)
    cli.ok("agents", "run", "travel", "KLM", "--conversation", asked["conversation_id"])
    assert out(cli.ok("agents", "run", "travel", "Fly me to Rome")).strip() == (
        "The user prefers to fly KLM [1]"
    )
    planned = json.loads(cli.ok("agents", "run", "trip_planner", "Rome", "--json").stdout)
    packed = json.loads(
        cli.ok(
            "agents",
            "run",
            "packing_list",
            "pack",
            "--conversation",
            planned["conversation_id"],
            "--json",
        ).stdout
    )
    assert packed["output"]["destination"] == "Rome"


@pytest.mark.llamacpp
def test_travel_with_llama_cpp(llama_url: str, runtime: Runtime) -> None:  # noqa: F811
    use_profile(runtime, llama_profile(llama_url))
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        path = EXAMPLES / "travel.json"
        assert client.put("/v1/agents/travel", json=json.loads(path.read_text())).status_code == 201
        asked = client.post(
            "/v1/chat", json={"message": "Book me a flight", "agent": "travel", "stream": False}
        ).json()
        assert asked["status"] == "paused"
        client.post(
            "/v1/chat",
            json={"message": "KLM", "conversation_id": asked["conversation_id"], "stream": False},
        )
        later = client.post(
            "/v1/chat",
            json={"message": "Fly me to Rome", "agent": "travel", "stream": False},
            timeout=120,
        ).json()
        assert later["status"] == "completed" and later["text"].strip()  # the real model wrote it
        assert [m["text"] for m in client.get("/v1/memories").json()["memories"]] == [
            "The user prefers to fly KLM"
        ]
