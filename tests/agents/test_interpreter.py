"""The interpreter: commands in order, ask/resume without re-running, call, return, end, fail."""

from __future__ import annotations

import re
from typing import Any

import pytest

from search2o.agents.definition import DefinitionError, parse_definition
from search2o.agents.interpreter import Interpreter
from search2o.agents.run_types import MAX_CALL_DEPTH, Paused, RunContext, RunEffects, RunLimits
from search2o.errors import RunError
from search2o.memory.changes import MemoryChanges
from search2o.providers.chat import ChatMessage
from search2o.state.model import ConversationState


class FakeServices:
    """Records calls; answers the model with a fixed text."""

    def __init__(self, answer: str = "KLM it is") -> None:
        self.answer = answer
        self.calls: list[tuple[str, Any]] = []
        self.temperatures: list[float | None] = []

    def llm(
        self, profile: str | None, messages: list[ChatMessage], temperature: float | None = None
    ) -> str:
        self.calls.append(("llm", messages))
        self.temperatures.append(temperature)
        return self.answer

    def search(self, query: str, limit: int | None) -> list[dict[str, Any]]:
        self.calls.append(("search", query))
        return [{"title": "Handbook", "text": f"about {query}", "document_id": 7, "chunk_id": 1}]

    def memory_search(
        self, query: str, agent: str | None, label: str | None, limit: int, changes: MemoryChanges
    ) -> list[dict[str, Any]]:
        self.calls.append(("memory", query))
        return [{"agentName": "travel", "label": "airline", "text": "KLM", "createdAt": "x"}]


def definition(functions: dict[str, Any], **extra: Any) -> Any:
    doc = {"name": "demo", "description": "a demo", "functions": functions, **extra}
    return parse_definition(doc, profiles=["default"])


def interpreter(functions: dict[str, Any], services: FakeServices | None = None) -> Interpreter:
    context = RunContext(
        definition=definition(functions),
        state=ConversationState(),
        query="Which airline?",
        user_email="ann@example.com",
        conversation_id="c" * 32,
        inputs={},
        now="2026-11-30T00:00:00+00:00",
    )
    return Interpreter(context, services or FakeServices(), RunEffects(), trace=True)


def test_commands_run_in_order_and_end_with_the_output() -> None:
    services = FakeServices()
    run = interpreter(
        {
            "main": {
                "memory": {"query": "{ sys.query }", "limit": 5},
                "prompt": {
                    "user": "{ f'I remember {[m[\"text\"] for m in result]}. Q: {sys.query}' }"
                },
                "llm": {},
                "memory.store": {"store": {"airline": "{ f'The user prefers {result}' }"}},
                "end": {"output": "{ 'Answer: ' + (agent.x if 'x' in agent else 'none') }"},
            }
        },
        services,
    )
    assert run.start() == "Answer: none"
    assert [c[0] for c in services.calls] == ["memory", "llm"]
    messages = services.calls[1][1]
    assert (messages[-1].role, messages[-1].content) == (
        "user",
        "I remember ['KLM']. Q: Which airline?",
    )
    assert run.effects.memory.pending == {("demo", "airline"): "The user prefers KLM it is"}
    assert [e.command for e in run.effects.trace] == [
        "memory",
        "prompt",
        "llm",
        "memory.store",
        "end",
    ]


def test_set_if_call_and_return() -> None:
    run = interpreter(
        {
            "main": {
                "set": {"conv.topic": "travel", "agent.count": 1, "n": 3},
                "if": {
                    "condition": "{ conv.topic == 'travel' and n > 2 }",
                    "then": {"call": {"function": "double", "args": {"x": "{ n }"}}},
                    "else": {"fail": {"message": "wrong branch"}},
                },
                "return": {"value": "{ result }"},
            },
            "double": {"return": {"value": "{ x * 2 }"}},
        }
    )
    assert run.start() == 6
    assert run.effects.state.conv_set == {"topic": "travel"}
    assert run.effects.state.agent_set == {"demo": {"count": 1}}


