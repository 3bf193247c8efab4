"""Agent runs end to end: ``POST /v1/chat`` with ``agent``, the validate endpoint, the CLI."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from search2o.runtime import Runtime
from tests.agents.registry_samples import add_user
from tests.agents.test_runner import TRAVEL
from tests.agents.test_sandbox_costs import nested_list, nested_tuple
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
    kinds = [line[7:] for line in streamed.text.splitlines() if line.startswith("event: ")]
    assert kinds == ["conversation", "step", "step", "step", "delta", "done"]  # memory, if, end

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


def test_run_and_validate_from_the_cli(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "travel.json"
    path.write_text(json.dumps(TRAVEL), encoding="utf-8")
    cli.ok("agents", "push", str(path))
    asked = json.loads(cli.ok("agents", "run", "travel", "Book me a flight", "--json").stdout)
    assert asked["status"] == "paused"
    done = out(cli.ok("agents", "run", "travel", "KLM", "--conversation", asked["conversation_id"]))
    assert done.strip() == "Noted: KLM"
    traced = out(cli.ok("agents", "validate", str(path), "Which airline?"))
    assert "memory" in traced and "You like: The user prefers to fly KLM" in traced


ESCAPES = {
    "open_file": "open('/etc/passwd')",
    "huge_int": "10**10**10",
    "huge_text": "'x'*10**10",
    "nested_loops": "[1 for a in range(10**4) for b in range(10**4)]",
    # one C call over 10**10 shared nodes, or a set of ints that all hash alike
    "deep_compare": f"{nested_list(10)} == {nested_list(10)}",
    "deep_hash": f"{{{nested_tuple(10)}}}",
    "deep_sort": f"sorted([{nested_tuple(10)}, {nested_tuple(10)}])",
    "hash_flood": "len(set([k * 2305843009213693951 for k in range(40000)]))",
}
# While the attacks run, the server answers other requests at once (the slowest of 20 health
# checks, generously bounded for a shared machine; one attack used to hold it for minutes).
HEALTH_SECONDS = 10.0


def test_sandbox_escapes_fail_clearly_while_the_server_keeps_serving(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    admin = _auth(add_user(token_runtime, "root@example.com", admin=True)[1])
    user = _auth(add_user(token_runtime, "ann@example.com")[1])
    for expression in ("__import__('os')", "().__class__.__bases__[0].__subclasses__()"):
        doc = {
            "name": "bad",
            "description": "x",
            "functions": {"main": {"set": {"x": f"{{ {expression} }}"}}},
        }
        refused = token_api.put("/v1/agents/bad", json=doc, headers=admin)
        assert refused.status_code == 422
        assert refused.json()["detail"]["problems"][0]["path"] == "$.functions.main.set.x"
    for name, expression in ESCAPES.items():
        doc = {
            "name": name,
            "description": "x",
            "functions": {"main": {"set": {"x": f"{{ {expression} }}"}}},
        }
        assert token_api.put(f"/v1/agents/{name}", json=doc, headers=admin).status_code == 201
    recursive = {
        "name": "recursive",
        "description": "x",
        "functions": {
            "main": {"call": {"function": "again"}},
            "again": {"call": {"function": "again"}},
        },
    }
    assert token_api.put("/v1/agents/recursive", json=recursive, headers=admin).status_code == 201

    def attack(name: str) -> httpx.Response:
        return token_api.post(
            "/v1/chat", json={"message": "go", "agent": name, "stream": False}, headers=user
        )

    def health() -> float:
        start = time.perf_counter()
        assert token_api.get("/v1/health").status_code == 200
        return time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=16) as pool:
        attacks = {name: pool.submit(attack, name) for name in [*ESCAPES, "recursive"]}
        checks = [pool.submit(health) for _ in range(20)]
        assert max(f.result() for f in checks) < HEALTH_SECONDS
        reasons = {name: f.result() for name, f in attacks.items()}
    for name, response in reasons.items():
        assert response.status_code == 422, (name, response.text)
        message = response.json()["detail"]["message"]
        assert "function main" in message or "call depth" in message, message
    assert "name 'open' is not defined" in reasons["open_file"].json()["detail"]["message"]
    assert "call depth exceeds 32" in reasons["recursive"].json()["detail"]["message"]
    for name in ("deep_compare", "deep_hash", "deep_sort"):
        assert "too many steps" in reasons[name].json()["detail"]["message"]
    assert "hash flooding" in reasons["hash_flood"].json()["detail"]["message"]


def test_inputs_are_checked_and_reach_the_run(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    admin = _auth(add_user(token_runtime, "root@example.com", admin=True)[1])
    user = _auth(add_user(token_runtime, "ann@example.com")[1])
    doc = {
        "name": "greeter",
        "description": "greets a city",
        "inputs": {
            "city": {"type": "string", "required": True},
            "times": {"type": "integer", "default": 1},
        },
        "functions": {"main": {"end": {"output": "{ ' '.join([f'Hello {city}'] * times) }"}}},
    }
    assert token_api.put("/v1/agents/greeter", json=doc, headers=admin).status_code == 201

    def chat(**body: object) -> httpx.Response:
        body = {"message": "hi", "agent": "greeter", "stream": False, **body}
        return token_api.post("/v1/chat", json=body, headers=user)

    missing = chat()
    assert missing.status_code == 422 and missing.json()["detail"]["field"] == "inputs.city"
    wrong = chat(inputs={"city": "Oslo", "times": "2"})
    assert wrong.status_code == 422 and wrong.json()["detail"]["field"] == "inputs.times"
    unknown = chat(inputs={"city": "Oslo", "weather": "rain"})
    assert unknown.status_code == 422 and unknown.json()["detail"]["field"] == "inputs.weather"
    assert chat(inputs={"city": "Oslo", "times": 2}).json()["text"] == "Hello Oslo Hello Oslo"
    assert chat(inputs={"city": "Oslo"}).json()["text"] == "Hello Oslo"


def test_brackets_in_answers_stay_and_a_deleted_agents_question_lets_the_chat_go_on(
    token_runtime: Runtime, token_api: httpx.Client
) -> None:
    admin = _auth(add_user(token_runtime, "root@example.com", admin=True)[1])
    user = _auth(add_user(token_runtime, "ann@example.com")[1])
    outputs = {
        "listing": "{ {'scores': [1, 2], 'top': [3]} }",
        "options": "Choose option [2] or [3]",
        "asker": None,
    }
    for name, output in outputs.items():
        main: dict[str, object] = {"end": {"output": output}}
        if output is None:
            main = {"ask": {"question": "Which one?"}, "end": {"output": "{ result }"}}
        doc = {"name": name, "description": "x", "functions": {"main": main}}
        assert token_api.put(f"/v1/agents/{name}", json=doc, headers=admin).status_code == 201

    def chat(**body: object) -> dict[str, object]:
        response = token_api.post("/v1/chat", json={"stream": False, **body}, headers=user)
        assert response.status_code == 200, response.text
        return dict(response.json())

    listing = chat(message="go", agent="listing")
    assert json.loads(str(listing["text"])) == {"scores": [1, 2], "top": [3]}
    assert chat(message="go", agent="options")["text"] == "Choose option [2] or [3]"
    asked = chat(message="go", agent="asker")
    assert asked["status"] == "paused"
    assert token_api.delete("/v1/agents/asker", headers=admin).status_code == 200
    after = chat(message="hello", conversation_id=asked["conversation_id"])
    assert "status" not in after and after["text"]  # a chat turn answered it


def test_the_cli_prints_an_answer_exactly(cli: Cli, tmp_path: Path) -> None:
    long_json = "{ {'text': 'word ' * 40, 'n': list(range(40))} }"
    for name, output in (("longjson", long_json), ("emoji", "Meet at :thumbs_up: ok")):
        doc = {"name": name, "description": "x", "functions": {"main": {"end": {"output": output}}}}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        cli.ok("agents", "push", str(path))
    printed = cli.ok("agents", "run", "longjson", "go").stdout
    assert json.loads(printed) == {"text": "word " * 40, "n": list(range(40))}  # not wrapped
    assert cli.ok("agents", "run", "emoji", "go").stdout.strip() == "Meet at :thumbs_up: ok"
