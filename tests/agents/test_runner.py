"""Runs in a conversation on both backends: state and memories saved on end/ask, never on fail."""

from __future__ import annotations

from typing import Any

import pytest

from search2o.accounts import Principal
from search2o.agents.definition import parse_definition
from search2o.runtime import Runtime
from tests.memory.conftest import add_user

pytestmark = pytest.mark.slow

TRAVEL = {
    "name": "travel",
    "description": "Remembers the airline you like",
    "functions": {
        "main": {
            "memory": {"query": "{ sys.query }", "limit": 5},
            "if": {
                "condition": "{ len(result) > 0 }",
                "then": {"end": {"output": "{ 'You like: ' + result[0]['text'] }"}},
            },
            "ask": {"question": "Which airline do you prefer?"},
            "set": {"conv.airline": "{ result }", "agent.asked": True},
            "memory.store": {
                "store": {"preferred_airline": "{ f'The user prefers to fly {conv.airline}' }"}
            },
            "end": {"output": "{ 'Noted: ' + conv.airline }"},
        }
    },
}

FAILING = {
    "name": "broken",
    "description": "Stores, sets, then fails",
    "functions": {
        "main": {
            "memory.store": {"store": {"secret": "The user's secret is 42"}},
            "set": {"conv.flag": "set by a failing run"},
            "fail": {"message": "something went wrong"},
        }
    },
}


