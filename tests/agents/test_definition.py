"""Agent definitions: parsing JSON and YAML, every rule with its JSON path, run inputs."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from search2o.agents.definition import (
    AgentDefinition,
    Command,
    DefinitionError,
    DefinitionProblem,
    InputSpec,
    PromptSpec,
    check_inputs,
    parse_definition,
)
from search2o.errors import InputError

PROFILES = ("default", "fast")

TRAVEL: dict[str, Any] = {
    "name": "travel",
    "description": "Remembers the airline you like and plans trips with it",
    "inputs": {
        "city": {
            "type": "string",
            "description": "Where to go",
            "required": False,
            "default": "Paris",
        },
        "nights": {"type": "integer", "description": "How many nights", "default": 3},
        "traveller": {"type": "string", "description": "Who travels"},
    },
    "prompts": {
        "main": {"system": "You are a friendly travel assistant.", "scope": "conversation"},
        "planner": {"system": "{ 'You plan trips to ' + city }", "scope": "agent"},
    },
    "functions": {
        "main": {
            "memory.recall": {"query": "preferred airline", "label": "airline", "limit": 3},
            "set": {"conv.city": "{ city }", "agent.visits": 1, "known": "{ result }"},
            "if.unknown": {
                "condition": "{ not known }",
                "then": {
                    "ask": {
                        "question": "Which airline do you prefer?",
                        "check": "{ result != '' }",
                        "retry": "Please name one airline.",
                        "max_attempts": 3,
                    },
                    "memory.store": {
                        "store": {"airline": "{ result }"},
                        "delete": ["old_airline"],
                    },
                },
                "else": {"set": {"airline": "{ known }"}},
            },
            "call": {
                "function": "plan",
                "args": {"destination": "{ city }", "nights": "{ nights }"},
            },
            "end": {"output": {"plan": "{ result }", "city": "{ city }"}},
        },
        "plan": {
            "search": {"query": "{ 'hotels in ' + destination }", "limit": 5},
            "prompt": {"name": "planner", "user": "{ 'Plan the trip to ' + destination }"},
            "llm": {
                "profile": "fast",
                "prompt": "planner",
                "temperature": 0.3,
                "schema": {"type": "object", "properties": {"days": {"type": "array"}}},
            },
            "if": {
                "condition": "{ result is None }",
                "then": {"fail": {"message": "no plan came back"}},
            },
            "return": {"value": "{ result }"},
        },
    },
}

TRAVEL_YAML = """\
name: travel
description: Remembers the airline you like and plans trips with it
inputs:
  city: {type: string, description: Where to go, required: false, default: Paris}
  nights: {type: integer, description: How many nights, default: 3}
  traveller: {type: string, description: Who travels}
prompts:
  main: {system: You are a friendly travel assistant., scope: conversation}
  planner:
    system: "{ 'You plan trips to ' + city }"
    scope: agent
functions:
  main:
    memory.recall: {query: preferred airline, label: airline, limit: 3}
    set:
      conv.city: "{ city }"
      agent.visits: 1
      known: "{ result }"
    if.unknown:
      condition: "{ not known }"
      then:
        ask:
          question: Which airline do you prefer?
          check: "{ result != '' }"
          retry: Please name one airline.
          max_attempts: 3
        memory.store:
          store: {airline: "{ result }"}
          delete: [old_airline]
      else:
        set: {airline: "{ known }"}
    call:
      function: plan
      args: {destination: "{ city }", nights: "{ nights }"}
    end:
      output: {plan: "{ result }", city: "{ city }"}
  plan:
    search: {query: "{ 'hotels in ' + destination }", limit: 5}
    prompt: {name: planner, user: "{ 'Plan the trip to ' + destination }"}
    llm:
      profile: fast
      prompt: planner
      temperature: 0.3
      schema: {type: object, properties: {days: {type: array}}}
    if:
      condition: "{ result is None }"
      then:
        fail: {message: no plan came back}
    return: {value: "{ result }"}
