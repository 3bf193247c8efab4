"""An agent name PostgreSQL cannot look up (NUL, lone surrogate) is a 422 on both backends.

PostgreSQL refuses a NUL in ``text`` (a ``psycopg.DataError``, once a 500) where SQLite
answered 404. The name goes through the rule of :mod:`search2o.textrules` before any query,
in the path of ``/v1/agents/{name}`` and in the ``agent`` of a chat body, and the 422 names
the field. (Conversation and message ids with a NUL stay "just missing", 404:
tests/api/test_chat_api.py.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import func, select

from search2o.api.app import create_app
from search2o.runtime import Runtime
from search2o.storage.models import Conversation, Message
from tests.api.test_api import assert_input_error, serve


@pytest.fixture
def api(runtime: Runtime) -> Iterator[httpx.Client]:
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        yield client


def _rows(runtime: Runtime) -> tuple[int, int]:
    with runtime.database.session() as session:
        return (
            int(session.scalar(select(func.count()).select_from(Conversation)) or 0),
            int(session.scalar(select(func.count()).select_from(Message)) or 0),
        )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/agents/a%00b"),
        ("DELETE", "/v1/agents/%00"),
        ("POST", "/v1/agents/a%00/validate"),
    ],
)
def test_an_agent_name_with_a_nul_in_the_path_is_422_naming_it(
    api: httpx.Client, method: str, path: str
) -> None:
    body = {"query": "hi"} if method == "POST" else None
    detail = assert_input_error(api.request(method, path, json=body), 422, "name")
    assert "NUL" in detail["reason"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"message": "hello", "agent": "a\\u0000b"}', "NUL"),
        # refused by the body's string type already (not a Unicode scalar value)
        (b'{"message": "hello", "agent": "a\\ud800"}', "valid string"),
    ],
)
def test_a_chat_naming_an_agent_no_database_stores_is_422_and_writes_nothing(
    runtime: Runtime, api: httpx.Client, raw: bytes, reason: str
) -> None:
    before = _rows(runtime)
    response = api.post("/v1/chat", content=raw, headers={"Content-Type": "application/json"})
    assert reason in assert_input_error(response, 422, "agent")["reason"]
    assert _rows(runtime) == before


def test_a_plain_unknown_agent_is_still_404(api: httpx.Client) -> None:
    assert api.get("/v1/agents/no-such-agent").status_code == 404
    assert api.post("/v1/chat", json={"message": "hi", "agent": "nope"}).status_code == 404


def test_no_route_answers_a_nul_in_its_path_with_a_server_error(
    runtime: Runtime, api: httpx.Client
) -> None:
    # Every templated path of the API, every parameter a NUL: refused (422) or missing (404)
    # on both backends, never a 5xx from the database.
    tried = []
    for path, operations in api.get("/openapi.json").json()["paths"].items():
        if "{" not in path:
            continue
        url = re.sub(r"\{[^}]+\}", "a%00b", path)
        for method in sorted(set(operations) & {"get", "put", "post", "patch", "delete"}):
            response = api.request(method.upper(), url, json={})
            tried.append((method, path))
            assert response.status_code < 500, (method, path, response.text[:200])
    assert len(tried) >= 20
