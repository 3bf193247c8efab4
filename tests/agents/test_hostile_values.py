"""Values no store can keep or no text can show: NUL, lone surrogates, ints beyond 4300 digits.

Each is refused where it arrives (a definition problem with its JSON path, an ``InputError``
naming the field) or fails the run with a clear error naming the function and command —
never an internal error.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from search2o.agents.definition import DefinitionError, check_inputs, parse_definition
from search2o.agents.expressions import ExpressionError, compile_expression
from search2o.errors import InputError, RunError
from search2o.runtime import Runtime
from tests.agents.test_interpreter import FakeServices, definition, interpreter
from tests.memory.conftest import add_user

BIG = "int('9' * 4300)"  # 4300 digits: as many as Python reads
TOO_BIG = f"{BIG} + {BIG}"  # 4301 digits: more than Python writes as text


def doc(**fields: Any) -> dict[str, Any]:
    return {"name": "demo", "description": "a demo", **fields}


def problems(data: Any) -> list[tuple[str, str]]:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(data, profiles=["default"])
    return [(p.path, p.reason) for p in caught.value.problems]


# --- ints too long to be written as text ------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [TOO_BIG, f"[{TOO_BIG}]", f"str({TOO_BIG})", f'f"{{{TOO_BIG}}}"', f"'%d' % ({TOO_BIG})"],
)
def test_an_int_too_long_for_text_is_an_expression_error(source: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression(source).evaluate({})
    assert "more than 4300 digits cannot be written as text" in caught.value.reason


def test_a_key_error_of_a_long_int_is_described_without_failing() -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression(f"{{}}[{TOO_BIG}]").evaluate({})
    assert caught.value.reason.startswith("KeyError")


@pytest.mark.parametrize(
    "command",
    [
        {"set": {"x": f"{{ {TOO_BIG} }}"}},
        {"end": {"output": f"{{ [{TOO_BIG}] }}"}},
        {"prompt": {"user": f"{{ {TOO_BIG} }}"}},
    ],
)
def test_a_run_fails_clearly_on_an_int_too_long_for_text(command: dict[str, Any]) -> None:
    run = interpreter({"main": command})
    with pytest.raises(RunError) as caught:
        run.start()
    assert caught.value.message.startswith("function main, command ")
    assert "4300 digits" in caught.value.message


def test_an_input_too_long_for_text_is_refused_naming_the_field() -> None:
    agent = definition(
        {"main": {"end": {"output": "{ n }"}}},
        inputs={"n": {"type": "integer"}, "tags": {"type": "array", "default": []}},
    )
    with pytest.raises(InputError) as caught:
        check_inputs(agent, {"n": 10**5000})
    assert caught.value.field == "inputs.n" and "4300 digits" in caught.value.reason
    with pytest.raises(InputError) as caught:
        check_inputs(agent, {"n": 1, "tags": [1, {"deep": 10**5000}]})
    assert caught.value.field == "inputs.tags[1].deep"


def test_a_definition_with_a_number_too_long_is_one_problem_not_a_crash() -> None:
    main = '{"end": {"output": ' + "9" * 5000 + "}}"
    text = '{"name": "demo", "description": "x", "functions": {"main": ' + main + "}}"
    assert problems(text)[0][0] == "$" and "4300 digits" in problems(text)[0][1]
    yaml = "name: demo\ndescription: x\nfunctions: {main: {end: {output: " + "9" * 5000 + "}}}"
    assert problems(yaml)[0][0] == "$"
    literal = doc(functions={"main": {"end": {"output": [10**5000]}}})
    assert problems(literal) == [
        (
            "$.functions.main.end.output[0]",
            "an integer of more than 4300 digits cannot be written as text or JSON "
            "(Python's limit on int to text conversion)",
        )
    ]


# --- an llm command with no user message -------------------------------------------------------


def test_an_llm_with_no_user_message_asks_the_users_message() -> None:
    services = FakeServices("an answer")
    run = interpreter({"main": {"llm": {}, "llm.again": {}, "end": {"output": "{ result }"}}})
    run.services = services
    assert run.start() == "an answer"
    first, second = (messages for _, messages in services.calls)
    assert [(m.role, m.content) for m in first] == [("user", "Which airline?")]
    # the exchange joined the history: the second call asks again, after the first answer
    assert [(m.role, m.content) for m in second] == [
        ("user", "Which airline?"),
        ("assistant", "an answer"),
        ("user", "Which airline?"),
    ]
    (change,) = run.effects.state.prompts
    assert [entry["role"] for entry in change.append] == ["user", "assistant"] * 2


@pytest.mark.slow
def test_an_llm_with_no_user_message_runs_with_the_builtin_model(runtime: Runtime) -> None:
    from tests.agents.test_runner import run

    agent = doc(functions={"main": {"llm": {}, "end": {"output": "{ result }"}}})
    done = run(runtime, add_user(runtime), agent, "What is the travel policy?")
    assert done["kind"] == "done" and done["status"] == "completed", done


# --- NUL and lone surrogates ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"])
def test_text_that_cannot_be_stored_is_refused_in_a_definition_with_its_path(bad: str) -> None:
    found = problems(
        doc(
            prompts={"main": {"system": bad}},
            functions={"main": {"set": {"x": ["ok", bad]}, "end": {"output": {bad: 1}}}},
        )
    )
    paths = [path for path, _ in found]
    escaped = json.dumps(bad)
    assert paths == [
        "$.prompts.main.system",
        "$.functions.main.set.x[1]",
        f"$.functions.main.end.output[{escaped}]",
    ]
    assert all("NUL" in reason or "lone surrogate" in reason for _, reason in found)
    assert problems(doc(name=f"de{bad}mo", functions={"main": {"end": {}}}))[0][0] == "$.name"
    json.dumps(found, ensure_ascii=False).encode()  # the problems themselves can be sent


def test_bad_text_definitions_store_nothing_on_either_backend(runtime: Runtime) -> None:
    admin = runtime.local_principal()
    for bad in ("a\x00b", "a\ud800b"):
        with pytest.raises(DefinitionError) as caught:
            runtime.agents.put(doc(description=bad, functions={"main": {"end": {}}}), admin=admin)
        assert [p.path for p in caught.value.problems] == ["$.description"]
    assert runtime.agents.list() == []


@pytest.mark.parametrize(
    ("message", "inputs", "field"),
    [
        ("a\x00b", None, "message"),
        ("a\ud800b", None, "message"),
        ("go", {"city": "Os\x00lo"}, "inputs.city"),
        ("go", {"city": "Os\udfffo"}, "inputs.city"),
        ("go", {"tags": ["ok", "x\x00"]}, "inputs.tags[1]"),
        ("go", {"tags": [{"k\ud800": 1}]}, 'inputs.tags[0]["k\\ud800"]'),
        ("go", {"ci\x00ty": "Oslo"}, 'inputs["ci\\u0000ty"]'),
        ("go", {"c\ud800": "Oslo"}, 'inputs["c\\ud800"]'),
    ],
)
def test_a_run_request_with_text_that_cannot_be_stored_names_the_field(
    runtime: Runtime, message: str, inputs: dict[str, Any] | None, field: str
) -> None:
    agent = definition(
        {"main": {"end": {"output": "{ city }"}}},
        inputs={"city": {"type": "string", "default": "Rome"}, "tags": {"type": "array"}},
    )
    with pytest.raises(InputError) as caught:
        runtime.agent_runner.prepare(add_user(runtime), agent, message, None, inputs)
    assert caught.value.field == field
    assert "NUL" in caught.value.reason or "lone surrogate" in caught.value.reason
    json.dumps({"field": caught.value.field}, ensure_ascii=False).encode()


@pytest.mark.parametrize(
    ("schema", "answer", "named"),
    [
        (None, "KLM\ud800", "answer is not valid Unicode"),
        (None, "K\x00LM", "answer must not contain NUL"),
        ({"type": "object"}, '{"name": "\\ud800"}', "answer.name is not valid Unicode"),
    ],
)
def test_a_model_answer_that_cannot_be_stored_fails_the_run(
    schema: dict[str, Any] | None, answer: str, named: str
) -> None:
    llm: dict[str, Any] = {} if schema is None else {"schema": schema}
    run = interpreter({"main": {"llm": llm, "end": {"output": "{ result }"}}}, FakeServices(answer))
    with pytest.raises(RunError) as caught:
        run.start()
    assert caught.value.message.startswith("function main, command llm: the model's ")
    assert named in caught.value.message


@pytest.mark.slow
def test_through_the_api_bad_text_is_a_422_on_either_backend(
    token_runtime: Runtime, token_api: Any
) -> None:
    from tests.agents.registry_samples import add_user as add_account

    root = add_account(token_runtime, "root@example.com", admin=True)[1]
    admin = {"Authorization": f"Bearer {root}"}
    user = {"Authorization": f"Bearer {add_account(token_runtime, 'ann@example.com')[1]}"}
    raw = '{"name": "demo", "description": "x\\u0000", "functions": {"main": {"end": {}}}}'
    refused = token_api.put(
        "/v1/agents/demo", content=raw, headers={**admin, "content-type": "application/json"}
    )
    assert refused.status_code == 422
    assert [p["path"] for p in refused.json()["detail"]["problems"]] == ["$.description"]
    assert token_api.get("/v1/agents", headers=user).json()["agents"] == []
    good = doc(functions={"main": {"end": {"output": "{ sys.query }"}}})
    assert token_api.put("/v1/agents/demo", json=good, headers=admin).status_code == 201
    for body, field in (
        ('{"message": "a\\ud800", "agent": "demo", "stream": false}', "message"),
        ('{"message": "a\\u0000", "agent": "demo", "stream": false}', "message"),
        (
            '{"message": "go", "agent": "demo", "stream": false, "inputs": {"\\udc00": 1}}',
            'inputs["\\udc00"]',
        ),
    ):
        answer = token_api.post(
            "/v1/chat", content=body, headers={**user, "content-type": "application/json"}
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["detail"]["field"] == field
