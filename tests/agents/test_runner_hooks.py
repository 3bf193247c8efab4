"""With state hooks set, runs keep their state with the enterprise; validation runs with us."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from search2o.config import Settings, StateSettings
from search2o.runtime import Runtime
from tests.agents.test_runner import TRAVEL, run
from tests.memory.conftest import add_user
from tests.state.conftest import hook_server, state_rows  # noqa: F401 - fixture
from tests.state.hook_server import HookServer

pytestmark = pytest.mark.slow


@pytest.fixture
def hooked(settings: Settings, hook_server: HookServer) -> Iterator[Runtime]:  # noqa: F811
    state = StateSettings(hooks=hook_server.url, hook_secret=hook_server.secret)
    runtime = Runtime(settings.model_copy(update={"state": state}))
    try:
        yield runtime
    finally:
        runtime.close()


def test_runs_use_the_hooks_and_validation_runs_our_store(
    hooked: Runtime,
    hook_server: HookServer,  # noqa: F811
) -> None:
    me = add_user(hooked)
    real = run(hooked, me, TRAVEL, "Book me a flight")
    assert real["status"] == "paused"
    assert real["conversation_id"] in hook_server.hook.records  # the enterprise keeps it
    assert state_rows(hooked, real["conversation_id"]) == (0, 0)
    answered = run(hooked, me, TRAVEL, "KLM", real["conversation_id"])
    assert answered["text"] == "Noted: KLM"
    assert hook_server.hook.records[real["conversation_id"]].version == 2

    validation = run(hooked, me, TRAVEL, "Which airline?", validation=True)
    assert validation["text"] == "You like: The user prefers to fly KLM"  # remembered
    assert validation["conversation_id"] not in hook_server.hook.records
    assert state_rows(hooked, validation["conversation_id"]) != (0, 0)  # kept with us


def test_a_chat_follow_up_asks_the_hook_only_after_an_agents_answer(
    hooked: Runtime,
    hook_server: HookServer,  # noqa: F811
) -> None:
    me = add_user(hooked)
    events = hooked.turns.ask(me, "hello")
    chat_conversation = events[0].data["conversation_id"]
    hook_server.requests.clear()
    assert hooked.agent_runner.waiting_agent(me, chat_conversation) is None
    assert hook_server.requests == []  # no agent ever answered here: no restore
    asked = run(hooked, me, TRAVEL, "Book me a flight")
    hook_server.requests.clear()
    assert hooked.agent_runner.waiting_agent(me, asked["conversation_id"]) == "travel"
    assert hook_server.requests == ["restore"]
