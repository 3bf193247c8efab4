"""With state hooks set, runs keep their state with the enterprise; validation runs with us."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from search2o.agents.definition import parse_definition
from search2o.api.app import create_app
from search2o.config import Settings
from search2o.runtime import Runtime
from search2o.state.settings import StateSettings
from search2o.storage.models import (
    Conversation,
    Message,
    RetrievalTrace,
    StateChange,
    StateSnapshot,
    utcnow,
)
from search2o.storage.models import ConversationState as StateHead
from search2o.storage.run_models import Run
from tests.agents.test_runner import TRAVEL, run
from tests.api.test_api import add_user as add_user_with_token
from tests.api.test_api import serve
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


def _rows_of(runtime: Runtime, conversation: str) -> dict[str, int]:
    """Rows our database holds for one conversation, by table."""
    tables = {
        "conversations": (Conversation, Conversation.id),
        "messages": (Message, Message.conversation_id),
        "state_heads": (StateHead, StateHead.conversation_id),
        "state_changes": (StateChange, StateChange.conversation_id),
        "state_snapshots": (StateSnapshot, StateSnapshot.conversation_id),
        "runs": (Run, Run.conversation_id),
    }
    with runtime.database.session() as session:
        found = {
            name: int(
                session.scalar(
                    select(func.count()).select_from(table).where(column == conversation)
                )
                or 0
            )
            for name, (table, column) in tables.items()
        }
        traces = session.scalar(
            select(func.count())
            .select_from(RetrievalTrace)
            .join(Message, Message.id == RetrievalTrace.message_id)
            .where(Message.conversation_id == conversation)
        )
    return {**found, "traces": int(traces or 0)}


def test_with_hooks_the_whole_agent_conversation_is_the_enterprises(
    hooked: Runtime,
    hook_server: HookServer,  # noqa: F811
) -> None:
    """Ask, then answer: our database keeps only the entry; the view comes from the hook."""
    auth = add_user_with_token(hooked, "ann@example.com")
    add_user_with_token(hooked, "root@example.com", admin=True)
    admin = hooked.principal_for("root@example.com")  # an admin stores the agent
    hooked.agents.put(json.dumps(TRAVEL).encode(), name="travel", fmt="json", admin=admin)
    with serve(create_app(hooked.settings, runtime=hooked)) as client:

        def chat(body: dict[str, object]) -> dict[str, object]:
            reply = client.post("/v1/chat", json={**body, "stream": False}, headers=auth)
            assert reply.status_code == 200, reply.text
            data: dict[str, object] = reply.json()
            return data

        asked = chat({"message": "Book me a flight", "agent": "travel"})
        assert asked["status"] == "paused"
        conversation = str(asked["conversation_id"])
        answered = chat({"message": "KLM", "conversation_id": conversation})
        assert answered["text"] == "Noted: KLM"  # the waiting question took it
        hooked.chat.runs.sweep(now=utcnow() + timedelta(days=1))  # run events are transient
        assert _rows_of(hooked, conversation) == {
            "conversations": 1,  # the entry: sealed title, last use, owner
            "messages": 0,
            "state_heads": 0,
            "state_changes": 0,
            "state_snapshots": 0,
            "runs": 0,
            "traces": 0,
        }
        view = client.get(f"/v1/conversations/{conversation}", headers=auth).json()
        assert [(m["role"], m["text"]) for m in view["messages"]] == [
            ("user", "Book me a flight"),
            ("assistant", "Which airline do you prefer?"),
            ("user", "KLM"),
            ("assistant", "Noted: KLM"),
        ]
        assert view["message_count"] == 4
        record = hook_server.hook.records[conversation]
        assert [m["text"] for m in record.state["transcript"]] == [
            m["text"] for m in view["messages"]
        ]
        # A plain follow-up is the agent's too: nothing is ever stored with us.
        more = chat({"message": "Which airline?", "conversation_id": conversation})
        assert more["agent"] == "travel"
        assert _rows_of(hooked, conversation)["messages"] == 0
        # Delete asks the hook to delete it too.
        assert client.delete(f"/v1/conversations/{conversation}", headers=auth).status_code == 204
        assert conversation not in hook_server.hook.records
        assert conversation in hook_server.hook.tombstones


def test_an_orphaned_run_in_a_hooks_conversation_adds_no_message_of_ours(
    hooked: Runtime,
    hook_server: HookServer,  # noqa: F811
) -> None:
    """The sweeper interrupts it, but the transcript is the enterprise's: nothing is stored."""
    me = add_user(hooked)
    runs = hooked.chat.runs
    run_id = runs.create(me, "travel")
    definition = parse_definition(TRAVEL, profiles=list(hooked.settings.chat.profiles))
    prepared = hooked.agent_runner.prepare(me, definition, "Book me a flight")

    async def first_event() -> str:
        # The writer stops after the question, as if its process died there: the run is linked
        # to its conversation and stays `running`, recording nothing.
        note = functools.partial(runs.note_stored, run_id)
        events = hooked.agent_runner.run(prepared, None, note)
        event = await anext(aiter(events))
        await events.aclose()
        return str(event.data["conversation_id"])

    conversation = asyncio.run(first_event())
    assert runs.info(me, run_id).conversation_id == conversation
    assert runs.sweep(now=utcnow() + timedelta(seconds=60)).interrupted == 1
    assert runs.info(me, run_id).status == "interrupted"
    assert _rows_of(hooked, conversation)["messages"] == 0