def test_fail_and_expression_errors_name_the_function_and_command() -> None:
    with pytest.raises(RunError, match=r"^nope$"):
        interpreter({"main": {"fail": {"message": "nope"}}}).start()
    with pytest.raises(RunError, match=r"function main, command set: expression \{ 1 / 0 \}"):
        interpreter({"main": {"set": {"x": "{ 1 / 0 }"}}}).start()


def test_deep_recursion_through_call_fails_cleanly() -> None:
    run = interpreter(
        {"main": {"call": {"function": "loop"}}, "loop": {"call": {"function": "loop"}}}
    )
    with pytest.raises(RunError, match=f"call depth exceeds {MAX_CALL_DEPTH}"):
        run.start()


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "().__class__.__bases__[0].__subclasses__()",
        "open('/etc/passwd')",
        "10**10**10",
        "'x'*10**10",
    ],
)
def test_sandbox_escapes_fail_the_run_with_a_clear_error(expression: str) -> None:
    functions = {"main": {"set": {"x": "{ " + expression + " }"}}}
    try:
        run = interpreter(functions)
    except Exception as exc:  # refused when the definition is checked
        assert "$.functions.main.set.x" in str(exc)
        return
    with pytest.raises(RunError, match="function main, command set"):
        run.start()


def test_three_asks_run_the_commands_before_the_first_ask_once() -> None:
    services = FakeServices()
    functions = {
        "main": {
            "search": {"query": "setup"},
            "ask": {
                "question": "Which laptop do you use?",
                "check": "{ result.lower() in ('mac', 'windows', 'linux') }",
                "retry": "Please answer mac, windows or linux.",
            },
            "set": {"conv.os": "{ result.lower() }"},
            "end": {"output": "{ 'Noted: ' + conv.os }"},
        }
    }
    run = interpreter(functions, services)
    with pytest.raises(Paused) as first:
        run.start()
    assert first.value.question == "Which laptop do you use?"
    paused = first.value
    for answer in ("a toaster", "my phone"):
        with pytest.raises(Paused) as again:
            interpreter(functions, services).resume(paused.frames, answer, paused.attempts)
        assert again.value.question == "Please answer mac, windows or linux."
        paused = again.value
    done = interpreter(functions, services)
    assert done.resume(paused.frames, "Linux", paused.attempts) == "Noted: linux"
    assert [c for c in services.calls if c[0] == "search"] == [("search", "setup")]  # once


def test_an_ask_inside_a_called_function_resumes_there() -> None:
    functions = {
        "main": {
            "set": {"before": 1},
            "call": {"function": "ask_city"},
            "end": {"output": "{ f'{before}:{result}' }"},
        },
        "ask_city": {
            "ask": {"question": "Which city?"},
            "return": {"value": "{ result.upper() }"},
        },
    }
    with pytest.raises(Paused) as paused:
        interpreter(functions).start()
    assert [f["function"] for f in paused.value.frames] == ["main", "ask_city"]
    resumed = interpreter(functions)
    assert resumed.resume(paused.value.frames, "Paris", 1) == "1:PARIS"


def test_too_many_invalid_answers_fail() -> None:
    functions = {
        "main": {
            "ask": {
                "question": "yes or no?",
                "check": "{ result in ('yes', 'no') }",
                "max_attempts": 2,
            }
        }
    }
    with pytest.raises(Paused) as paused:
        interpreter(functions).start()
    with pytest.raises(Paused) as second:
        interpreter(functions).resume(paused.value.frames, "maybe", 1)
    with pytest.raises(RunError, match="no valid answer after 2 attempts"):
        interpreter(functions).resume(second.value.frames, "perhaps", second.value.attempts)


