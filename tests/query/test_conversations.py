"""Conversation and message operations on both backends, always as their owner."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from search2o import accounts
from search2o.accounts import Principal
from search2o.errors import InputError, NotFoundError
from search2o.query.conversations import validate_title
from search2o.query.turn import TurnEngine
from search2o.runtime import Runtime
from search2o.storage.models import Conversation, Message, RetrievalTrace
from tests.query.doubles import ScriptedChatModel, answering, counts

pytestmark = pytest.mark.slow


def add_user(runtime: Runtime, email: str, admin: bool = False) -> Principal:
    with runtime.database.session() as session:
        return Principal.of(accounts.create_user(session, email, is_admin=admin))


def turns(runtime: Runtime) -> TurnEngine:
    """A turn engine whose model answers at once (no embedding needed)."""
    model = ScriptedChatModel(answering("Noted."))
    return TurnEngine(
        runtime.database, runtime.knowledge, model, runtime.settings.chat, runtime.vault
    )


def start(runtime: Runtime, who: Principal, message: str) -> tuple[str, str, str]:
    """Open a conversation; return its id, the user message id and the answer id."""
    events = turns(runtime).ask(who, message)
    return (
        events[0].data["conversation_id"],
        events[0].data["user_message_id"],
        events[-1].data["message_id"],
    )


def test_list_shows_pinned_first_then_the_most_recently_used(runtime: Runtime) -> None:
    me = add_user(runtime, "ann@example.com")
    other = add_user(runtime, "bob@example.com")
    engine = turns(runtime)
    a, _, _ = start(runtime, me, "Alpha")
    b, _, _ = start(runtime, me, "Beta")
    c, _, _ = start(runtime, me, "Gamma")
    start(runtime, other, "Someone else's")
    assert [r.id for r in runtime.conversations.list_conversations(me)] == [c, b, a]

    engine.ask(me, "back to alpha", a)  # using a conversation moves it up
    assert [r.id for r in runtime.conversations.list_conversations(me)] == [a, c, b]
    latest = runtime.conversations.latest(me)
    assert latest is not None and latest.id == a

    pinned = runtime.conversations.update(me, b, pinned=True)
    assert pinned.pinned is True
    listed = runtime.conversations.list_conversations(me)
    assert [(r.id, r.pinned) for r in listed] == [(b, True), (a, False), (c, False)]
    assert [r.title for r in listed] == ["Beta", "Alpha", "Gamma"]
    assert [r.message_count for r in listed] == [2, 4, 2]
    assert all(r.last_used_at >= r.created_at for r in listed)
    # pinning is not using: the latest conversation is still the last one written to
    latest = runtime.conversations.latest(me)
    assert latest is not None and latest.id == a

    assert [r.id for r in runtime.conversations.list_conversations(me, limit=2)] == [b, a]
    assert [r.id for r in runtime.conversations.list_conversations(me, 2, 1)] == [a, c]
    assert runtime.conversations.list_conversations(me, offset=3) == []
    assert runtime.conversations.count(me) == 3
    assert runtime.conversations.count(other) == 1

    runtime.conversations.update(me, b, pinned=False)  # unpinning counts as a use (retention)
    assert [r.id for r in runtime.conversations.list_conversations(me)] == [b, a, c]

    for kwargs, field in [
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"offset": -1}, "offset"),
    ]:
        with pytest.raises(InputError) as info:
            runtime.conversations.list_conversations(me, **kwargs)
        assert info.value.field == field
    assert len(runtime.conversations.list_conversations(me, limit=200)) == 3


def test_rename_and_pin_validate_before_changing_anything(runtime: Runtime) -> None:
    me = runtime.local_principal()
    conversation_id, _, _ = start(runtime, me, "Original")
    renamed = runtime.conversations.update(me, conversation_id, title="  New\tname \n here ")
    assert renamed.title == "New name here" and renamed.pinned is False
    assert runtime.conversations.update(me, conversation_id, title="x" * 200).title == "x" * 200
    both = runtime.conversations.update(me, conversation_id, title="Both", pinned=True)
    assert (both.title, both.pinned) == ("Both", True)

    for bad in [
        "",
        "   ",
        "\n\t",
        "x" * 201,
        "bell\x07",
        "nul\x00",
        "escape\x1b[31m",
        "del\x7f",
        "unit\x1fsep",
        "lone\ud800",
    ]:
        with pytest.raises(InputError) as info:
            runtime.conversations.update(me, conversation_id, title=bad, pinned=False)
        assert info.value.field == "title", bad
    # nothing changed: not the title, and not the pin given alongside the bad title
    info_now = runtime.conversations.get(me, conversation_id)
    assert (info_now.title, info_now.pinned) == ("Both", True)

    assert validate_title(" a  b ") == "a b"
    with pytest.raises(InputError, match="the limit is 200"):
        validate_title("y" * 300)


def test_another_users_objects_are_answered_like_missing_ones(runtime: Runtime) -> None:
    ann = add_user(runtime, "ann@example.com")
    bob = add_user(runtime, "bob@example.com")
    admin = add_user(runtime, "admin@example.com", admin=True)
    conversation_id, question_id, answer_id = start(runtime, ann, "Private matter")
    ops = runtime.conversations

    def refused(who: Principal) -> list[str]:
        messages = []
        for call in (
            lambda: ops.get(who, conversation_id),
            lambda: ops.messages(who, conversation_id),
            lambda: ops.update(who, conversation_id, title="Mine now"),
            lambda: ops.update(who, conversation_id, pinned=True),
            lambda: ops.delete(who, conversation_id),
            lambda: ops.rate(who, answer_id, "down"),
            lambda: ops.rate(who, question_id, None),
        ):
            with pytest.raises(NotFoundError) as info:
                call()
            messages.append(str(info.value))
        return messages

    expected = [f"conversation {conversation_id!r} not found"] * 5
    expected += [f"message {answer_id!r} not found", f"message {question_id!r} not found"]
    assert refused(bob) == expected
    assert refused(admin) == expected  # admins do not read other people's conversations
    with pytest.raises(NotFoundError) as trace_refused:
        ops.trace(bob, answer_id)
    assert str(trace_refused.value) == f"message {answer_id!r} not found"
    assert ops.list_conversations(bob) == [] and ops.latest(bob) is None
    assert ops.list_conversations(admin) == []

    # nothing changed for the owner; the admin may read the trace
    mine = ops.get(ann, conversation_id)
    assert (mine.title, mine.pinned, mine.message_count) == ("Private matter", False, 2)
    assert [m.rating for m in ops.messages(ann, conversation_id)] == [None, None]
    assert ops.trace(admin, answer_id) == ops.trace(ann, answer_id)

    # and exactly the same errors once it is really missing
    ops.delete(ann, conversation_id)
    assert refused(bob) == expected
    with pytest.raises(NotFoundError) as gone:
        ops.trace(admin, answer_id)
    assert str(gone.value) == f"message {answer_id!r} not found"


def test_messages_come_back_in_order_with_their_fields(runtime: Runtime) -> None:
    me = runtime.local_principal()
    conversation_id, question_id, answer_id = start(runtime, me, "First")
    turns(runtime).ask(me, "Second", conversation_id)
    messages = runtime.conversations.messages(me, conversation_id)
    assert [(m.role, m.text) for m in messages] == [
        ("user", "First"),
        ("assistant", "Noted."),
        ("user", "Second"),
        ("assistant", "Noted."),
    ]
    assert [m.id for m in messages[:2]] == [question_id, answer_id]
    assert all(m.conversation_id == conversation_id for m in messages)
    assert all(m.status == "complete" and m.rating is None and m.agent is None for m in messages)
    assert [m.created_at for m in messages] == sorted(m.created_at for m in messages)


def test_rating_sets_changes_and_clears(runtime: Runtime) -> None:
    me = runtime.local_principal()
    conversation_id, question_id, answer_id = start(runtime, me, "Rate me")
    ops = runtime.conversations

    def rated_at() -> object:
        with runtime.database.session() as session:
            return session.scalar(select(Message.rated_at).where(Message.id == answer_id))

    assert ops.rate(me, answer_id, "up").rating == "up"
    assert rated_at() is not None
    assert ops.rate(me, answer_id, "down").rating == "down"
    assert [m.rating for m in ops.messages(me, conversation_id)] == [None, "down"]
    cleared = ops.rate(me, answer_id, None)
    assert cleared.rating is None and rated_at() is None

    with pytest.raises(InputError) as info:
        ops.rate(me, question_id, "up")
    assert info.value.field == "message_id"
    with pytest.raises(NotFoundError):
        ops.rate(me, "f" * 32, "up")
    assert [m.rating for m in ops.messages(me, conversation_id)] == [None, None]


def test_trace_is_kept_for_answers_only(runtime: Runtime) -> None:
    me = runtime.local_principal()
    _, question_id, answer_id = start(runtime, me, "Trace me")
    trace = runtime.conversations.trace(me, answer_id)
    assert trace["model"] == "test/scripted-1"
    assert trace["decision"] == "direct" and trace["tool_calls"] == []
    assert trace["status"] == "complete"
    assert set(trace["timings"]) >= {"total_ms", "model_ms", "tools_ms", "first_token_ms"}
    with pytest.raises(NotFoundError, match="has no retrieval trace"):
        runtime.conversations.trace(me, question_id)
    with pytest.raises(NotFoundError, match="not found"):
        runtime.conversations.trace(me, "nope")


def test_delete_removes_messages_ratings_and_traces(runtime: Runtime) -> None:
    me = runtime.local_principal()
    doomed, _, doomed_answer = start(runtime, me, "Doomed")
    turns(runtime).ask(me, "More", doomed)
    kept, _, kept_answer = start(runtime, me, "Kept")
    runtime.conversations.rate(me, doomed_answer, "up")
    runtime.conversations.rate(me, kept_answer, "down")
    assert counts(runtime) == (2, 6, 3)

    runtime.conversations.delete(me, doomed)
    assert counts(runtime) == (1, 2, 1)
    with runtime.database.session() as session:
        assert session.get(Conversation, doomed) is None
        assert (
            session.scalar(
                select(func.count()).select_from(Message).where(Message.conversation_id == doomed)
            )
            == 0
        )
        assert session.get(RetrievalTrace, doomed_answer) is None
        assert session.scalar(select(func.count()).where(Message.rating.is_not(None))) == 1
        assert session.get(RetrievalTrace, kept_answer) is not None
    with pytest.raises(NotFoundError):
        runtime.conversations.get(me, doomed)
    with pytest.raises(NotFoundError):
        runtime.conversations.delete(me, doomed)
    assert [r.id for r in runtime.conversations.list_conversations(me)] == [kept]
    assert runtime.conversations.messages(me, kept)[1].rating == "down"


def test_a_title_written_from_a_message_has_no_control_characters(runtime: Runtime) -> None:
    me = runtime.local_principal()
    events = turns(runtime).ask(me, "\x1b[2J\x1b[31mFAKE ALERT\x1b[0m what is rrf?")
    title = runtime.conversations.get(me, events[0].data["conversation_id"]).title
    assert title == "[2J [31mFAKE ALERT [0m what is rrf?"
