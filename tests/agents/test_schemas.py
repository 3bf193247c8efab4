"""``llm.schema``: nothing is fetched, patterns run in linear time, validation is bounded."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from search2o.agents._schemas import answer_problem
from search2o.agents.definition import DefinitionError, parse_definition
from tests.agents.test_interpreter import FakeServices, interpreter

SECRET = "INTERNAL-SECRET-VALUE-42"
EVIL = r"^([a-zA-Z0-9]+\s?)+$"
# 30 characters that almost match: Python's re backtracks 2**30 ways on it (minutes), while a
# linear-time engine answers in microseconds; the bound below is far from both, so a busy
# machine cannot fail the tests and a backtracking engine cannot pass them.
HOSTILE = "a" * 29 + "!"
LINEAR_S = 5.0


class Internal:
    """A loopback HTTP server standing for an internal service; counts the requests it gets."""

    def __init__(self) -> None:
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                owner.requests += 1
                body = json.dumps({"enum": [SECRET]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/schema.json"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def internal() -> Iterator[Internal]:
    server = Internal()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def with_schema(schema: Any) -> dict[str, Any]:
    return {
        "name": "typed",
        "description": "answers in JSON",
        "functions": {"main": {"llm": {"schema": schema}, "end": {"output": "{ result }"}}},
    }


def problems(schema: Any) -> list[tuple[str, str]]:
    with pytest.raises(DefinitionError) as caught:
        parse_definition(with_schema(schema), profiles=["default"])
    return [(p.path, p.reason) for p in caught.value.problems]


AT = "$.functions.main.llm.schema"


def test_remote_references_are_refused_at_upload_and_never_fetched(internal: Internal) -> None:
    cases = {
        f'{AT}["$ref"]': {"$ref": internal.url},
        f'{AT}.properties.a["$ref"]': {"properties": {"a": {"$ref": internal.url}}},
        f'{AT}["$dynamicRef"]': {"$dynamicRef": internal.url},
        f'{AT}.items["$ref"]': {"items": {"$ref": "file:///etc/passwd"}},
        f'{AT}.allOf[0]["$ref"]': {"allOf": [{"$ref": "other.json#/x"}]},
    }
    for path, schema in cases.items():
        found = problems(schema)
        assert [p for p, _ in found] == [path], found
        assert "must refer inside the schema" in found[0][1]
    base = problems({"$id": internal.url, "$ref": "#/$defs/a", "$defs": {"a": {}}})
    assert base == [(f'{AT}["$id"]', base[0][1])] and "may not set a base URI" in base[0][1]
    draft7 = "http://json-schema.org/draft-07/schema#"
    nested = problems({"properties": {"a": {"$schema": draft7}}})
    top_only = "may only be given at the top of the schema"
    assert nested == [(f'{AT}.properties.a["$schema"]', top_only)]
    unknown = problems({"$schema": internal.url})
    assert unknown[0][0] == f'{AT}["$schema"]' and "names no JSON Schema draft" in unknown[0][1]
    dangling = problems({"$ref": "#/$defs/missing"})
    assert dangling == [(f'{AT}["$ref"]', "'#/$defs/missing' does not resolve inside the schema")]
    assert internal.requests == 0


def test_local_references_data_and_anchors_are_accepted() -> None:
    schema = {
        "$defs": {"city": {"$anchor": "city", "type": "string"}},
        "type": "object",
        "properties": {
            "from": {"$ref": "#/$defs/city"},
            "to": {"$ref": "#city"},
            "via": {"type": "array", "items": {"$ref": "#/$defs/city"}},
        },
        # data, not schemas: a "$ref" key there is a key like any other
        "examples": [{"$ref": "http://example.com/x"}],
        "default": {"$id": "http://example.com/x"},
    }
    definition = parse_definition(with_schema(schema), profiles=["default"])
    assert definition.functions["main"][0].get("schema") == schema
    assert answer_problem(schema, {"from": "Oslo", "to": "Rome", "via": ["Paris"]}) is None
    assert "at via/0" in str(answer_problem(schema, {"via": [3]}))


def test_a_run_never_fetches_even_a_schema_that_skipped_the_upload_check(
    internal: Internal,
) -> None:
    schema = {"$ref": internal.url}
    reason = answer_problem(schema, "hello")
    assert reason is not None and "a reference does not resolve" in reason
    assert SECRET not in reason
    assert internal.requests == 0


def test_an_evil_pattern_runs_in_linear_time_and_still_decides_correctly() -> None:
    schema = {"type": "string", "pattern": EVIL}
    start = time.perf_counter()
    refused = answer_problem(schema, HOSTILE)
    assert time.perf_counter() - start < LINEAR_S
    assert refused is not None and "does not match" in refused
    assert answer_problem(schema, "hello big world") is None
    # and in the keys of an object, for patternProperties and additionalProperties
    keyed = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}
    start = time.perf_counter()
    assert answer_problem(keyed, {HOSTILE: "x"}) is None  # the key does not match: unchecked
    assert answer_problem({**keyed, "additionalProperties": False}, {HOSTILE: 1}) is not None
    assert time.perf_counter() - start < LINEAR_S
    assert "at abc" in str(answer_problem(keyed, {"abc": "not an integer"}))
    assert answer_problem({**keyed, "additionalProperties": False}, {"abc": 1}) is None


def test_an_evil_pattern_through_a_run_answers_fast() -> None:
    functions = with_schema({"type": "object", "properties": {"name": {"pattern": EVIL}}})
    run = interpreter(functions["functions"], FakeServices(json.dumps({"name": HOSTILE})))
    start = time.perf_counter()
    with pytest.raises(Exception, match="does not match the schema at name"):
        run.start()
    assert time.perf_counter() - start < LINEAR_S


def test_patterns_re2_refuses_are_refused_at_upload_with_their_path() -> None:
    found = problems(
        {
            "properties": {"a": {"pattern": r"(a)\1"}, "b": {"pattern": r"x(?=y)"}},
            "patternProperties": {r"(?<=a)b": {}},
        }
    )
    assert [p for p, _ in found] == [
        f"{AT}.properties.a.pattern",
        f"{AT}.properties.b.pattern",
        f'{AT}.patternProperties["(?<=a)b"]',
    ]
    assert all("RE2 does not accept" in reason for _, reason in found)
    # RE2's syntax, not Python's: \p{L} is a letter class there
    letters = {"type": "string", "pattern": r"^\p{L}+$"}
    parse_definition(with_schema(letters), profiles=["default"])
    assert answer_problem(letters, "héllo") is None and answer_problem(letters, "a1") is not None


def test_unevaluated_properties_cannot_run_patterns() -> None:
    found = problems({"patternProperties": {"^a": {}}, "unevaluatedProperties": False})
    assert found[0][0] == AT and "unevaluatedProperties" in found[0][1]
    parse_definition(
        with_schema({"properties": {"a": {}}, "unevaluatedProperties": False}),
        profiles=["default"],
    )


def test_exponential_and_endless_schemas_are_bounded() -> None:
    # 40 levels of anyOf over two failing branches: 2**40 paths without a budget
    defs = {f"n{i}": {"anyOf": [{"$ref": f"#/$defs/n{i + 1}"}] * 2} for i in range(40)}
    defs["n40"] = {"type": "string"}
    exponential = {"$defs": defs, "$ref": "#/$defs/n0"}
    parse_definition(with_schema(exponential), profiles=["default"])
    # The budget is counted in steps, not seconds: its message proves it stopped the walk (a
    # walk of 2**40 paths would instead run into this test's time limit).
    reason = answer_problem(exponential, 1)
    assert reason is not None and "could not be checked against the schema" in reason
    endless = {"$ref": "#"}
    assert "refers to itself without end" in str(answer_problem(endless, 1))
    # many unhashable items for uniqueItems: pairwise work is charged up front
    unique = {"uniqueItems": True}
    assert "could not be checked" in str(answer_problem(unique, [[i] for i in range(1000)]))
    assert answer_problem(unique, [[1], [2]]) is None
