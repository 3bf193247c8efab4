"""Chat turns on both backends: lazy conversations, history, tools, citations, failures.

The database, Knowledge Store (with the real embedding model) and turn engine are real; where
a test needs the model to behave in a particular way it uses a scripted implementation of the
``ChatModel`` protocol (tests/query/doubles.py).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from sqlalchemy import select

from search2o import accounts
from search2o.accounts import Principal
from search2o.errors import InputError, NotFoundError, ProviderError
from search2o.events import Event
from search2o.knowledge.store import KnowledgeStore
from search2o.providers.builtin_chat import NO_DOCUMENTS
from search2o.providers.chat import ChatMessage, ToolCall
from search2o.query.conversations import open_message
from search2o.query.turn import TurnEngine
from search2o.query.websearch import build_web_search
from search2o.runtime import Runtime
from search2o.storage.models import Chunk, Conversation, Message, RetrievalTrace
from tests.conftest import MemoEmbedder, free_port
from tests.query.doubles import (
    DOCS,
    PARKING,
    SALARIES,
    ScriptedChatModel,
    SlowEmbedder,
    Step,
    answering,
    counts,
    ingest,
    last_user,
    open_runtime,
    passages,
    pieces,
    searching,
    searxng,
    web_settings,
)

pytestmark = pytest.mark.slow

BIKES = "where do I park my bicycle?"


def add_user(runtime: Runtime, email: str, groups: tuple[str, ...] = ()) -> Principal:
    with runtime.database.session() as session:
        return Principal.of(accounts.create_user(session, email, groups=list(groups)))


def engine(
    runtime: Runtime, model: Any = None, *, web_url: str | None = None, **chat: Any
) -> TurnEngine:
    """A turn engine on the runtime's database and Knowledge Store."""
    updates = dict(chat)
    if web_url is not None:
        updates["web_search"] = web_settings(web_url)
    settings = runtime.settings.chat.model_copy(update=updates)
    web = build_web_search(settings.web_search)
    return TurnEngine(
        runtime.database,
        runtime.knowledge,
        model or runtime.chat_model,
        settings,
        runtime.vault,
        web,
    )


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def only(events: list[Event], kind: str) -> list[dict[str, Any]]:
    return [e.data for e in events if e.kind == kind]


def done(events: list[Event]) -> dict[str, Any]:
    assert events[-1].kind == "done", events[-1]
    return events[-1].data


@dataclass(frozen=True)
class Stored:
    """A stored message with its sealed body opened."""

    id: str
    seq: int
    role: str
    text: str
    citations: list[dict[str, Any]]
    status: str
    searched: bool


def stored_messages(runtime: Runtime, conversation_id: str) -> list[Stored]:
    with runtime.database.session() as session:
        owner = session.get(Conversation, conversation_id)
        assert owner is not None
        sealer = runtime.vault.sealer(session, conversation_id, owner.user_id)
        rows = session.scalars(
            select(Message).where(Message.conversation_id == conversation_id).order_by(Message.seq)
        )
        return [
            Stored(m.id, m.seq, m.role, *open_message(sealer, m), m.status, m.searched)
            for m in rows
        ]


def trace_of(runtime: Runtime, message_id: str) -> dict[str, Any]:
    with runtime.database.session() as session:
        row = session.get(RetrievalTrace, message_id)
        message = session.get(Message, message_id)
        assert row is not None and message is not None
        owner = session.get(Conversation, message.conversation_id)
        assert owner is not None
        sealer = runtime.vault.sealer(session, owner.id, owner.user_id)
        return dict(sealer.open("trace", row.sealed))


# ---------------------------------------------------------------------------------------------
# the turn and its transcript
# ---------------------------------------------------------------------------------------------