def run(
    runtime: Runtime,
    user: Principal,
    doc: dict[str, Any],
    message: str,
    conversation: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    runner = runtime.agent_runner
    definition = parse_definition(doc, profiles=list(runtime.settings.chat.profiles))
    prepared = runner.prepare(user, definition, message, conversation, **options)
    events = list(runner.run_sync(prepared))
    assert events[0].kind == "conversation"
    last = events[-1]
    return {"kind": last.kind, **last.data, "conversation_id": events[0].data["conversation_id"]}


def test_ask_then_answer_stores_the_memory_and_a_later_conversation_finds_it(
    runtime: Runtime,
) -> None:
    me = add_user(runtime)
    first = run(runtime, me, TRAVEL, "Book me a flight")
    assert first["kind"] == "done" and first["status"] == "paused"
    assert first["text"] == "Which airline do you prefer?"
    assert runtime.memory.count(me) == 0  # the store comes after the ask
    answered = run(runtime, me, TRAVEL, "KLM", first["conversation_id"])
    assert answered["status"] == "completed" and answered["text"] == "Noted: KLM"
    assert [m.text for m in runtime.memory.list(me)] == ["The user prefers to fly KLM"]
    restored = runtime.state_store.restore(first["conversation_id"], me)
    assert restored is not None
    state, _ = restored
    assert state.conv == {"airline": "KLM"} and state.agent == {"travel": {"asked": True}}
    assert [r.status for r in state.runs] == ["completed"]
    # another conversation, months later: the memory answers without asking
    later = run(runtime, me, TRAVEL, "Which airline should I book?")
    assert later["status"] == "completed"
    assert later["text"] == "You like: The user prefers to fly KLM"


def test_a_failing_run_saves_no_state_and_no_memory(runtime: Runtime) -> None:
    me = add_user(runtime)
    ok = run(runtime, me, TRAVEL, "Book me a flight")
    before = runtime.state_store.restore(ok["conversation_id"], me)
    failed = run(runtime, me, FAILING, "go", ok["conversation_id"])
    assert failed["kind"] == "error" and failed["message"] == "something went wrong"
    assert runtime.memory.count(me) == 0
    assert runtime.state_store.restore(ok["conversation_id"], me) == before


def test_a_validation_run_traces_every_command_and_never_stores(runtime: Runtime) -> None:
    me = add_user(runtime)
    runtime.memory.store(me, "travel", {"preferred_airline": "The user prefers to fly KLM"})
    done = run(runtime, me, TRAVEL, "Which airline?", validation=True)
    assert done["status"] == "completed"
    trace = done["trace"]
    assert [t["command"] for t in trace] == ["memory", "if", "end"]
    assert trace[0]["result"][0]["text"] == "The user prefers to fly KLM"
    assert all(t["ms"] >= 0 for t in trace)
    assert [r.last_retrieved_at for r in runtime.memory.list(me)] == [None]


def test_naming_another_agent_while_one_waits_abandons_the_waiting_run(runtime: Runtime) -> None:
    me = add_user(runtime)
    first = run(runtime, me, TRAVEL, "Book me a flight")
    other = {
        "name": "echo",
        "description": "Says what it heard",
        "functions": {"main": {"end": {"output": "{ 'heard ' + sys.query }"}}},
    }
    echoed = run(runtime, me, other, "hello", first["conversation_id"])
    assert echoed["text"] == "heard hello"
    state, _ = runtime.state_store.restore(first["conversation_id"], me) or (None, 0)
    assert state is not None
    assert [(r.agent, r.status, r.output) for r in state.runs] == [
        ("travel", "failed", {"abandoned_for": "echo"}),
        ("echo", "completed", "heard hello"),
    ]


COUNTING = {
    "name": "counting",
    "description": "Counts its side effects before asking",
    "functions": {
        "main": {
            "set": {"conv.before_ask": "{ (conv.before_ask if 'before_ask' in conv else 0) + 1 }"},
            "memory.store": {"store": {"seen": "{ f'asked at run start {conv.before_ask}' }"}},
            "ask": {
                "question": "Pick a number from 1 to 3",
                "check": "{ result.strip() in ('1', '2', '3') }",
                "retry": "Only 1, 2 or 3, please.",
            },
            "end": {"output": "{ f'picked {result} after {conv.before_ask} start(s)' }"},
        }
    },
}


def test_three_asks_in_a_row_run_the_commands_before_the_ask_once(runtime: Runtime) -> None:
    me = add_user(runtime)
    first = run(runtime, me, COUNTING, "play")
    conversation = first["conversation_id"]
    assert first["status"] == "paused"
    for answer in ("seven", "banana"):
        again = run(runtime, me, COUNTING, answer, conversation)
        assert again["status"] == "paused" and again["text"] == "Only 1, 2 or 3, please."
    done = run(runtime, me, COUNTING, "2", conversation)
    assert done["text"] == "picked 2 after 1 start(s)"
    state, _ = runtime.state_store.restore(conversation, me) or (None, 0)
    assert state is not None and state.conv == {"before_ask": 1}
    assert [m.text for m in runtime.memory.list(me)] == ["asked at run start 1"]


def test_an_answer_that_fails_the_run_closes_the_waiting_question(runtime: Runtime) -> None:
    me = add_user(runtime)
    strict = {**COUNTING, "functions": {"main": dict(COUNTING["functions"]["main"])}}
    strict["functions"]["main"]["ask"] = {
        **COUNTING["functions"]["main"]["ask"],
        "max_attempts": 2,
    }
    first = run(runtime, me, strict, "play")
    conversation = first["conversation_id"]
    assert run(runtime, me, strict, "seven", conversation)["status"] == "paused"
    failed = run(runtime, me, strict, "eight", conversation)
    assert failed["kind"] == "error" and "no valid answer after 2 attempts" in failed["message"]
    state, _ = runtime.state_store.restore(conversation, me) or (None, 0)
    assert state is not None
    assert [(r.status, r.output) for r in state.runs] == [("failed", {"error": failed["message"]})]
    assert state.conv == {"before_ask": 1}  # nothing else of the failed run was saved
    fresh = run(runtime, me, strict, "again", conversation)  # a new run, not an answer
    assert fresh["status"] == "paused" and fresh["text"] == "Pick a number from 1 to 3"


def test_a_commands_temperature_builds_its_own_model_once(runtime: Runtime) -> None:
    from search2o.query.settings import ChatSettings, ModelProfile

    profile = ModelProfile(provider="openai", model="m", base_url="http://127.0.0.1:9/v1")
    chat = ChatSettings(profiles={"default": profile.model_copy(update={"temperature": 0.0})})
    settings = runtime.settings.model_copy(update={"chat": chat})
    with Runtime(settings, embedder=runtime.embedder) as other:
        runner = other.agent_runner
        plain, warm = runner.model(None), runner.model(None, 0.7)
        assert plain is runner.model(None) and warm is runner.model(None, 0.7)
        assert plain is not warm
        assert warm._profile.temperature == 0.7  # type: ignore[attr-defined]
        assert plain._profile.temperature == 0.0  # type: ignore[attr-defined]
        assert other.chat_model is plain  # the Query Engine and the agents share the models
