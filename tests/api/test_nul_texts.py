"""An agent name PostgreSQL cannot look up (NUL, lone surrogate) is a 422 on both backends.

PostgreSQL refuses a NUL in ``text`` (a ``psycopg.DataError``, once a 500) where SQLite
answered 404. The name goes through the rule of :mod:`search2o.textrules` before any query,
in the path of ``/v1/agents/{name}`` and in the ``agent`` of a chat body, and the 422 names
the field. Every path and query parameter follows one rule (``search2o.api.param_texts``): a
NUL, or bytes that are not UTF-8, is a 422 naming the parameter, never a lookup or a search.
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


def test_every_route_answers_a_nul_in_its_path_with_a_422_naming_the_parameter(
    runtime: Runtime, api: httpx.Client
) -> None:
    # Every templated path of the API, its first parameter a NUL: a 422 naming it on both
    # backends, never a lookup (404) and never a 5xx from the database.
    tried = []
    for path, operations in api.get("/openapi.json").json()["paths"].items():
        names = re.findall(r"\{([^}]+)\}", path)
        if not names:
            continue
        url = re.sub(r"\{[^}]+\}", "a%00b", path)
        for method in sorted(set(operations) & {"get", "put", "post", "patch", "delete"}):
            # As the Web App sends it: the sign-in link's POST wants the client header and this
            # server's origin (CSRF) before anything else.
            own = {"X-Search2o-Client": "tests", "Origin": str(api.base_url).rstrip("/")}
            response = api.request(method.upper(), url, json={}, headers=own)
            tried.append((method, path))
            assert response.status_code == 422, (method, path, response.text[:200])
            assert_input_error(response, 422, names[0])
    assert len(tried) >= 20


@pytest.mark.parametrize(
    ("method", "url", "field", "reason"),
    [
        ("DELETE", "/v1/memories/%00/%00", "agent", "NUL"),
        ("DELETE", "/v1/memories/travel/%FF", "label", "UTF-8"),
        ("GET", "/v1/me/conversations?q=%00", "q", "NUL"),
        ("GET", "/v1/me/conversations?q=caf%C3", "q", "UTF-8"),
        ("GET", "/v1/me/conversations?limit=5&cursor=%00", "cursor", "NUL"),
        ("GET", "/v1/agents/%FF%FE", "name", "UTF-8"),
        ("PUT", "/v1/agents/a%C3", "name", "UTF-8"),
        ("GET", "/v1/documents?q%FF=1", "q\ufffd", "UTF-8"),
    ],
)
def test_a_hostile_name_anywhere_is_422_naming_the_field(
    api: httpx.Client, method: str, url: str, field: str, reason: str
) -> None:
    detail = assert_input_error(api.request(method, url, json={}), 422, field)
    assert reason in detail["reason"]
    assert "\x00" not in detail["reason"]  # the NUL is named, never echoed


def test_a_valid_replacement_character_is_a_plain_value(api: httpx.Client) -> None:
    # U+FFFD sent as its own UTF-8 (%EF%BF%BD) is text like any other: looked up, not refused.
    assert api.get("/v1/agents/a%EF%BF%BD").status_code == 404
    assert api.get("/v1/me/conversations?q=%EF%BF%BD").status_code == 200