def test_a_turn_streams_its_events_and_stores_the_transcript(runtime: Runtime) -> None:
    ids = ingest(runtime, DOCS)
    me = runtime.local_principal()
    events = runtime.turns.ask(me, f"  {BIKES}\n")

    order = kinds(events)
    assert order[0] == "conversation" and order[1] == "tool_call" and order[-1] == "done"
    assert order.count("conversation") == order.count("done") == 1
    assert "error" not in order
    opened = events[0].data
    assert opened["created"] is True and opened["title"] == BIKES
    assert only(events, "tool_call") == [
        {"id": "call_1", "name": "search_knowledge", "arguments": {"query": BIKES}}
    ]
    final = done(events)
    assert final["conversation_id"] == opened["conversation_id"]
    assert "".join(d["text"] for d in only(events, "delta")) == final["text"]
    assert final["text"].startswith("Bicycles are parked in the basement garage")
    assert final["searched"] is True
    assert final["citations"] == only(events, "citation")
    assert [c["document_id"] for c in final["citations"]] == [ids["parking.md"]]
    assert final["timings"]["total_ms"] >= final["timings"]["first_token_ms"] > 0

    user, answer = stored_messages(runtime, opened["conversation_id"])
    assert (user.id, user.role, user.text, user.seq) == (
        opened["user_message_id"],
        "user",
        BIKES,
        1,
    )
    assert (answer.id, answer.role, answer.seq) == (final["message_id"], "assistant", 2)
    assert answer.text == final["text"] and answer.citations == final["citations"]
    assert answer.status == "complete" and answer.searched
    assert trace_of(runtime, answer.id)["status"] == "complete"
    assert counts(runtime) == (1, 2, 1)


def test_no_conversation_exists_before_a_message_and_a_failed_prepare_writes_nothing(
    runtime: Runtime,
) -> None:
    ann = add_user(runtime, "ann@example.com")
    bob = add_user(runtime, "bob@example.com")
    turns = engine(runtime, ScriptedChatModel(answering("Noted.")))
    assert counts(runtime) == (0, 0, 0)
    assert runtime.conversations.list_conversations(ann) == []

    prepared = turns.prepare(ann, "first words")
    assert prepared.conversation_id is None and prepared.message == "first words"
    assert counts(runtime) == (0, 0, 0)  # preparing writes nothing

    limit = runtime.settings.chat.max_message_chars
    for bad in ("", "   \n\t ", "x" * (limit + 1)):
        with pytest.raises(InputError) as info:
            turns.prepare(ann, bad)
        assert info.value.field == "message"
    assert counts(runtime) == (0, 0, 0)
    with pytest.raises(NotFoundError) as missing:
        turns.ask(ann, "hello", "0" * 32)
    assert str(missing.value) == f"conversation {'0' * 32!r} not found"
    assert counts(runtime) == (0, 0, 0)
    assert turns.prepare(ann, "x" * limit).message == "x" * limit

    events = list(turns.run_sync(prepared))
    conversation_id = events[0].data["conversation_id"]
    assert counts(runtime) == (1, 2, 1)  # the conversation, question and answer, answer's trace
    [listed] = runtime.conversations.list_conversations(ann)
    assert listed.id == conversation_id and listed.message_count == 2

    # continuing: the same conversation, not created; another user's id is just missing
    again = turns.ask(ann, "second words", conversation_id)
    assert again[0].data["created"] is False
    assert again[0].data["conversation_id"] == conversation_id
    with pytest.raises(NotFoundError) as foreign:
        turns.ask(bob, "let me in", conversation_id)
    assert str(foreign.value) == f"conversation {conversation_id!r} not found"
    assert runtime.conversations.get(ann, conversation_id).message_count == 4


def test_the_title_comes_from_the_first_message(runtime: Runtime) -> None:
    me = runtime.local_principal()
    first = "Hello   there,\n how are you doing today? " + "Tell me everything about it. " * 4
    events = runtime.turns.ask(me, first)
    title = events[0].data["title"]
    assert len(title) <= 80 and title.endswith("…")
    assert title.startswith("Hello there, how are you doing today? Tell me")
    assert "\n" not in title and "  " not in title
    conversation_id = events[0].data["conversation_id"]
    runtime.turns.ask(me, "thanks!", conversation_id)
    assert runtime.conversations.get(me, conversation_id).title == title
    short = runtime.turns.ask(me, "hi")
    assert short[0].data["title"] == "hi"


