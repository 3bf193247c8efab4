"""The API keeps its own contract under fuzzing: schemathesis over the OpenAPI document.

Every operation, in token mode with two users (an admin in ``hr`` and a plain user, each with
data of their own) and a surface's service token, all three on PostgreSQL and the admin on
SQLite: zero server errors, zero responses outside the
documented statuses, content types, headers and schemas. The run uses schemathesis's own CLI
(all its phases: examples, coverage, fuzzing, stateful) with a fixed seed and a bounded number
of examples per operation.

Every check runs, ``positive_data_acceptance`` (ST202) included: what the document allows, the
server accepts. Rules between fields are in the document too (a rename needs ``title`` or
``pinned``; a page goes with no agent, ``inputs`` only with one: JSON Schema ``anyOf``/``not``),
and a state the request cannot know answers a status the document lists (a PUT whose body
names another agent than its path is a 409 Conflict, RFC 9110 section 9.3.4). Checks are off
for four operations only, each with its reason, in ``schemathesis.toml`` next to this file:
multipart form fields are all text, so a "wrong type" there is a valid string; two files of an
upload need distinct names, which no schema can compare across parts; a source's settings
depend on its connector and on the server's file system; a link code ends in a checksum.

A negative control adds a deliberately broken handler to the same app and shows the run fails.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from search2o import accounts
from search2o.api.app import create_app
from search2o.knowledge.access import AccessList
from search2o.runtime import Runtime
from tests.api.test_api import add_user, serve

pytestmark = pytest.mark.slow

ST = Path(sys.executable).parent / "st"
EXAMPLES = "15"
SEED = "20261201"
CONFIG = Path(__file__).with_name("schemathesis.toml")  # reasoned per-operation exceptions
TRAVEL = Path(__file__).resolve().parents[2] / "examples" / "agents" / "travel.json"


def schemathesis(
    base_url: str, token: str, cwd: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """Run ``st run`` against a live server; return the finished process."""
    return subprocess.run(
        [
            str(ST),
            "--config-file",
            str(CONFIG),
            "run",
            f"{base_url}/openapi.json",
            "--header",
            f"Authorization: Bearer {token}",
            "--max-examples",
            EXAMPLES,
            "--seed",
            SEED,
            "--workers",
            "1",
            "--request-timeout",
            "60",
            *extra,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def seeded(runtime: Runtime) -> dict[str, str]:
    """Two users with documents, conversations and an agent; return their tokens."""
    admin = add_user(runtime, "ann@example.com", groups=("hr",), admin=True)["Authorization"]
    plain = add_user(runtime, "bob@example.com")["Authorization"]
    knowledge = runtime.knowledge
    knowledge.ingest_bytes(
        "upload:benefits.md",
        "benefits.md",
        b"# Vacation\n\nWe get 20 days of vacation each year.\n",
        AccessList(),
    )
    knowledge.ingest_bytes(
        "upload:salaries.md",
        "salaries.md",
        b"# Salary bands\n\nThe HR salary bands are confidential.\n",
        AccessList.build(["hr"], []),
    )
    ann = runtime.principal_for("ann@example.com")
    runtime.agents.put(TRAVEL.read_bytes(), name="travel", fmt="json", admin=ann)
    with runtime.database.session() as session:
        surface = accounts.issue_surface_token(session, "slack")
    return {
        "admin": admin.removeprefix("Bearer "),
        "plain": plain.removeprefix("Bearer "),
        "surface": surface,
    }


# Every user runs on PostgreSQL (what a scaled deployment uses); on SQLite the admin's run, which
# reaches every operation, covers the embedded store. Two runs of about two minutes are saved.
ON_SQLITE = {"admin"}


@pytest.fixture
def fuzzed(
    request: pytest.FixtureRequest, database_url: str
) -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    user = request.node.callspec.params["user"]
    if database_url.startswith("sqlite") and user not in ON_SQLITE:
        pytest.skip(f"on SQLite only {sorted(ON_SQLITE)} run (every user runs on PostgreSQL)")
    token_runtime: Runtime = request.getfixturevalue("token_runtime")
    tokens = seeded(token_runtime)
    with serve(create_app(token_runtime.settings, runtime=token_runtime)) as client:
        for token in tokens.values():  # each user has a conversation of their own
            client.post(
                "/v1/chat",
                json={"message": "How many vacation days do we get?", "stream": False},
                headers={"Authorization": f"Bearer {token}"},
            )
        yield client, tokens


# The surface's service token reaches what only surfaces may call (/v1/surfaces/...).
@pytest.mark.parametrize("user", ["admin", "plain", "surface"])
def test_every_operation_keeps_the_contract_under_fuzzing(
    fuzzed: tuple[httpx.Client, dict[str, str]], user: str, tmp_path: Path
) -> None:
    client, tokens = fuzzed
    result = schemathesis(str(client.base_url), tokens[user], tmp_path)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    # Every operation of the document ran, however many the API grows to.
    paths = client.get("/openapi.json").json()["paths"]
    operations = sum(
        method in ("get", "post", "put", "patch", "delete")
        for path in paths.values()
        for method in path
    )
    # /mcp and its RFC 9728 metadata are no OpenAPI operations (docs/mcp.md), nor are the
    # messengers' webhooks: tests/api/test_fuzz_webhooks.py fuzzes those, validly signed.
    assert not any("mcp" in path or "well-known" in path for path in paths)
    assert not any(path.startswith(("/slack", "/telegram", "/mattermost")) for path in paths)
    # What the surfaces added since the hardening review is in the document, so in this run:
    # sign-in and sessions, a user's own tokens, the surfaces' identity and thread routes, and
    # the page a user reads (the chat request's ``page``).
    added = {
        "/v1/auth/session",
        "/v1/auth/oidc/login",
        "/v1/auth/oidc/callback",
        "/v1/auth/logout",
        "/v1/auth/link/{value}",
        "/v1/me/tokens",
        "/v1/me/tokens/{token_id}",
        "/v1/surfaces/identities",
        "/v1/surfaces/link-codes",
        "/v1/surfaces/threads/{workspace}/{channel}/{thread}",
    }
    assert added <= set(paths), added - set(paths)
    chat = client.get("/openapi.json").json()["components"]["schemas"]["ChatRequest"]
    assert "page" in chat["properties"]
    tested = re.search(r"Tested: (\d+)", result.stdout)
    assert tested is not None and int(tested.group(1)) == operations, result.stdout[-3000:]


def broken_app(runtime: Runtime) -> FastAPI:
    """Our app plus a handler with a bug and one whose answer breaks its documented schema."""
    app = create_app(runtime.settings, runtime=runtime)

    def divide(value: int) -> dict[str, int]:
        """A handler with a bug: it divides by zero, a 500 for every value."""
        return {"result": 100 // (value - value)}

    def count() -> JSONResponse:
        """A handler whose body is not the ``{"count": int}`` it documents."""
        return JSONResponse({"count": "many"})

    app.add_api_route("/v1/broken/{value}", divide, methods=["GET"])
    app.add_api_route(
        "/v1/broken-schema",
        count,
        methods=["GET"],
        responses={200: {"model": Count, "description": "how many"}},
    )
    return app


class Count(BaseModel):
    """What ``/v1/broken-schema`` documents."""

    count: int


def test_a_broken_handler_makes_the_run_fail(token_runtime: Runtime, tmp_path: Path) -> None:
    token = seeded(token_runtime)["admin"]
    with serve(broken_app(token_runtime)) as client:
        result = schemathesis(
            str(client.base_url), token, tmp_path, "--include-path-regex", "^/v1/broken"
        )
    assert result.returncode != 0, result.stdout[-3000:]
    assert "Server error" in result.stdout
    assert "Response violates schema" in result.stdout
