"""Enterprise state hooks: signed HTTP and entry points, failures that change nothing, and how
the store is chosen from the settings."""

from __future__ import annotations

import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from search2o.config import Settings, load_settings
from search2o.errors import ConfigError, HookError, NotFoundError
from search2o.runtime import Runtime
from search2o.state import (
    ConversationState,
    DatabaseStateStore,
    HookStateStore,
    HttpStateHook,
    StateStore,
    apply,
    build_state_store,
)
from search2o.state.conformance import sample_changes
from search2o.state.settings import StateSettings
from tests.state.conftest import add_user, new_conversation, state_rows
from tests.state.hook_server import HookServer, serve_hook


def hook_store(server: HookServer, runtime: Runtime, timeout_s: float = 5.0) -> HookStateStore:
    hook = HttpStateHook(server.url, server.secret, timeout_s)
    return HookStateStore(hook, name=hook.name, database=runtime.database)


def test_state_goes_to_the_hook_in_plain_form_and_we_keep_none_of_it(
    state_runtime: Runtime, hook_server: HookServer
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    with hook_store(hook_server, state_runtime) as store:
        assert store.restore(cid, me) is None
        first = sample_changes("1")
        assert store.save(cid, me, first, 0) == 1
        want = apply(ConversationState(), first)
        assert store.restore(cid, me) == (want, 1)
        # Without base, the store restores from the hook first; with it, it does not.
        calls = len(hook_server.requests)
        assert store.save(cid, me, sample_changes("2"), 1, base=want) == 2
        assert hook_server.requests[calls:] == ["save"]
    record = hook_server.hook.records[cid]
    assert record.owner == me.email
    assert record.state == apply(want, sample_changes("2")).to_json()
    assert state_rows(state_runtime, cid) == (0, 0)


def test_ownership_is_checked_on_our_side_before_the_hook_is_asked(
    state_runtime: Runtime, hook_server: HookServer
) -> None:
    owner, other = add_user(state_runtime), add_user(state_runtime)
    cid = new_conversation(state_runtime, owner)
    with hook_store(hook_server, state_runtime) as store:
        store.save(cid, owner, sample_changes("1"), 0)
        calls = len(hook_server.requests)
        with pytest.raises(NotFoundError, match="not found"):
            store.restore(cid, other)
        with pytest.raises(NotFoundError):
            store.save(cid, other, sample_changes("2"), 1)
        with pytest.raises(NotFoundError):
            store.delete(cid, other)
        assert hook_server.requests[calls:] == []


@pytest.mark.parametrize(
    ("operation", "fault", "reason"),
    [
        ("save", "500", "answered HTTP 500"),
        ("save", "slow", "timed out after 0.5 s"),
        ("save", "not_json", "not JSON"),
        ("save", "bad_version", "returned version 'two'"),
        ("restore", "500", "answered HTTP 500"),
        ("restore", "slow", "timed out after 0.5 s"),
        ("restore", "malformed_state", "returned malformed state: state.runs[0].status"),
        ("delete", "500", "answered HTTP 500"),
    ],
)
def test_a_failing_hook_fails_the_call_with_a_clear_error_and_changes_nothing(
    state_runtime: Runtime, hook_server: HookServer, operation: str, fault: str, reason: str
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    with hook_store(hook_server, state_runtime, timeout_s=0.5) as store:
        store.save(cid, me, sample_changes("1"), 0)
        before = hook_server.hook.restore(cid, me.email)
        hook_server.faults[operation] = fault
        calls = {
            "save": lambda: store.save(cid, me, sample_changes("2"), 1),
            "restore": lambda: store.restore(cid, me),
            "delete": lambda: store.delete(cid, me),
        }
        with pytest.raises(HookError) as caught:
            calls[operation]()
        message = str(caught.value)
        assert hook_server.url in message and reason in message, message
        assert caught.value.hook == hook_server.url
        hook_server.faults.clear()
        assert hook_server.hook.restore(cid, me.email) == before
        assert store.restore(cid, me) is not None
    assert state_rows(state_runtime, cid) == (0, 0)


def test_a_hook_with_another_secret_is_reported_as_a_signature_problem(
    state_runtime: Runtime, hook_server: HookServer
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    hook = HttpStateHook(hook_server.url, "not-the-secret", 5)
    with (
        HookStateStore(hook, name=hook.name, database=state_runtime.database) as store,
        pytest.raises(HookError, match=r"refused our signature .*state\.hook_secret"),
    ):
        store.save(cid, me, sample_changes("1"), 0)
    assert hook_server.hook.records == {}


def test_an_unreachable_hook_is_a_hook_error(state_runtime: Runtime) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    with serve_hook() as server:
        url, secret = server.url, server.secret
    hook = HttpStateHook(url, secret, 2)
    with (
        HookStateStore(hook, name=hook.name, database=state_runtime.database) as store,
        pytest.raises(HookError, match="cannot reach it"),
    ):
        store.restore(cid, me)


def test_hook_names_never_show_credentials() -> None:
    hook = HttpStateHook("https://svc:pa55@hooks.example.com:8443/state/?token=abc", "s", 1)
    try:
        assert hook.name == "https://hooks.example.com:8443/state"
    finally:
        hook.close()


# --- entry points -----------------------------------------------------------------------------

PLUGIN = '''
"""A state hook installed as an entry point (written by the test)."""

import threading

from tests.state.hook_server import ReferenceHook

memory = ReferenceHook()
release = threading.Event()


class Failing:
    def __init__(self, settings):
        self.settings = settings

    def save(self, conversation_id, user_email, state, expected_version):
        raise RuntimeError("database of the hook is down")

    def restore(self, conversation_id, user_email):
        return {"state": {"runs": "not a list"}, "version": 1}

    def delete_conversation(self, conversation_id, user_email):
        release.wait(30)


class Incomplete:
    def __init__(self, settings):
        pass

    def save(self, conversation_id, user_email, state, expected_version):
        return 1
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A distribution on sys.path with entry points in ``search2o.state_hooks``."""
    (tmp_path / "s2o_test_state_hooks.py").write_text(PLUGIN)
    info = tmp_path / "s2o_test_state_hooks-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: s2o-test-state-hooks\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [search2o.state_hooks]
            test-memory = s2o_test_state_hooks:memory
            test-failing = s2o_test_state_hooks:Failing
            test-incomplete = s2o_test_state_hooks:Incomplete
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import s2o_test_state_hooks  # type: ignore[import-not-found]

    try:
        yield s2o_test_state_hooks
    finally:
        s2o_test_state_hooks.release.set()
        sys.modules.pop("s2o_test_state_hooks", None)


def with_state(settings: Settings, **state: Any) -> Settings:
    return settings.model_copy(update={"state": StateSettings(**state)})


def test_an_entry_point_hook_is_found_by_name_and_used(state_runtime: Runtime, plugin: Any) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    settings = with_state(state_runtime.settings, hooks="test-memory")
    with build_state_store(settings, state_runtime.database, state_runtime.vault) as store:
        assert isinstance(store, HookStateStore) and store.name == "test-memory"
        assert store.save(cid, me, sample_changes("1"), 0) == 1
        assert store.restore(cid, me) == (apply(ConversationState(), sample_changes("1")), 1)
    assert plugin.memory.records[cid].owner == me.email
    assert state_rows(state_runtime, cid) == (0, 0)


def test_an_entry_point_hook_that_raises_lies_or_hangs_is_a_hook_error(
    state_runtime: Runtime, plugin: Any
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    settings = with_state(state_runtime.settings, hooks="test-failing", hook_timeout_s=0.3)
    with build_state_store(settings, state_runtime.database, state_runtime.vault) as store:
        with pytest.raises(HookError) as caught:
            store.save(cid, me, sample_changes("1"), 0, base=ConversationState())
        assert str(caught.value) == (
            "hook test-failing failed on save: raised RuntimeError: database of the hook is down"
        )
        with pytest.raises(HookError, match=r"malformed state: state\.runs: must be a list"):
            store.restore(cid, me)
        with pytest.raises(HookError, match=r"delete_conversation: timed out after 0\.3 s"):
            store.delete(cid, me)


def test_the_store_is_chosen_from_the_settings(
    state_runtime: Runtime, hook_server: HookServer, plugin: Any
) -> None:
    rt = state_runtime
    plain = build_state_store(rt.settings, rt.database, rt.vault)
    assert isinstance(plain, DatabaseStateStore) and plain.joins_transaction
    assert isinstance(plain, StateStore)
    plain.close()
    hooked = with_state(rt.settings, hooks=hook_server.url, hook_secret=hook_server.secret)
    store = build_state_store(hooked, rt.database, rt.vault)
    assert isinstance(store, HookStateStore) and not store.joins_transaction
    assert isinstance(store, StateStore)
    store.close()
    validation = build_state_store(hooked, rt.database, rt.vault, validation=True)
    assert isinstance(validation, DatabaseStateStore)  # validation runs keep state with us
    validation.close()
    with pytest.raises(ConfigError, match=r"is not installed in search2o\.state_hooks"):
        build_state_store(with_state(rt.settings, hooks="no-such-hook"), rt.database, rt.vault)
    with pytest.raises(ConfigError, match="has no restore, delete_conversation"):
        build_state_store(with_state(rt.settings, hooks="test-incomplete"), rt.database, rt.vault)


def test_an_http_hook_needs_a_secret(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SEARCH2O_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("SEARCH2O_STATE__HOOKS", "https://hooks.example.com/state")
    with pytest.raises(ConfigError, match=r"state\.hook_secret must be at least 16"):
        load_settings()
    monkeypatch.setenv("SEARCH2O_STATE__HOOK_SECRET", "s")
    with pytest.raises(ConfigError, match=r"at least 16 characters"):
        load_settings()
    monkeypatch.setenv("SEARCH2O_STATE__HOOK_SECRET", "a-long-enough-secret")
    assert load_settings().state.hooks == "https://hooks.example.com/state"
    # the state travels in plain form: plain http only to loopback
    monkeypatch.setenv("SEARCH2O_STATE__HOOKS", "http://hooks.example.com/state")
    with pytest.raises(ConfigError, match="uses plain http to a remote host"):
        load_settings()
    monkeypatch.setenv("SEARCH2O_STATE__HOOKS", "http://127.0.0.1:9/state")
    assert load_settings().state.hooks == "http://127.0.0.1:9/state"


def test_hook_calls_from_many_threads_share_one_client(
    state_runtime: Runtime, hook_server: HookServer
) -> None:
    me = add_user(state_runtime)
    conversations = [new_conversation(state_runtime, me) for _ in range(6)]
    errors: list[BaseException] = []
    with hook_store(hook_server, state_runtime) as store:

        def work(cid: str) -> None:
            try:
                store.save(cid, me, sample_changes(cid), 0, base=ConversationState())
                assert store.restore(cid, me) is not None
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(c,)) for c in conversations]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert errors == []
    assert set(hook_server.hook.records) == set(conversations)