@pytest.mark.parametrize(("limit", "expected"), [(20, 4), (2, 2), (0, 0)])
def test_history_is_passed_to_the_model(runtime: Runtime, limit: int, expected: int) -> None:
    model = ScriptedChatModel(lambda messages, tools: pieces(f"Answer {len(model.calls)}."))
    turns = engine(runtime, model, history_messages=limit, summaries=False)
    me = runtime.local_principal()
    first = turns.ask(me, "Question one?")
    conversation_id = first[0].data["conversation_id"]
    turns.ask(me, "Question two?", conversation_id)
    third = turns.ask(me, "Question three?", conversation_id)
    turns.ask(me, "Unrelated new thread")

    transcript = [
        ("user", "Question one?"),
        ("assistant", "Answer 1."),
        ("user", "Question two?"),
        ("assistant", "Answer 2."),
    ]
    call = model.calls[2]
    assert call.messages[0].role == "system"
    assert runtime.settings.chat.system_prompt in call.messages[0].content
    assert "Today is " in call.messages[0].content
    got = [(m.role, m.content) for m in call.messages[1:]]
    assert got == [*transcript[len(transcript) - expected :], ("user", "Question three?")]
    assert done(third)["text"] == "Answer 3."
    # a new conversation starts without history
    assert [(m.role, m.content) for m in model.calls[3].messages[1:]] == [
        ("user", "Unrelated new thread")
    ]
    packed = trace_of(runtime, done(third)["message_id"])["packed"]
    assert packed["history_messages"] == expected
    assert packed["history_chars"] == sum(
        len(c) for _, c in transcript[len(transcript) - expected :]
    )


# ---------------------------------------------------------------------------------------------
# tools and citations
# ---------------------------------------------------------------------------------------------


