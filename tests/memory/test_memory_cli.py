"""``search2o memory list|search|delete`` end to end, on both backends."""

# ruff: noqa: RUF001 - Chinese and Japanese text uses full-width punctuation

from __future__ import annotations

import json

import pytest

from search2o import accounts
from search2o.accounts import Principal
from search2o.runtime import Runtime
from tests.memory.conftest import AIRLINE, COFFEE
from tests.test_cli import Cli, error_line, out

pytestmark = pytest.mark.slow

CJK = "用户喜欢喝绿茶，不加糖。🍵"


def test_list_search_delete_for_a_user(cli: Cli, same_runtime: Runtime) -> None:
    with same_runtime.database.session() as session:
        ann = Principal.of(accounts.create_user(session, "ann@example.com"))
        ben = Principal.of(accounts.create_user(session, "ben@example.com"))
    same_runtime.memory.store(ann, "travel", {"preferred_airline": AIRLINE, "drinks": CJK})
    same_runtime.memory.store(ann, "kitchen", {"coffee_order": COFFEE})
    same_runtime.memory.store(ben, "travel", {"preferred_airline": "Ben flies Delta"})

    listed = json.loads(cli.ok("memory", "list", "--user", "ann@example.com", "--json").stdout)
    assert [(m["agent"], m["label"], m["text"]) for m in listed] == [
        ("kitchen", "coffee_order", COFFEE),
        ("travel", "drinks", CJK),
        ("travel", "preferred_airline", AIRLINE),
    ]
    only = cli.ok("memory", "list", "--user", "ann@example.com", "--agent", "kitchen", "--json")
    assert [m["label"] for m in json.loads(only.stdout)] == ["coffee_order"]
    table = out(cli.ok("memory", "list", "--user", "ann@example.com"))
    assert "preferred_airline" in table and CJK in table and "Ben flies" not in table

    found = cli.ok(
        "memory", "search", "which airline do they like?", "--user", "ann@example.com", "--json"
    )
    assert [(h["agent"], h["label"]) for h in json.loads(found.stdout)] == [
        ("travel", "preferred_airline")
    ]
    tea = cli.ok("memory", "search", "用户喜欢喝什么茶？", "--user", "ann@example.com", "--json")
    assert [h["text"] for h in json.loads(tea.stdout)] == [CJK]
    none = cli.ok("memory", "search", "quantum chromodynamics", "--user", "ann@example.com")
    assert "no memory is relevant enough" in out(none)

    deleted = cli.ok("memory", "delete", "travel", "preferred_airline", "--user", "ann@example.com")
    assert "deleted travel/preferred_airline of ann@example.com" in out(deleted)
    line = error_line(
        cli("memory", "delete", "travel", "preferred_airline", "--user", "ann@example.com"), 1
    )
    assert "memory travel/preferred_airline not found" in line
    assert [m.text for m in same_runtime.memory.list(ben)] == ["Ben flies Delta"]
    again = cli.ok(
        "memory", "search", "which airline do they like?", "--user", "ann@example.com", "--json"
    )
    assert json.loads(again.stdout) == []


def test_the_local_user_by_default_and_bad_input(cli: Cli, same_runtime: Runtime) -> None:
    local = same_runtime.local_principal()
    same_runtime.memory.store(local, "travel", {"preferred_airline": AIRLINE})
    listed = json.loads(cli.ok("memory", "list", "--json").stdout)
    assert [m["label"] for m in listed] == ["preferred_airline"]
    assert "--limit: Input should be greater than or equal to 1" in error_line(
        cli("memory", "list", "--limit", "0"), 2
    )
    assert "--agent:" in error_line(cli("memory", "search", "x", "--agent", "a b"), 2)
    assert "query: must not be empty" in error_line(cli("memory", "search", " "), 2)
    assert "no user nobody@example.com" in error_line(
        cli("memory", "list", "--user", "nobody@example.com"), 1
    )
