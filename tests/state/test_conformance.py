"""The conformance suite, run over every store we ship and over a hook, as an enterprise would.

Each check runs against our database store (SQLite and PostgreSQL, background compaction on
every few saves) and against the reference HTTP hook behind a :class:`HookStateStore` that also
checks ownership in our database. The CLI runs it against the bare hook."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator

import pytest
from typer.testing import CliRunner

from search2o.cli import app
from search2o.runtime import Runtime
from search2o.state import DatabaseStateStore, HookStateStore, HttpStateHook
from search2o.state.conformance import (
    CHECKS,
    ConformanceError,
    ConformanceTarget,
    StoreFactory,
    run_checks,
)
from search2o.state.conformance_http import HTTP_CHECKS
from tests.conftest import free_port
from tests.state.conftest import add_user, new_conversation
from tests.state.hook_server import HookServer, serve_hook


@pytest.fixture(params=["database", "http_hook"])
def factory(
    request: pytest.FixtureRequest, state_runtime: Runtime, hook_server: HookServer
) -> Iterator[StoreFactory]:
    rt = state_runtime

    def make() -> ConformanceTarget:
        if request.param == "database":
            store: DatabaseStateStore | HookStateStore = DatabaseStateStore(
                rt.database, rt.vault, compact_every=4
            )
        else:
            hook = HttpStateHook(hook_server.url, hook_server.secret, 10)
            store = HookStateStore(hook, name=hook.name, database=rt.database)
        return ConformanceTarget(store, lambda: add_user(rt), lambda p: new_conversation(rt, p))

    yield make


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_store_conforms(check: Callable[[StoreFactory], None], factory: StoreFactory) -> None:
    check(factory)


@pytest.mark.parametrize("check", HTTP_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_reference_hook_conforms_on_the_wire(
    check: Callable[[str, str, float], None], hook_server: HookServer
) -> None:
    check(hook_server.url, hook_server.secret, 5.0)


def test_a_hook_that_loses_updates_fails_the_suite() -> None:
    """The suite catches a hook without compare-and-swap (it must not pass everything)."""
    from search2o.state.conformance_http import http_hook_target

    with serve_hook(cas=False) as server:
        results = {r.name: r for r in run_checks(http_hook_target(server.url, server.secret, 5))}
    assert not results["check_stale_version_is_a_conflict"].passed
    assert "expected ConflictError, but it succeeded" in (
        results["check_stale_version_is_a_conflict"].detail
    )
    assert not results["check_concurrent_saves_one_wins"].passed
    assert results["check_round_trip"].passed


def test_a_failing_check_raises_a_clear_conformance_error() -> None:
    from search2o.state.conformance import check_stale_version_is_a_conflict
    from search2o.state.conformance_http import http_hook_target

    expected = "save from version 0 while the state is at 1"
    with serve_hook(cas=False) as server, pytest.raises(ConformanceError, match=expected):
        check_stale_version_is_a_conflict(http_hook_target(server.url, server.secret, 5))


def test_cli_runs_the_suite_against_a_hook_and_prints_a_table() -> None:
    runner = CliRunner()
    with serve_hook() as server:
        result = runner.invoke(
            app, ["state", "conformance", "--url", server.url, "--secret", server.secret]
        )
    assert result.exit_code == 0, result.output
    assert "round_trip" in result.output and "PASS" in result.output
    assert "FAIL" not in result.output
    assert f"{len(CHECKS) + len(HTTP_CHECKS)} passed, 0 failed" in result.output


def test_cli_exits_1_when_a_check_fails_and_can_print_json() -> None:
    runner = CliRunner()
    with serve_hook(cas=False) as server:
        result = runner.invoke(
            app,
            ["state", "conformance", "--url", server.url, "--json"],
            env={"SEARCH2O_STATE__HOOK_SECRET": server.secret},
        )
    assert result.exit_code == 1, result.output
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["check_round_trip"]["passed"] is True
    assert rows["check_concurrent_saves_one_wins"]["passed"] is False


def test_cli_says_once_that_an_unreachable_hook_cannot_be_reached() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = CliRunner().invoke(
        app, ["state", "conformance", "--url", url, "--secret", secrets.token_hex(16)]
    )
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach the hook at {url}: ")
    assert "FAIL" not in result.output


@pytest.mark.parametrize("secret", ["", "s" * 15])
def test_cli_refuses_a_secret_shorter_than_the_server_accepts(secret: str) -> None:
    with serve_hook() as server:
        result = CliRunner().invoke(
            app, ["state", "conformance", "--url", server.url, "--secret", secret]
        )
    assert result.exit_code == 2
    assert "--secret" in result.output and "at least 16 characters" in result.output
    assert "PASS" not in result.output and "FAIL" not in result.output  # no check ran


def test_cli_refuses_a_url_that_is_not_http() -> None:
    result = CliRunner().invoke(
        app, ["state", "conformance", "--url", "ftp://x", "--secret", secrets.token_hex(4)]
    )
    assert result.exit_code == 2
    assert "--url" in result.output
