"""Fixtures of the MCP tests: the handbook, an ``hr`` document only Alice may read, two users.

Every fixture runs on both database backends (the ``database_url`` parameter of
``tests/conftest.py``) with the real built-in embedder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.api.test_api import add_user
from tests.conftest import HANDBOOK

from search2o.accounts import Principal
from search2o.knowledge.access import AccessList
from search2o.runtime import Runtime

# An hr-only document that matches the handbook question too: if access rights were not
# applied, Bob's search for "vacation days" would find it.
HR_TEXT = (
    "# Confidential vacation ledger\n\n"
    "Vacation days owed to each employee at termination, with their salary band. "
    "Only the hr group may read this ledger.\n"
)
HR_NAME = "vacation-ledger-hr.md"
QUESTION = "vacation days"
GOLDEN = Path(__file__).with_name("tools_list.json")


@dataclass(frozen=True)
class Handbook:
    """A runtime holding the handbook (readable by all) and the hr ledger (group ``hr``).

    Attributes:
        alice, bob: principals; Alice is in ``hr``, Bob is not.
        alice_auth, bob_auth: their ``Authorization`` headers (API tokens).
        benefits_id, hr_id: document ids of ``benefits-and-perks.md`` and the ledger.

    """

    runtime: Runtime
    alice: Principal
    bob: Principal
    alice_auth: dict[str, str]
    bob_auth: dict[str, str]
    benefits_id: int
    hr_id: int


def load_handbook(runtime: Runtime, folder: Path) -> Handbook:
    """Ingest the handbook and the ledger into ``runtime``; create Alice and Bob."""
    runtime.knowledge.ingest_paths([HANDBOOK], AccessList())
    ledger = folder / HR_NAME
    ledger.write_text(HR_TEXT, encoding="utf-8")
    runtime.knowledge.ingest_paths([ledger], AccessList.build(groups=["hr"]))
    alice_auth = add_user(runtime, "alice@example.com", ("hr",))
    bob_auth = add_user(runtime, "bob@example.com")
    admin = runtime.local_principal()
    ids = {Path(d.source).name: d.id for d in runtime.knowledge.list_documents(admin)}
    return Handbook(
        runtime=runtime,
        alice=runtime.principal_for("alice@example.com"),
        bob=runtime.principal_for("bob@example.com"),
        alice_auth=alice_auth,
        bob_auth=bob_auth,
        benefits_id=ids["benefits-and-perks.md"],
        hr_id=ids[HR_NAME],
    )


@pytest.fixture
def handbook(token_runtime: Runtime, tmp_path: Path) -> Iterator[Handbook]:
    """The handbook, the ledger and two users on a token-mode runtime, on each backend."""
    yield load_handbook(token_runtime, tmp_path)


def dump(result: Any) -> dict[str, Any]:
    """A result of the SDK's client as the JSON the wire carries."""
    value: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def tools_of(listing: Any) -> list[dict[str, Any]]:
    """The ``tools`` of a ``tools/list`` result, without anything era-specific around them."""
    return list(dump(listing)["tools"])


def golden_tools() -> list[dict[str, Any]]:
    """The golden ``tools/list`` (tests/mcp/tools_list.json)."""
    value: list[dict[str, Any]] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return value


def structured(result: Any) -> dict[str, Any]:
    """A successful tool result's structured content, checked to equal its one text content."""
    body = dump(result)
    assert body["isError"] is False, body
    assert len(body["content"]) == 1 and body["content"][0]["type"] == "text"
    assert json.loads(body["content"][0]["text"]) == body["structuredContent"]
    value: dict[str, Any] = body["structuredContent"]
    return value


def tool_error(result: Any) -> str:
    """A failed tool result's message (``isError`` true, one text content)."""
    body = dump(result)
    assert body["isError"] is True, body
    assert "structuredContent" not in body
    [content] = body["content"]
    text: str = content["text"]
    return text