def _two_searches(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    return [("search_knowledge", "vacation days per year"), ("search_knowledge", BIKES)]


def _cite_all(messages: list[ChatMessage]) -> list[Step]:
    numbers = sorted({p.number for p in passages(messages)})
    return pieces("Here is what I found " + " ".join(f"[{n}]" for n in numbers) + ".")


def section_of(runtime: Runtime, chunk_ids: set[int]) -> dict[int, tuple[int, tuple[str, ...]]]:
    """Each chunk's section: its document and heading path."""
    with runtime.database.session() as session:
        rows = session.scalars(select(Chunk).where(Chunk.id.in_(chunk_ids)))
        return {c.id: (c.document_id, tuple(c.heading_path)) for c in rows}


def test_several_tool_calls_run_concurrently_and_number_sources_per_section(
    runtime: Runtime, embedder: MemoEmbedder
) -> None:
    ids = ingest(runtime, {**DOCS, "salaries.md": SALARIES})
    slow = SlowEmbedder(embedder, 0.4)
    knowledge = KnowledgeStore(runtime.database, slow, runtime.settings.knowledge)
    model = ScriptedChatModel(searching(_cite_all, _two_searches))
    turns = TurnEngine(runtime.database, knowledge, model, runtime.settings.chat, runtime.vault)
    me = runtime.local_principal()

    runs = [turns.ask(me, "Two things please"), turns.ask(me, "Two things please")]

    # both searches embedded their query at the same time (the overlap itself, not a wall
    # time: a timed assertion fails on a loaded machine)
    assert slow.peak == 2
    traces = [trace_of(runtime, done(events)["message_id"]) for events in runs]
    for events, trace in zip(runs, traces, strict=True):
        assert [c["id"] for c in only(events, "tool_call")] == ["call_1", "call_2"]
        assert [(c["name"], c["query"]) for c in trace["tool_calls"]] == _two_searches([])
        # numbers follow the calls in order, then each call's hits in rank order, one per
        # document section (document and heading path)
        hit_ids = {h["chunk_id"] for c in trace["tool_calls"] for h in c["hits"]}
        document_of = section_of(runtime, hit_ids)
        expected: dict[tuple[int, tuple[str, ...]], int] = {}
        for call in trace["tool_calls"]:
            for hit in call["hits"]:
                expected.setdefault(document_of[hit["chunk_id"]], len(expected) + 1)
        packed = trace["packed"]["passages"]
        assert [p["chunk_id"] for p in packed] == [
            h["chunk_id"] for c in trace["tool_calls"] for h in c["hits"]
        ]
        for passage in packed:
            assert expected[document_of[passage["chunk_id"]]] == passage["number"]
        assert len(expected) >= 2 and {d for d, _ in expected} <= set(ids.values())
        citations = done(events)["citations"]
        assert [c["number"] for c in citations] == list(range(1, len(expected) + 1))
        sections = [(c["document_id"], tuple(c["heading_path"])) for c in citations]
        assert len(set(sections)) == len(citations)
        for citation, section in zip(citations, sections, strict=True):
            assert citation["number"] == expected[section]
            assert citation["chunk_ids"] == list(
                dict.fromkeys(p["chunk_id"] for p in packed if p["number"] == citation["number"])
            )
    # the model saw the same numbered passages both times: numbering is deterministic
    answer_calls = [call for call in model.calls if call.messages[-1].role == "tool"]
    assert len(answer_calls) == 2
    seen = [[(p.number, p.title, p.text) for p in passages(c.messages)] for c in answer_calls]
    assert seen[0] == seen[1]
    assert traces[0]["packed"]["passages"] == traces[1]["packed"]["passages"]
    assert done(runs[0])["citations"] == done(runs[1])["citations"]


def test_tool_messages_answer_each_call(runtime: Runtime) -> None:
    ingest(runtime, DOCS)
    model = ScriptedChatModel(searching(_cite_all, _two_searches))
    engine(runtime, model).ask(runtime.local_principal(), "Two things please")
    first, second = model.calls
    assert first.tools == ["search_knowledge"]
    assert second.tools == []
    assistant, *tool_messages = second.messages[-3:]
    assert assistant.role == "assistant" and [c.id for c in assistant.tool_calls] == [
        "call_1",
        "call_2",
    ]
    assert [(m.role, m.tool_call_id) for m in tool_messages] == [
        ("tool", "call_1"),
        ("tool", "call_2"),
    ]
    for message in tool_messages:
        assert message.passages
        for p in message.passages:
            assert f"[{p.number}] {p.title} — {p.location}\n{p.text}" in message.content


def test_citations_pointing_outside_the_retrieved_set_are_removed(runtime: Runtime) -> None:
    ids = ingest(runtime, {"parking.md": PARKING})
    answer = "Bicycles go to the basement garage [1]. Mars has canals [7]. See [1, 7][9]."
    turns = engine(runtime, ScriptedChatModel(searching(answer)))
    me = runtime.local_principal()
    events = turns.ask(me, BIKES)
    final = done(events)
    assert final["text"] == "Bicycles go to the basement garage [1]. Mars has canals . See [1]."
    assert [c["number"] for c in only(events, "citation")] == [1]
    assert [c["document_id"] for c in final["citations"]] == [ids["parking.md"]]
    assert "[7]" not in "".join(d["text"] for d in only(events, "delta"))
    [_, stored] = stored_messages(runtime, final["conversation_id"])
    assert stored.text == final["text"] and stored.citations == final["citations"]

    # a direct answer retrieved nothing, so every marker in it goes
    direct = engine(runtime, ScriptedChatModel(answering("As everyone knows [1], yes [2]."))).ask(
        me, "Is the sky blue?"
    )
    assert done(direct)["text"] == "As everyone knows , yes ."
    assert done(direct)["citations"] == [] and only(direct, "citation") == []
    assert done(direct)["searched"] is False


def test_search_knowledge_is_not_offered_when_the_user_can_read_nothing(
    runtime: Runtime,
) -> None:
    ids = ingest(runtime, {"salaries.md": SALARIES}, groups=["hr"])
    outsider = add_user(runtime, "dev@example.com", ("eng",))
    insider = add_user(runtime, "hr@example.com", ("hr",))
    question = "what is the salary band for level 3 engineers?"

    refused = runtime.turns.ask(outsider, question)
    assert only(refused, "tool_call") == [] and only(refused, "citation") == []
    assert done(refused)["text"] == NO_DOCUMENTS
    assert done(refused)["searched"] is False
    trace = trace_of(runtime, done(refused)["message_id"])
    assert trace["tools_offered"] == [] and trace["decision"] == "direct"

    answered = runtime.turns.ask(insider, question)
    assert [c["name"] for c in only(answered, "tool_call")] == ["search_knowledge"]
    assert [c["document_id"] for c in done(answered)["citations"]] == [ids["salaries.md"]]
    assert "compensation committee" in done(answered)["text"]
    assert trace_of(runtime, done(answered)["message_id"])["tools_offered"] == ["search_knowledge"]

    # the same holds for any model: the tool list it is given is empty
    model = ScriptedChatModel(answering("Nothing to search."))
    engine(runtime, model).ask(outsider, question)
    engine(runtime, model).ask(insider, question)
    assert [call.tools for call in model.calls] == [[], ["search_knowledge"]]


def test_web_search_is_offered_only_when_configured(
    runtime: Runtime, embedder: MemoEmbedder
) -> None:
    ingest(runtime, {"parking.md": PARKING})
    me = runtime.local_principal()
    plain = runtime.turns.ask(me, BIKES)
    assert [c["name"] for c in only(plain, "tool_call")] == ["search_knowledge"]
    assert trace_of(runtime, done(plain)["message_id"])["tools_offered"] == ["search_knowledge"]

    many = [
        {"title": f"Page {i}", "url": f"https://example.org/{i}", "content": "Bicycles park."}
        for i in range(7)
    ]
    with (
        searxng(many) as web,
        open_runtime(runtime.settings, embedder, web_search=web_settings(web.base_url, k=3)) as rt,
    ):
        events = rt.turns.ask(me, BIKES)
    calls = only(events, "tool_call")
    assert [c["name"] for c in calls] == ["search_knowledge", "web_search"]
    assert web.paths == ["/search"]
    assert web.requests == [{"q": [BIKES], "format": ["json"]}]
    trace = trace_of(runtime, done(events)["message_id"])
    assert trace["tools_offered"] == ["search_knowledge", "web_search"]
    web_call = trace["tool_calls"][1]
    assert web_call["name"] == "web_search" and web_call["query"] == BIKES
    assert web_call["hits"] == [{"url": f"https://example.org/{i}"} for i in range(3)]
    packed = trace["packed"]["passages"]
    web_numbers = [p["number"] for p in packed if p["url"] is not None]
    knowledge_numbers = {p["number"] for p in packed if p["url"] is None}
    assert web_numbers == [max(knowledge_numbers) + i for i in (1, 2, 3)]
    assert [p["url"] for p in packed if p["url"]] == [f"https://example.org/{i}" for i in range(3)]
    for citation in done(events)["citations"]:
        if citation["url"] is not None:
            assert citation["document_id"] is None and citation["chunk_ids"] == []
            assert citation["source"] == citation["url"]


def _closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


@pytest.mark.parametrize("failure", ["status 500", "unreachable"])
def test_a_failing_web_search_is_traced_and_the_answer_still_completes(
    runtime: Runtime, failure: str
) -> None:
    ids = ingest(runtime, {"parking.md": PARKING})
    me = runtime.local_principal()
    with searxng(status=500) as web:
        url = web.base_url if failure == "status 500" else _closed_port_url()
        events = engine(runtime, web_url=url).ask(me, BIKES)
    assert "error" not in kinds(events)
    final = done(events)
    assert final["text"].startswith("Bicycles are parked in the basement garage")
    assert [c["document_id"] for c in final["citations"]] == [ids["parking.md"]]
    trace = trace_of(runtime, final["message_id"])
    assert trace["status"] == "complete"
    knowledge, web_call = trace["tool_calls"]
    assert "error" not in knowledge and knowledge["hits"]
    assert web_call["name"] == "web_search"
    assert re.match(r"web search at http://127\.0\.0\.1:\d+/search failed: ", web_call["error"])
    assert [p["url"] for p in trace["packed"]["passages"]] == [None] * len(knowledge["hits"])
    [_, answer] = stored_messages(runtime, final["conversation_id"])
    assert answer.status == "complete"


def test_web_searches_of_one_turn_run_concurrently(runtime: Runtime) -> None:
    queries = [("web_search", "bicycle parking"), ("web_search", "garage rules")]
    model = ScriptedChatModel(searching(_cite_all, lambda messages: queries))
    with searxng(delay=0.4) as web:
        events = engine(runtime, model, web_url=web.base_url).ask(
            runtime.local_principal(), "Search the web twice"
        )
    assert web.peak == 2  # both requests were in flight at once
    assert sorted(q["q"][0] for q in web.requests) == ["bicycle parking", "garage rules"]
    final = done(events)
    # the same page found by both calls has one number
    urls = [c["url"] for c in final["citations"]]
    assert urls == ["https://example.org/bicycles", "https://example.org/garage"]


def test_bad_tool_calls_are_traced_and_capped_and_the_answer_continues(runtime: Runtime) -> None:
    ingest(runtime, {"parking.md": PARKING})

    def script(messages: list[ChatMessage], tools: Any) -> list[Step]:
        if messages[-1].role == "tool":
            return pieces(f"Read {len(passages(messages))} passages.")
        return [
            ToolCall("a", "delete_everything", {"query": "x"}),
            ToolCall("b", "search_knowledge", {}),
            ToolCall("c", "search_knowledge", {"query": "bicycle"}),
            ToolCall("d", "search_knowledge", {"query": "kitchen"}),
        ]

    model = ScriptedChatModel(script)
    events = engine(runtime, model, max_tool_calls=3).ask(runtime.local_principal(), "go")
    assert [c["id"] for c in only(events, "tool_call")] == ["a", "b", "c"]
    trace = trace_of(runtime, done(events)["message_id"])
    assert [c.get("error") for c in trace["tool_calls"]] == [
        "unknown tool 'delete_everything'",
        "query: the tool call needs a non-empty string `query`",
        None,
    ]
    contents = [m.content for m in model.calls[1].messages if m.role == "tool"]
    assert contents[:2] == [
        "error: unknown tool 'delete_everything'",
        "error: query: the tool call needs a non-empty string `query`",
    ]
    assert done(events)["text"] == f"Read {len(trace['tool_calls'][2]['hits'])} passages."


# ---------------------------------------------------------------------------------------------
# failures, interruptions, deletion
# ---------------------------------------------------------------------------------------------


def test_a_model_failure_mid_answer_stores_the_partial_answer_as_failed(runtime: Runtime) -> None:
    me = runtime.local_principal()
    good = engine(runtime, ScriptedChatModel(answering("All fine.")))
    first = good.ask(me, "Start")
    conversation_id = first[0].data["conversation_id"]

    failing = ScriptedChatModel(
        lambda m, t: [*pieces("Partial answer"), ProviderError("upstream timed out"), *pieces("!")]
    )
    events = engine(runtime, failing).ask(me, "Go on", conversation_id)
    assert kinds(events) == ["conversation", "delta", "delta", "error"]
    error = events[-1].data
    assert error["error"] == "ProviderError" and error["message"] == "upstream timed out"

    broken = ScriptedChatModel(lambda m, t: [*pieces("Half"), RuntimeError("secret internals")])
    crashed = engine(runtime, broken).ask(me, "Again", conversation_id)
    assert crashed[-1].kind == "error"
    assert crashed[-1].data["error"] == "InternalError"
    assert "secret" not in crashed[-1].data["message"]

    after = good.ask(me, "Still there?", conversation_id)
    assert done(after)["text"] == "All fine."
    transcript = [(m.role, m.text, m.status) for m in stored_messages(runtime, conversation_id)]
    assert transcript == [
        ("user", "Start", "complete"),
        ("assistant", "All fine.", "complete"),
        ("user", "Go on", "complete"),
        ("assistant", "Partial answer", "failed"),
        ("user", "Again", "complete"),
        ("assistant", "Half", "failed"),
        ("user", "Still there?", "complete"),
        ("assistant", "All fine.", "complete"),
    ]
    messages = stored_messages(runtime, conversation_id)
    assert error["message_id"] == messages[3].id
    assert crashed[-1].data["message_id"] == messages[5].id
    assert trace_of(runtime, messages[3].id)["status"] == "failed"
    assert runtime.conversations.get(me, conversation_id).message_count == 8


def test_stopping_the_stream_early_stores_an_interrupted_answer(runtime: Runtime) -> None:
    ingest(runtime, {"parking.md": PARKING})
    model = ScriptedChatModel(searching("Bicycles go to the basement garage [1] and more words."))
    turns = engine(runtime, model)
    stream = cast(
        Generator[Event, None, None],
        turns.run_sync(turns.prepare(runtime.local_principal(), BIKES)),
    )
    received = []
    for event in stream:
        received.append(event)
        if event.kind == "delta" and len(only(received, "delta")) == 3:
            break
    stream.close()
    conversation_id = received[0].data["conversation_id"]
    _user, answer = stored_messages(runtime, conversation_id)
    assert answer.status == "interrupted"
    assert answer.text == "Bicycles go to"
    assert answer.searched and answer.citations == []
    trace = trace_of(runtime, answer.id)
    assert trace["status"] == "interrupted" and trace["tool_calls"][0]["hits"]


def test_deleting_the_conversation_while_a_turn_runs_keeps_it_deleted(runtime: Runtime) -> None:
    me = runtime.local_principal()
    turns = engine(runtime, ScriptedChatModel(answering("A long answer that keeps going.")))
    stream = turns.run_sync(turns.prepare(me, "Tell me a story"))
    events = [next(stream), next(stream)]
    assert kinds(events) == ["conversation", "delta"]
    conversation_id = events[0].data["conversation_id"]
    runtime.conversations.delete(me, conversation_id)
    events.extend(stream)
    assert "done" not in kinds(events)  # the client is told nothing was kept
    assert events[-1].kind == "error"
    assert events[-1].data["error"] == "NotFoundError"
    assert "was deleted while the answer was written" in events[-1].data["message"]
    assert events[-1].data["message_id"] is None
    assert counts(runtime) == (0, 0, 0)
    with pytest.raises(NotFoundError):
        runtime.conversations.get(me, conversation_id)
    assert runtime.conversations.list_conversations(me) == []

    # deleted between prepare and run: the turn refuses and writes nothing
    first = turns.ask(me, "Start")
    conversation_id = first[0].data["conversation_id"]
    prepared = turns.prepare(me, "Continue", conversation_id)
    runtime.conversations.delete(me, conversation_id)
    with pytest.raises(NotFoundError):
        list(turns.run_sync(prepared))
    assert counts(runtime) == (0, 0, 0)
    with runtime.database.session() as session:
        assert session.get(Conversation, conversation_id) is None


def test_concurrent_follow_ups_on_one_conversation_take_distinct_positions(
    runtime: Runtime,
) -> None:
    model = ScriptedChatModel(lambda m, t: pieces(f"Re: {last_user(m)}", pause=0.02))
    turns = engine(runtime, model)
    me = runtime.local_principal()
    conversation_id = turns.ask(me, "Start")[0].data["conversation_id"]
    barrier = threading.Barrier(4)
    results: dict[int, list[Event]] = {}
    failures: list[BaseException] = []

    def follow_up(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = turns.ask(me, f"follow-up {index}", conversation_id)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=follow_up, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures

    messages = stored_messages(runtime, conversation_id)
    assert [m.seq for m in messages] == list(range(1, 11))
    assert runtime.conversations.get(me, conversation_id).message_count == 10
    by_id = {m.id: m for m in messages}
    for index, events in results.items():
        question = by_id[events[0].data["user_message_id"]]
        answer = by_id[done(events)["message_id"]]
        assert question.text == f"follow-up {index}"
        assert answer.text == f"Re: follow-up {index}" == done(events)["text"]
        assert question.seq < answer.seq


def test_a_model_without_tool_support_is_offered_no_tools(runtime: Runtime) -> None:
    ingest(runtime, {"salaries.md": SALARIES})
    model = ScriptedChatModel(answering("I answer without tools."))
    model.supports_tools = False
    events = engine(runtime, model).ask(runtime.local_principal(), "what are the salary bands?")
    assert model.calls[0].tools == []
    assert done(events)["searched"] is False
    assert trace_of(runtime, done(events)["message_id"])["tools_offered"] == []