"""

HELPDESK: dict[str, Any] = {
    "name": "helpdesk-triage",
    "description": "Asks one clarifying question, then searches the knowledge base",
    "inputs": {"product": {"type": "string", "description": "What the ticket is about"}},
    "functions": {
        "main": {
            "ask.detail": {
                "question": "{ 'What exactly fails in ' + product + '?' }",
                "check": "{ result != '' }",
            },
            "search": {"query": "{ product + ' ' + result }", "limit": "{ 3 + 2 }"},
            "prompt": {"user": "{ 'Answer from the hits about ' + product }"},
            "llm": {"temperature": 0},
            "return": {"value": "{ result }"},
        }
    },
}


def travel() -> dict[str, Any]:
    return copy.deepcopy(TRAVEL)


def parse(data: Any, **kwargs: Any) -> AgentDefinition:
    return parse_definition(data, profiles=PROFILES, **kwargs)


def problems(data: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(DefinitionError) as info:
        parse(data, **kwargs)
    return [str(problem) for problem in info.value.problems]


# --- valid definitions ------------------------------------------------------------------------


def test_travel_definition_parses_every_kind() -> None:
    definition = parse(json.dumps(TRAVEL))
    assert definition.name == "travel"
    assert definition.description.startswith("Remembers")
    assert list(definition.inputs) == ["city", "nights", "traveller"]
    assert definition.inputs["city"] == InputSpec("city", "string", "Where to go", False, "Paris")
    assert definition.inputs["nights"].required is False
    assert definition.inputs["traveller"].required is True
    assert definition.prompts["planner"] == PromptSpec(
        "planner", "{ 'You plan trips to ' + city }", "agent"
    )
    assert definition.default_prompt == "main"
    assert list(definition.functions) == ["main", "plan"]
    main = definition.functions["main"]
    assert [c.key for c in main] == ["memory.recall", "set", "if.unknown", "call", "end"]
    assert [c.kind for c in main] == ["memory", "set", "if", "call", "end"]
    assert main[0].path == '$.functions.main["memory.recall"]'
    assert main[1].fields == {"conv.city": "{ city }", "agent.visits": 1, "known": "{ result }"}
    then = main[2].fields["then"]
    assert all(isinstance(c, Command) for c in then)
    assert [c.path for c in then] == [
        '$.functions.main["if.unknown"].then.ask',
        '$.functions.main["if.unknown"].then["memory.store"]',
    ]
    assert main[2].fields["else"][0].fields == {"airline": "{ known }"}
    assert [c.kind for c in definition.functions["plan"]] == [
        "search",
        "prompt",
        "llm",
        "if",
        "return",
    ]
    assert definition.memory_labels == ("airline", "old_airline")
    assert definition.to_json() == TRAVEL
    assert definition.source == TRAVEL


def test_yaml_version_equals_json_version() -> None:
    from_json = parse(json.dumps(TRAVEL))
    assert parse(TRAVEL_YAML) == from_json
    assert parse(TRAVEL_YAML, fmt="yaml") == from_json
    assert parse(TRAVEL_YAML.encode(), fmt="yaml") == from_json
    assert parse(TRAVEL) == from_json
    assert parse(json.dumps(TRAVEL).encode("utf-8")) == from_json


def test_helpdesk_without_prompts_gets_implicit_main_prompt() -> None:
    definition = parse(HELPDESK)
    assert dict(definition.prompts) == {"main": PromptSpec("main", "", "conversation")}
    assert definition.default_prompt == "main"
    assert definition.inputs["product"].required is True
    assert definition.memory_labels == ()
    ask = definition.functions["main"][0]
    assert ask.key == "ask.detail"
    assert ask.get("max_attempts") == 5
    assert ask.get("retry") is None
    assert definition.to_json() == HELPDESK


def test_command_get_defaults_and_immutability() -> None:
    definition = parse(TRAVEL)
    recall = definition.functions["main"][0]
    assert recall.get("limit") == 3
    store = definition.functions["main"][2].fields["then"][1]
    assert store.get("limit") == 10
    assert store.get("query") is None
    with pytest.raises(KeyError):
        store.get("nonsense")
    with pytest.raises(TypeError):
        store.fields["limit"] = 4  # type: ignore[index]


def test_to_json_is_a_copy() -> None:
    definition = parse(TRAVEL)
    copied = definition.to_json()
    copied["name"] = "changed"
    assert definition.to_json()["name"] == "travel"


def test_recursion_and_commands_after_return_are_allowed() -> None:
    doc = travel()
    doc["functions"]["plan"]["call"] = {"function": "plan"}
    doc["functions"]["plan"]["end"] = {}
    doc["functions"]["main"]["fail.late"] = {"message": "unreachable"}
    parse(doc)


# --- each rule, its path and its reason -------------------------------------------------------

MAIN = "$.functions.main"
PLAN = "$.functions.plan"
IF_THEN = f'{MAIN}["if.unknown"].then'

Mutation = Callable[[dict[str, Any]], None]


def _set(path: list[str], value: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _delete(path: list[str]) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


def _rename_main(doc: dict[str, Any]) -> None:
    doc["functions"]["start"] = doc["functions"].pop("main")


F = ["functions"]
CASES: list[tuple[Mutation, str]] = [
    (
        _set(["version"], 2),
        "$.version: unknown field 'version' in a definition; fields are: name, description, "
        "inputs, prompts, functions",
    ),
    (_delete(["name"]), "$.name: is required"),
    (_set(["name"], 7), "$.name: must be a string, got int"),
    (_set(["description"], "  "), "$.description: must not be empty: say what the agent does"),
    (_set(["description"], "x" * 2001), "$.description: is 2001 characters; at most 2000"),
    (_delete(["description"]), "$.description: is required"),
    (
        _set(["inputs", "city", "format"], "city"),
        "$.inputs.city.format: unknown field 'format' of an input; fields are: type, "
        "description, required, default",
    ),
    (
        _set(["inputs", "city", "type"], "text"),
        "$.inputs.city.type: must be one of string, number, integer, boolean, object, array, "
        "got 'text'",
    ),
    (
        _set(["inputs", "city", "type"], ["string"]),
        "$.inputs.city.type: must be one of string, number, integer, boolean, object, array, "
        "got ['string']",
    ),
    (
        _delete(["inputs", "city", "type"]),
        "$.inputs.city.type: is required: one of string, number, integer, boolean, object, array",
    ),
    (
        _set(["inputs", "nights", "default"], "3"),
        "$.inputs.nights.default: must be an integer, got str",
    ),
    (
        _set(["inputs", "nights", "default"], True),
        "$.inputs.nights.default: must be an integer, got bool",
    ),
    (
        _set(["inputs", "city", "required"], True),
        "$.inputs.city.required: cannot be true with a default (the default would never be used)",
    ),
    (
        _set(["inputs", "city", "required"], "no"),
        "$.inputs.city.required: must be a boolean, got str",
    ),
    (
        _set(["inputs", "_secret"], {"type": "string"}),
        "$.inputs._secret: '_secret' is not an input name: use a Python identifier that does "
        "not start with '_'",
    ),
    (_set(["inputs"], []), "$.inputs: must be an object of input name -> spec, got list"),
    (
        _set(["prompts", "main", "scope"], "global"),
        "$.prompts.main.scope: must be one of conversation, agent, got 'global'",
    ),
    (
        _set(["prompts", "main", "model"], "gpt"),
        "$.prompts.main.model: unknown field 'model' of a prompt; fields are: system, scope",
    ),
    (_set(["prompts", "main", "system"], 3), "$.prompts.main.system: must be a string, got int"),
    (
        _set(["prompts", "bad name"], {"system": "x"}),
        "$.prompts[\"bad name\"]: 'bad name' is not a prompt name (letters, digits, '_', '.', "
        "'-', starting with a letter, digit or '_'; at most 64 characters)",
    ),
    (
        _delete(["functions"]),
        "$.functions: is required: an object of function name -> block, with 'main'",
    ),
    (_set([*F, "plan"], {}), f"{PLAN}: must hold at least one command"),
    (
        _set([*F, "plan"], [{"end": {}}]),
        f"{PLAN}: must be an object whose keys are commands, in order (e.g. "
        '{"ask": {...}, "return": {...}}), got list',
    ),
    (
        _set([*F, "main", "jump"], {}),
        f"{MAIN}.jump: unknown command 'jump'; commands are: prompt, llm, search, memory, set, "
        "if, call, ask, return, end, fail",
    ),
    (
        _set([*F, "main", "memory.a.b"], {"query": "x"}),
        f"{MAIN}[\"memory.a.b\"]: 'memory.a.b' is not a command key: a command kind optionally "
        "followed by '.' and a name of letters, digits or '_' (e.g. 'memory.store')",
    ),
    (_set([*F, "main", "end"], "done"), f"{MAIN}.end: must be an object of fields, got str"),
    (
        _set([*F, "plan", "llm", "model"], "gpt"),
        f"{PLAN}.llm.model: unknown field 'model' for command 'llm'; fields are: profile, "
        "prompt, schema, temperature, passages",
    ),
    (
        _set([*F, "plan", "llm", "profile"], "gpt9"),
        f"{PLAN}.llm.profile: unknown model profile 'gpt9'; profiles are: default, fast",
    ),
    (
        _set([*F, "plan", "llm", "prompt"], "nope"),
        f"{PLAN}.llm.prompt: unknown prompt 'nope'; prompts are: main, planner",
    ),
    (
        _set([*F, "plan", "prompt", "name"], "nope"),
        f"{PLAN}.prompt.name: unknown prompt 'nope'; prompts are: main, planner",
    ),
    (
        _set([*F, "plan", "prompt"], {"name": "planner"}),
        f"{PLAN}.prompt: needs at least one of: system, user, assistant",
    ),
    (
        _set([*F, "plan", "llm", "schema"], ["object"]),
        f"{PLAN}.llm.schema: must be a JSON Schema object, got list",
    ),
    (
        _set([*F, "plan", "llm", "temperature"], 3),
        f"{PLAN}.llm.temperature: must be from 0 to 2, got 3",
    ),
    (
        _set([*F, "plan", "llm", "temperature"], "hot"),
        f"{PLAN}.llm.temperature: must be a number, got str",
    ),
    (_delete([*F, "plan", "search", "query"]), f"{PLAN}.search.query: is required"),
    (_set([*F, "plan", "search", "limit"], 0), f"{PLAN}.search.limit: must be from 1 to 50, got 0"),
    (
        _set([*F, "plan", "search", "limit"], "ten"),
        f"{PLAN}.search.limit: must be an integer or an expression in braces, got 'ten'",
    ),
    (
        _set([*F, "plan", "search", "limit"], 5.0),
        f"{PLAN}.search.limit: must be an integer, got float",
    ),
    (
        _set([*F, "main", "memory.recall"], {"label": "airline"}),
        f'{MAIN}["memory.recall"]: needs at least one of: store, query, delete',
    ),
    (
        _set([*F, "main", "memory.recall", "limit"], 101),
        f'{MAIN}["memory.recall"].limit: must be from 1 to 100, got 101',
    ),
    (
        _set([*F, "main", "memory.recall", "agentName"], "bad name"),
        f"{MAIN}[\"memory.recall\"].agentName: 'bad name' is not an agent name (letters, "
        "digits, '_', '.', '-', starting with a letter, digit or '_'; at most 100 characters)",
    ),
    (
        _set([*F, "main", "if.unknown", "then", "memory.store", "store"], {"my label": "x"}),
        f'{IF_THEN}["memory.store"].store["my label"]: \'my label\' is not a memory label '
        "(letters, digits, '_', '.', '-', starting with a letter, digit or '_'; at most 64 "
        "characters)",
    ),
    (
        _set([*F, "main", "if.unknown", "then", "memory.store", "store"], {"airline": 3}),
        f'{IF_THEN}["memory.store"].store.airline: must be a string, got int',
    ),
    (
        _set([*F, "main", "if.unknown", "then", "memory.store", "delete"], "old_airline"),
        f'{IF_THEN}["memory.store"].delete: must be a list of labels, got str',
    ),
    (
        _set([*F, "main", "if.unknown", "then", "memory.store", "delete"], ["ok", "{ x }"]),
        f"{IF_THEN}[\"memory.store\"].delete[1]: '{{ x }}' is not a memory label (letters, "
        "digits, '_', '.', '-', starting with a letter, digit or '_'; at most 64 characters)",
    ),
    (
        _set([*F, "main", "set", "sys.x"], 1),
        f"{MAIN}.set[\"sys.x\"]: 'sys.x' is not a variable: use 'conv.<name>', "
        "'agent.<name>' or '<name>'",
    ),
    (
        _set([*F, "main", "set", "result"], 1),
        f"{MAIN}.set.result: 'result' is reserved (agent, conv, result, sys); choose another name",
    ),
    (
        _set([*F, "main", "set", "conv._x"], 1),
        f"{MAIN}.set[\"conv._x\"]: '_x' is not a variable name: use a Python identifier that "
        "does not start with '_'",
    ),
    (_set([*F, "main", "set"], {}), f"{MAIN}.set: must set at least one variable"),
    (
        _set([*F, "main", "if.unknown", "condition"], "known"),
        f'{MAIN}["if.unknown"].condition: must be an expression in braces, '
        "e.g. \"{ answer != '' }\"",
    ),
    (_delete([*F, "main", "if.unknown", "then"]), f'{MAIN}["if.unknown"].then: is required'),
    (
        _delete([*F, "main", "if.unknown", "condition"]),
        f'{MAIN}["if.unknown"].condition: is required',
    ),
    (
        _set([*F, "main", "if.unknown", "else"], {}),
        f'{MAIN}["if.unknown"].else: must hold at least one command',
    ),
    (
        _delete([*F, "main", "if.unknown", "then", "ask", "question"]),
        f"{IF_THEN}.ask.question: is required",
    ),
    (
        _set([*F, "main", "call", "function"], "book"),
        f"{MAIN}.call.function: calls unknown function 'book'; functions are: main, plan",
    ),
    (
        _set([*F, "main", "call", "args"], {"2x": 1}),
        f"{MAIN}.call.args[\"2x\"]: '2x' is not an argument name: use a Python identifier "
        "that does not start with '_'",
    ),
    (
        _set([*F, "main", "if.unknown", "then", "ask", "max_attempts"], 21),
        f"{IF_THEN}.ask.max_attempts: must be from 1 to 20, got 21",
    ),
    (
        _set([*F, "main", "if.unknown", "then", "ask", "check"], "yes"),
        f"{IF_THEN}.ask.check: must be an expression in braces, e.g. \"{{ answer != '' }}\"",
    ),
    (_set([*F, "plan", "if", "then", "fail"], {}), f"{PLAN}.if.then.fail.message: is required"),
    (
        _set([*F, "main", "end", "output"], {"when": float("nan")}),
        f"{MAIN}.end.output.when: must be a finite number, got nan",
    ),
    (_rename_main, "$.functions.main: is required: a run starts at function 'main'"),
]


@pytest.mark.parametrize(("mutate", "expected"), CASES, ids=[c[1][:60] for c in CASES])
def test_each_rule_reports_its_path_and_reason(mutate: Mutation, expected: str) -> None:
    doc = travel()
    mutate(doc)
    assert problems(doc) == [expected]


@pytest.mark.parametrize(
    ("path", "value", "where"),
    [
        ([*F, "main", "end", "output", "plan"], "{ 1 + }", f"{MAIN}.end.output.plan"),
        ([*F, "plan", "return", "value"], ["ok", "{ 1 + }"], f"{PLAN}.return.value[1]"),
        (["prompts", "planner", "system"], "{ __class__ }", "$.prompts.planner.system"),
        ([*F, "plan", "search", "query"], "{ ) }", f"{PLAN}.search.query"),
        ([*F, "plan", "search", "limit"], "{ 1 + }", f"{PLAN}.search.limit"),
        ([*F, "main", "if.unknown", "condition"], "{ not }", f'{MAIN}["if.unknown"].condition'),
        (
            [*F, "main", "if.unknown", "then", "memory.store", "store", "airline"],
            "{ _secret }",
            f'{IF_THEN}["memory.store"].store.airline',
        ),
        ([*F, "main", "call", "args", "nights"], "{ [ }", f"{MAIN}.call.args.nights"),
        (
            [*F, "main", "set", "conv.city"],
            {"deep": ["{ 1 + }"]},
            f'{MAIN}.set["conv.city"].deep[0]',
        ),
    ],
)
def test_expression_syntax_errors_are_reported_at_their_path(
    path: list[str], value: Any, where: str
) -> None:
    doc = travel()
    _set(path, value)(doc)
    [problem] = problems(doc)
    assert problem.startswith(f"{where}: invalid expression: "), problem


def test_strings_that_are_not_dynamic_are_not_compiled() -> None:
    doc = travel()
    doc["inputs"]["city"]["default"] = "{ not an expression"
    doc["functions"]["plan"]["llm"]["schema"]["description"] = "{ 1 + }"  # schemas are literal
    doc["functions"]["main"]["end"]["output"]["note"] = "braces { inside } are literal text"
    parse(doc)


def test_five_errors_are_all_reported() -> None:
    doc = travel()
    doc["colour"] = "blue"
    doc["prompts"]["main"]["scope"] = "global"
    doc["functions"]["plan"]["llm"]["profile"] = "gpt9"
    doc["functions"]["main"]["call"]["function"] = "book"
    doc["functions"]["main"]["end"]["output"]["plan"] = "{ 1 + }"
    with pytest.raises(DefinitionError) as info:
        parse(doc)
    error = info.value
    assert isinstance(error, InputError)
    assert error.field == "definition"
    assert [p.path for p in error.problems] == [
        "$.colour",
        "$.prompts.main.scope",
        f"{MAIN}.call.function",
        f"{MAIN}.end.output.plan",
        f"{PLAN}.llm.profile",
    ]
    lines = str(error).splitlines()
    assert lines[0] == "definition has 5 problems:"
    assert lines[1:] == [str(p) for p in error.problems]
    assert error.message == str(error)
    assert error.problems[4] == DefinitionProblem(
        f"{PLAN}.llm.profile", "unknown model profile 'gpt9'; profiles are: default, fast"
    )


def test_one_problem_is_singular() -> None:
    doc = travel()
    doc["name"] = ""
    with pytest.raises(DefinitionError) as info:
        parse(doc)
    assert str(info.value).startswith("definition has 1 problem:\n$.name: ")


def _memory_doc(labels: list[str]) -> dict[str, Any]:
    doc = copy.deepcopy(HELPDESK)
    block = doc["functions"]["main"]
    for index, label in enumerate(labels):
        block[f"memory.m{index}"] = {"store": {label: "{ result }"}}
    return doc


def test_ten_labels_are_allowed() -> None:
    labels = [f"label{i}" for i in range(10)]
    doc = _memory_doc(labels)
    doc["functions"]["main"]["memory.again"] = {
        "delete": ["label0"],
        "label": "label3",
        "query": "x",
    }
    assert parse(doc).memory_labels == tuple(labels)


def test_eleven_labels_are_refused_at_the_command_of_the_eleventh() -> None:
    labels = [f"label{i}" for i in range(11)]
    assert problems(_memory_doc(labels)) == [
        f'{MAIN}["memory.m10"]: an agent uses at most 10 distinct memory labels, found 11: '
        + ", ".join(labels)
    ]


def test_labels_count_across_functions_delete_and_label_fields() -> None:
    doc = _memory_doc([f"label{i}" for i in range(9)])
    doc["functions"]["other"] = {
        "if": {
            "condition": "{ True }",
            "then": {"memory.x": {"delete": ["gone"]}},
            "else": {"memory.y": {"query": "z", "label": "filtered"}},
        }
    }
    assert problems(doc) == [
        '$.functions.other.if.else["memory.y"]: an agent uses at most 10 distinct memory '
        "labels, found 11: " + ", ".join([f"label{i}" for i in range(9)] + ["gone", "filtered"])
    ]


def test_twenty_six_stores_or_deletes_in_one_command_are_refused() -> None:
    doc = copy.deepcopy(HELPDESK)
    doc["functions"]["main"]["memory"] = {"store": {f"l{i}": "x" for i in range(26)}}
    found = problems(doc)
    assert found[0] == f"{MAIN}.memory.store: at most 25 stores in one command, found 26"
    assert len(found) == 2  # and the per-agent label limit
    doc["functions"]["main"]["memory"] = {"delete": [f"l{i % 5}" for i in range(26)]}
    assert problems(doc) == [f"{MAIN}.memory.delete: at most 25 deletes in one command, found 26"]


# --- text, format and shape ------------------------------------------------------------------


def test_malformed_json_names_line_and_column() -> None:
    text = '{\n  "name": "travel",\n  "description": "x"\n  "functions": {}\n}'
    assert problems(text) == ["$: is not valid JSON: Expecting ',' delimiter at line 4, column 3"]


def test_malformed_yaml_names_line_and_column() -> None:
    text = "name: travel\ndescription: [unclosed\nfunctions: {}\n"
    [problem] = problems(text)
    assert problem.startswith("$: is not valid YAML: ")
    assert "line 3, column" in problem


def test_json_format_refuses_yaml() -> None:
    [problem] = problems(TRAVEL_YAML, fmt="json")
    assert problem.startswith("$: is not valid JSON: Expecting value at line 1, column 1")


def test_unknown_format_is_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        parse("{}", fmt="toml")
    assert info.value.field == "format"
    assert not isinstance(info.value, DefinitionError)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("[1, 2]", "$: must be an object with name, description and functions, got list"),
        ("just words", "$: must be an object with name, description and functions, got str"),
        ("  \n", "$: is empty: a definition is an object with name, description and functions"),
        (b"\xff\xfe{}", "$: is not UTF-8 text (byte 0: invalid start byte)"),
    ],
)
def test_bad_documents(data: str | bytes, expected: str) -> None:
    assert problems(data) == [expected]


def test_duplicate_keys_are_reported_in_json_and_yaml() -> None:
    text = '{"name": "t", "description": "d", "functions": {"main": {"end": {}, "end": {}}}}'
    reason = (
        "key 'end' appears more than once (only the last was kept); give repeated commands "
        "distinct names, e.g. 'memory.first' and 'memory.second'"
    )
    assert problems(text) == [f"{MAIN}: {reason}"]
    yaml_text = "name: t\ndescription: d\nfunctions:\n  main:\n    end: {}\n    end: {}\n"
    assert problems(yaml_text) == [f"{MAIN}: {reason}"]


def test_yaml_merge_keys_are_not_duplicates() -> None:
    yaml_text = (
        "name: t\ndescription: d\nfunctions:\n  main:\n"
        "    ask: &ask {question: Which city, max_attempts: 2}\n"
        "    ask.again:\n      <<: *ask\n      question: Which city again?\n"
    )
    definition = parse(yaml_text)
    assert definition.functions["main"][1].fields == {
        "question": "Which city again?",
        "max_attempts": 2,
    }


def test_yaml_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    assert problems("\n".join(lines)) == [
        "$: holds more than 100000 values (YAML aliases count each time)"
    ]


def test_non_json_yaml_values_are_refused() -> None:
    doc = "name: t\ndescription: d\nfunctions:\n  main:\n    end: {output: 2024-01-02}\n"
    assert problems(doc) == [f"{MAIN}.end.output: must be a JSON value, got date"]


# --- run inputs --------------------------------------------------------------------------------


def test_check_inputs_fills_defaults() -> None:
    definition = parse(TRAVEL)
    assert check_inputs(definition, {"traveller": "Ada"}) == {
        "city": "Paris",
        "nights": 3,
        "traveller": "Ada",
    }
    assert check_inputs(definition, {"traveller": "Ada", "city": "Rome", "nights": None}) == {
        "city": "Rome",
        "nights": 3,
        "traveller": "Ada",
    }


def test_check_inputs_optional_without_default_is_none() -> None:
    doc = copy.deepcopy(HELPDESK)
    doc["inputs"]["urgent"] = {"type": "boolean", "required": False}
    doc["inputs"]["score"] = {"type": "number", "default": 0.5}
    definition = parse(doc)
    assert check_inputs(definition, {"product": "printer"}) == {
        "product": "printer",
        "urgent": None,
        "score": 0.5,
    }
    assert check_inputs(definition, {"product": "p", "score": 2})["score"] == 2


@pytest.mark.parametrize(
    ("given", "field", "reason"),
    [
        (None, "inputs.traveller", "is required (string) by agent 'travel'"),
        ({}, "inputs.traveller", "is required (string) by agent 'travel'"),
        (
            {"traveller": "Ada", "budget": 10},
            "inputs.budget",
            "unknown input of agent 'travel'; inputs are: city, nights, traveller",
        ),
        ({"traveller": 3}, "inputs.traveller", "must be a string, got int"),
        ({"traveller": "Ada", "nights": True}, "inputs.nights", "must be an integer, got bool"),
        ({"traveller": "Ada", "nights": 2.5}, "inputs.nights", "must be an integer, got float"),
        ({"traveller": "Ada", "city": ["Rome"]}, "inputs.city", "must be a string, got list"),
    ],
)
def test_check_inputs_errors(given: dict[str, Any] | None, field: str, reason: str) -> None:
    with pytest.raises(InputError) as info:
        check_inputs(parse(TRAVEL), given)
    assert (info.value.field, info.value.reason) == (field, reason)


def test_check_inputs_types() -> None:
    doc = copy.deepcopy(HELPDESK)
    doc["inputs"] = {
        "n": {"type": "number", "required": False},
        "o": {"type": "object", "required": False},
        "a": {"type": "array", "required": False},
        "b": {"type": "boolean", "required": False},
    }
    definition = parse(doc)
    ok = {"n": 1.5, "o": {"k": 1}, "a": [1], "b": False}
    assert check_inputs(definition, ok) == ok
    for name, bad, reason in [
        ("n", True, "must be a number, got bool"),
        ("o", [1], "must be an object, got list"),
        ("a", {"k": 1}, "must be an array, got dict"),
        ("b", 0, "must be a boolean, got int"),
    ]:
        with pytest.raises(InputError) as info:
            check_inputs(definition, {name: bad})
        assert (info.value.field, info.value.reason) == (f"inputs.{name}", reason)
    with pytest.raises(InputError) as info:
        check_inputs(definition, ["n"])  # type: ignore[arg-type]
    assert info.value.field == "inputs"