def test_search_hits_are_numbered_and_handed_to_the_model_as_passages() -> None:
    services = FakeServices("Setup takes a day [1].")
    run = interpreter(
        {
            "main": {
                "search": {"query": "laptop setup"},
                "prompt": {"user": "{ sys.query }"},
                "llm": {"passages": "{ result }"},
                "end": {"output": "{ result }"},
            }
        },
        services,
    )
    assert run.start() == "Setup takes a day [1]."
    messages = services.calls[-1][1]
    assert [m.role for m in messages] == ["user"]  # the sources travel with the question
    assert messages[-1].content == "Which airline?"
    assert messages[-1].passages[0].number == 1 and messages[-1].passages[0].text == (
        "about laptop setup"
    )
    assert run.citations.get(1) is not None and run.citations.get(1).document_id == 7


SCHEMA = {
    "type": "object",
    "properties": {"airline": {"type": "string"}, "seats": {"type": "integer"}},
    "required": ["airline"],
}


def test_a_schema_parses_and_checks_the_models_json() -> None:
    functions = {
        "main": {
            "prompt": {"user": "Which airline?"},
            "llm": {"schema": SCHEMA, "temperature": 0.2},
            "end": {"output": "{ result['airline'] }"},
        }
    }
    services = FakeServices('```json\n{"airline": "KLM", "seats": 2}\n```')
    assert interpreter(functions, services).start() == "KLM"
    assert "Answer with JSON only" in services.calls[-1][1][-1].content
    assert services.temperatures == [0.2]  # the command's temperature reaches the model
    with pytest.raises(RunError, match="does not match the schema at seats: 'two' is not of type"):
        interpreter(functions, FakeServices('{"airline": "KLM", "seats": "two"}')).start()
    with pytest.raises(RunError, match="is not the JSON the schema asks for"):
        interpreter(functions, FakeServices("KLM, I think")).start()


def test_an_invalid_schema_is_refused_at_upload() -> None:
    with pytest.raises(DefinitionError, match=r"\$\.functions\.main\.llm\.schema: is not a valid"):
        definition({"main": {"llm": {"schema": {"type": "nonsense"}}}})


def _with_limits(functions: dict[str, Any], **limits: Any) -> Interpreter:
    run = interpreter(functions)
    run.context.run_limits = RunLimits(**limits)
    return run


def test_a_fan_out_of_calls_runs_out_of_its_command_budget() -> None:
    functions: dict[str, Any] = {"main": {"call": {"function": "f0"}}}
    for level in range(30):
        callee = f"f{level + 1}" if level < 29 else None
        functions[f"f{level}"] = (
            {"call.a": {"function": callee}, "call.b": {"function": callee}}
            if callee
            else {"set": {"x": 1}}
        )
    with pytest.raises(RunError, match="executed more than 500 commands"):
        _with_limits(functions, max_commands=500).start()
    with pytest.raises(RunError, match="took longer than 0 s"):
        _with_limits({"main": {"set": {"x": 1}}}, max_seconds=0.0).start()


def test_a_stopped_run_stops_before_its_next_command() -> None:
    run = interpreter({"main": {"set": {"x": 1}, "end": {"output": "never"}}})
    run.context.cancelled.set()
    with pytest.raises(RunError, match="the run was stopped"):
        run.start()


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ({"end": {"output": "{ sys }"}}, "output: is not JSON-serialisable: Namespace"),
        ({"end": {"output": "{ float('inf') }"}}, "output: is not JSON-serialisable"),
        ({"return": {"value": "{ {1, 2} }"}}, "value: is not JSON-serialisable: set"),
        ({"set": {"conv.x": "{ b'abc' }"}}, "conv.x: is not JSON-serialisable: bytes"),
        (
            {"set": {"x": ["{ 'x' * 60 }", "{ 'y' * 60 }"]}},
            "x: is 128 characters as JSON; at most 100",
        ),
        ({"memory": {"store": {"fact": "{ 42 }"}}}, "store.fact: must be a string, got int"),
    ],
)
def test_values_must_be_plain_json_of_bounded_size(command: dict[str, Any], message: str) -> None:
    with pytest.raises(RunError, match=re.escape(message)) as caught:
        _with_limits({"main": command}, max_value_chars=100).start()
    assert str(caught.value).startswith("function main, command ")
