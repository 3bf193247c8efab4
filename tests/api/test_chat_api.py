"""The chat, conversation and message endpoints over a real uvicorn server on loopback.

Both database backends, the real embedding model and the built-in chat model; where a test
needs a slow or failing model it plugs in a scripted implementation of the ``ChatModel``
protocol (tests/query/doubles.py). Server-Sent Events are read from the raw stream.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from search2o.api.app import create_app
from search2o.config import Settings
from search2o.errors import ProviderError
from search2o.providers.builtin_chat import NOT_FOUND
from search2o.providers.chat import ChatMessage, TextDelta, ToolSpec
from search2o.runtime import Runtime
from search2o.storage.models import Chunk, Conversation, Message, RetrievalTrace
from tests.api.test_api import add_user, assert_input_error, assert_validation_error, serve
from tests.conftest import MemoEmbedder
from tests.query.doubles import (
    DOCS,
    ROADMAP,
    SALARIES,
    ScriptedChatModel,
    Step,
    answering,
    counts,
    ingest,
    last_user,
    open_runtime,
    passages,
    pieces,
    searching,
)

pytestmark = pytest.mark.slow

REMOTE = {
    "remote-employees.md": "# Remote work for employees\n\nEmployees may work remotely two days "
    "per week. Remote days need the approval of the team lead.\n",
    "remote-contractors.md": "# Remote work for contractors\n\nContractors may work remotely "
    "every day of the week. Remote contractors must log their hours.\n",
}
VACATION_Q = "How many vacation days do we get?"
BIKES_Q = "where do I park my bicycle?"


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


@dataclass
class Frame:
    """One SSE frame: ``kind`` is the event name, or ``:`` for a comment; ``at`` its arrival."""

    kind: str
    data: Any
    at: float
    id: int | None = None


def frames(response: httpx.Response) -> Iterator[Frame]:
    """Parse the raw SSE stream as it arrives (WHATWG "Server-sent events" wire format)."""
    kind: str | None = None
    data: list[str] = []
    number: int | None = None
    for line in response.iter_lines():
        now = time.monotonic()
        if line.startswith(":"):
            yield Frame(":", line[1:].strip(), now)
        elif line.startswith("id: "):
            number = int(line.removeprefix("id: "))
        elif line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))
        elif line == "":
            if kind is not None:
                yield Frame(kind, json.loads("\n".join(data)), now, number)
            kind, data, number = None, [], None
        else:
            raise AssertionError(f"not an SSE line: {line!r}")


def chat(
    client: httpx.Client,
    message: str,
    conversation_id: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[httpx.Response, list[Frame]]:
    """POST one streamed chat turn; return the response and its events (comments dropped)."""
    body: dict[str, Any] = {"message": message}
    if conversation_id is not None:
        body["conversation_id"] = conversation_id
    with client.stream("POST", "/v1/chat", json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        events = [f for f in frames(response) if f.kind != ":"]
    return response, events


def of(events: list[Frame], kind: str) -> list[Any]:
    return [e.data for e in events if e.kind == kind]


def last(events: list[Frame]) -> dict[str, Any]:
    assert events[-1].kind == "done", [(e.kind, e.data) for e in events]
    data: dict[str, Any] = events[-1].data
    return data


def check_order(events: list[Frame]) -> None:
    """Conversation first, tool calls before the answer, each citation before its marker."""
    kinds = [e.kind for e in events]
    assert kinds[0] == "conversation" and kinds.count("conversation") == 1
    assert kinds[-1] in ("done", "error")
    assert kinds.count("done") + kinds.count("error") == 1
    answer = [i for i, k in enumerate(kinds) if k in ("delta", "citation")]
    assert all(i < min(answer, default=len(kinds)) for i, k in enumerate(kinds) if k == "tool_call")
    for index, event in enumerate(events):
        if event.kind != "citation":
            continue
        marker = f"[{event.data['number']}]"
        first_use = next(
            i for i, e in enumerate(events) if e.kind == "delta" and marker in e.data["text"]
        )
        assert index < first_use, (marker, kinds)


def markers(text: str) -> list[int]:
    return [int(n) for group in re.findall(r"\[([\d, ]+)\]", text) for n in group.split(",")]


@pytest.fixture
def api(runtime: Runtime) -> Iterator[httpx.Client]:
    """The API in local mode with the built-in chat model."""
    with serve(create_app(runtime.settings, runtime=runtime)) as client:
        yield client


@contextmanager
def chat_api(
    settings: Settings,
    embedder: MemoEmbedder,
    model: Any = None,
    auth_mode: str | None = None,
    **chat: Any,
) -> Iterator[tuple[Runtime, httpx.Client]]:
    """A runtime with ``model`` and ``chat`` settings overridden, served on loopback."""
    with (
        open_runtime(settings, embedder, model=model, auth_mode=auth_mode, **chat) as rt,
        serve(create_app(rt.settings, runtime=rt)) as client,
    ):
        yield rt, client


def table_counts(runtime: Runtime, message_ids: list[str]) -> tuple[int, int, int]:
    """Rows of these messages: messages, rated messages, retrieval traces."""
    with runtime.database.session() as session:
        in_ids = Message.id.in_(message_ids)
        return (
            int(session.scalar(select(func.count()).where(in_ids)) or 0),
            int(
                session.scalar(select(func.count()).where(in_ids, Message.rating.is_not(None))) or 0
            ),
            int(
                session.scalar(
                    select(func.count()).where(RetrievalTrace.message_id.in_(message_ids))
                )
                or 0
            ),
        )


# ---------------------------------------------------------------------------------------------
# the chat stream
# ---------------------------------------------------------------------------------------------


def test_chat_streams_its_events_in_order(runtime: Runtime, api: httpx.Client) -> None:
    ids = ingest(runtime, DOCS)
    response, events = chat(api, VACATION_Q)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-accel-buffering"] == "no"
    assert response.headers["cache-control"] == "no-cache"
    check_order(events)

    opened = events[0].data
    assert opened["created"] is True and opened["title"] == VACATION_Q
    assert of(events, "tool_call") == [
        {"id": "call_1", "name": "search_knowledge", "arguments": {"query": VACATION_Q}}
    ]
    final = last(events)
    assert final["conversation_id"] == opened["conversation_id"]
    assert final["text"] == "".join(d["text"] for d in of(events, "delta"))
    assert "25 days of paid vacation" in final["text"]
    assert final["searched"] is True
    assert final["citations"] == of(events, "citation")
    [citation] = final["citations"]
    assert citation["number"] == 1 and citation["document_id"] == ids["vacation.md"]
    assert citation["title"] == "Vacation policy" and citation["source"] == "upload:vacation.md"
    assert final["text"].endswith(" [1]")

    stored = api.get(f"/v1/conversations/{opened['conversation_id']}")
    assert stored.status_code == 200
    body = stored.json()
    assert (body["title"], body["pinned"], body["message_count"]) == (VACATION_Q, False, 2)
    question, answer = body["messages"]
    assert (question["id"], question["role"], question["text"]) == (
        opened["user_message_id"],
        "user",
        VACATION_Q,
    )
    assert (answer["id"], answer["role"], answer["status"]) == (
        final["message_id"],
        "assistant",
        "complete",
    )
    assert answer["text"] == final["text"] and answer["citations"] == final["citations"]
    assert answer["searched"] is True and answer["rating"] is None


def test_json_mode_returns_the_whole_answer_as_one_body(
    runtime: Runtime, api: httpx.Client
) -> None:
    ids = ingest(runtime, DOCS)
    response = api.post("/v1/chat", json={"message": VACATION_Q, "stream": False})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["tool_calls"] == [
        {"id": "call_1", "name": "search_knowledge", "arguments": {"query": VACATION_Q}}
    ]
    assert "25 days of paid vacation" in body["text"]
    assert [c["document_id"] for c in body["citations"]] == [ids["vacation.md"]]
    assert body["searched"] is True and body["timings"]["total_ms"] > 0
    stored = api.get(f"/v1/conversations/{body['conversation_id']}").json()
    assert stored["messages"][1]["id"] == body["message_id"]


def test_json_mode_reports_a_model_failure_with_its_status(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    model = ScriptedChatModel(lambda m, t: [*pieces("Half an"), ProviderError("model is down")])
    with chat_api(settings, embedder, model) as (_rt, client):
        response = client.post("/v1/chat", json={"message": "Hello?", "stream": False})
        assert response.status_code == 502
        detail = response.json()["detail"]
        assert detail["error"] == "ProviderError" and detail["message"] == "model is down"
        conversation = client.get(f"/v1/conversations/{detail['conversation_id']}").json()
        assert [(m["role"], m["text"], m["status"]) for m in conversation["messages"]] == [
            ("user", "Hello?", "complete"),
            ("assistant", "Half an", "failed"),
        ]
        assert conversation["messages"][1]["id"] == detail["message_id"]


def test_a_conversation_continues_by_its_id(runtime: Runtime, api: httpx.Client) -> None:
    ingest(runtime, DOCS)
    _, first = chat(api, VACATION_Q)
    conversation_id = first[0].data["conversation_id"]
    _, second = chat(api, "and how many of them can roll over?", conversation_id)
    check_order(second)
    opened = second[0].data
    assert opened["conversation_id"] == conversation_id and opened["created"] is False
    assert opened["title"] == VACATION_Q
    [call] = of(second, "tool_call")
    assert "vacation" in call["arguments"]["query"]  # the follow-up was made self-contained
    assert "roll over up to 5 days" in last(second)["text"]
    listed = api.get("/v1/conversations").json()["conversations"]
    assert [(c["id"], c["message_count"]) for c in listed] == [(conversation_id, 4)]
    messages = api.get(f"/v1/conversations/{conversation_id}").json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[2]["id"] == opened["user_message_id"]
    assert messages[3]["id"] == last(second)["message_id"]


def test_thanks_needs_no_tools_and_cites_nothing(runtime: Runtime, api: httpx.Client) -> None:
    ingest(runtime, DOCS)
    _, events = chat(api, "thanks!")
    check_order(events)
    assert [e.kind for e in events if e.kind not in ("delta",)] == ["conversation", "done"]
    final = last(events)
    assert final["text"] == "You're welcome! Ask me anything else."
    assert final["citations"] == [] and final["searched"] is False
    trace = api.get(f"/v1/messages/{final['message_id']}/trace").json()
    assert trace["decision"] == "direct" and trace["tool_calls"] == []


def test_an_unanswerable_question_gets_the_not_found_text(
    runtime: Runtime, api: httpx.Client
) -> None:
    ingest(runtime, DOCS)
    _, events = chat(api, "What is the airspeed velocity of an unladen swallow?")
    check_order(events)
    assert [c["name"] for c in of(events, "tool_call")] == ["search_knowledge"]
    assert of(events, "citation") == []
    final = last(events)
    assert final["text"] == NOT_FOUND
    assert final["citations"] == [] and final["searched"] is True


def test_every_cited_number_has_one_citation_event_and_one_document(
    runtime: Runtime, api: httpx.Client
) -> None:
    ids = ingest(runtime, {**DOCS, **REMOTE})
    _, events = chat(api, "Who may work remotely and how often?")
    _, vacation = chat(api, VACATION_Q, events[0].data["conversation_id"])
    for turn in (events, vacation):
        check_order(turn)
        final = last(turn)
        cited = of(turn, "citation")
        numbers = [c["number"] for c in cited]
        assert numbers and len(numbers) == len(set(numbers))
        assert set(markers(final["text"])) == set(numbers)
        sections = [(c["document_id"], tuple(c["heading_path"])) for c in cited]
        assert len(sections) == len(set(sections))  # a section is never numbered twice
        trace = api.get(f"/v1/messages/{final['message_id']}/trace").json()
        hits = {h["chunk_id"]: h["document_id"] for h in trace["tool_calls"][0]["hits"]}
        for citation in cited:
            assert citation["chunk_ids"]
            assert {hits[c] for c in citation["chunk_ids"]} == {citation["document_id"]}
    assert {c["document_id"] for c in of(events, "citation")} == {
        ids["remote-employees.md"],
        ids["remote-contractors.md"],
    }
    # the citation is the section its quoted sentences sit under: they are in its chunks
    [vacation_citation] = of(vacation, "citation")
    assert vacation_citation["document_id"] == ids["vacation.md"]
    path = vacation_citation["heading_path"]
    assert vacation_citation["headings"] == ([path] if path else [])
    with runtime.database.session() as session:
        chunks = session.scalars(select(Chunk).where(Chunk.id.in_(vacation_citation["chunk_ids"])))
        texts = [(c.text, c.heading_path) for c in chunks]
    quoted = last(vacation)["text"].removesuffix("[1]").strip()
    assert all(chunk_path == path for _, chunk_path in texts)
    assert any(quoted.split(". ")[0] in " ".join(text.split()) for text, _ in texts)


def test_the_answer_streams_before_it_is_finished(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    reached_client = threading.Event()

    def hold() -> None:
        if not reached_client.wait(20):
            raise ProviderError("the first piece never reached the client")

    model = ScriptedChatModel(lambda m, t: [*pieces("The first"), hold, *pieces(" and the rest.")])
    with (
        chat_api(settings, embedder, model) as (_, client),
        client.stream("POST", "/v1/chat", json={"message": "Tell me"}) as response,
    ):
        seen: list[Frame] = []
        for frame in frames(response):
            seen.append(frame)
            if frame.kind == "delta" and not reached_client.is_set():
                # the model is still holding the rest of its answer: nothing is finished yet
                assert [f.kind for f in seen] == ["conversation", "delta"]
                assert frame.data == {"text": "The"}
                reached_client.set()
    kinds = [f.kind for f in seen]
    assert kinds[-1] == "done" and "error" not in kinds
    assert seen[-1].data["text"] == "The first and the rest."
    first_delta = next(f for f in seen if f.kind == "delta")
    assert first_delta.at < seen[-1].at


def test_a_client_that_leaves_mid_answer_does_not_stop_the_answer(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    words = " ".join(f"word{i}" for i in range(60))
    model = ScriptedChatModel(answering(words, pause=0.01))
    with chat_api(settings, embedder, model) as (rt, client):
        received: list[Frame] = []
        with client.stream("POST", "/v1/chat", json={"message": "Talk to me"}) as response:
            for frame in frames(response):
                received.append(frame)
                if len(of(received, "delta")) == 3:
                    break  # leaving the block closes the connection mid-answer
        conversation_id = received[0].data["conversation_id"]
        assert received[0].data["run_id"]
        deadline = time.monotonic() + 15
        while True:
            messages = client.get(f"/v1/conversations/{conversation_id}").json()["messages"]
            if len(messages) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert [m["role"] for m in messages] == ["user", "assistant"]
        answer = messages[1]
        assert answer["status"] == "complete"  # the run went on without its client
        assert answer["text"] == words
        assert model.yielded == 60
        assert counts(rt) == (1, 2, 1)


def test_heartbeats_keep_a_slow_stream_alive(settings: Settings, embedder: MemoEmbedder) -> None:
    model = ScriptedChatModel(lambda m, t: [0.5, *pieces("Slow but sure.", pause=0.2)])
    with (
        chat_api(settings, embedder, model, heartbeat_s=0.05) as (_, client),
        client.stream("POST", "/v1/chat", json={"message": "Take your time"}) as response,
    ):
        seen = list(frames(response))
    kinds = [f.kind for f in seen]
    # (a keep-alive may come before the conversation event when opening it takes longer than
    # 0.05 s, as on a loaded machine; the order of the events themselves is checked below)
    assert kinds[-1] == "done"
    before_answer = kinds[: kinds.index("delta")]
    assert before_answer.count(":") >= 4
    assert {f.data for f in seen if f.kind == ":"} == {"keep-alive"}
    assert [f.kind for f in seen if f.kind != ":"] == [
        "conversation",
        "delta",
        "delta",
        "delta",
        "done",
    ]
    assert seen[-1].data["text"] == "Slow but sure."


def test_no_heartbeat_when_the_answer_is_quick(runtime: Runtime, api: httpx.Client) -> None:
    with api.stream("POST", "/v1/chat", json={"message": "hello"}) as response:
        seen = list(frames(response))
    assert ":" not in [f.kind for f in seen]  # default heartbeat_s is 10 s
    assert seen[-1].kind == "done"


def _fails_on_request(messages: list[ChatMessage], tools: list[ToolSpec]) -> list[Step]:
    if "fail" in last_user(messages):
        return [*pieces("Partial answer", pause=0.01), ProviderError("upstream timed out")]
    return pieces("Fine.")


def test_a_model_failure_mid_answer_ends_with_an_error_event(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    with chat_api(settings, embedder, ScriptedChatModel(_fails_on_request)) as (_rt, client):
        _, first = chat(client, "Hello")
        conversation_id = first[0].data["conversation_id"]
        _, failed = chat(client, "now fail please", conversation_id)
        check_order(failed)
        assert [e.kind for e in failed] == ["conversation", "delta", "delta", "error"]
        error = failed[-1].data
        assert error["error"] == "ProviderError" and error["message"] == "upstream timed out"
        _, after = chat(client, "Still there?", conversation_id)
        assert last(after)["text"] == "Fine."

        messages = client.get(f"/v1/conversations/{conversation_id}").json()["messages"]
        assert [(m["role"], m["text"], m["status"]) for m in messages] == [
            ("user", "Hello", "complete"),
            ("assistant", "Fine.", "complete"),
            ("user", "now fail please", "complete"),
            ("assistant", "Partial answer", "failed"),
            ("user", "Still there?", "complete"),
            ("assistant", "Fine.", "complete"),
        ]
        assert messages[3]["id"] == error["message_id"]
        trace = client.get(f"/v1/messages/{error['message_id']}/trace").json()
        assert trace["status"] == "failed"


# ---------------------------------------------------------------------------------------------
# conversations and messages
# ---------------------------------------------------------------------------------------------


def test_conversations_are_listed_renamed_pinned_and_read(
    runtime: Runtime, api: httpx.Client
) -> None:
    _, one = chat(api, "hello")
    _, two = chat(api, "good morning")
    first, second = one[0].data["conversation_id"], two[0].data["conversation_id"]
    listed = api.get("/v1/conversations")
    assert listed.status_code == 200
    rows = listed.json()["conversations"]
    assert [(r["id"], r["title"], r["pinned"]) for r in rows] == [
        (second, "good morning", False),
        (first, "hello", False),
    ]
    assert set(rows[0]) == {"id", "title", "pinned", "created_at", "last_used_at", "message_count"}

    renamed = api.patch(f"/v1/conversations/{first}", json={"title": "  Greetings\n"})
    assert renamed.status_code == 200
    assert (renamed.json()["title"], renamed.json()["pinned"]) == ("Greetings", False)
    pinned = api.patch(f"/v1/conversations/{first}", json={"pinned": True})
    assert (pinned.json()["title"], pinned.json()["pinned"]) == ("Greetings", True)
    rows = api.get("/v1/conversations").json()["conversations"]
    assert [r["id"] for r in rows] == [first, second]
    assert [
        r["id"] for r in api.get("/v1/conversations?limit=1&offset=1").json()["conversations"]
    ] == [second]
    both = api.patch(f"/v1/conversations/{first}", json={"title": "Hi", "pinned": False})
    assert (both.json()["title"], both.json()["pinned"]) == ("Hi", False)
    # unpinning counts as a use (retention restarts): the conversation is now the latest
    assert [r["id"] for r in api.get("/v1/conversations").json()["conversations"]] == [
        first,
        second,
    ]
    detail = api.get(f"/v1/conversations/{first}").json()
    assert detail["title"] == "Hi" and len(detail["messages"]) == 2


def test_rating_an_answer_up_down_and_clearing_it(runtime: Runtime, api: httpx.Client) -> None:
    _, events = chat(api, "hello")
    answer_id = last(events)["message_id"]
    question_id = events[0].data["user_message_id"]
    for value in ("up", "down", None):
        response = api.put(f"/v1/messages/{answer_id}/rating", json={"rating": value})
        assert response.status_code == 200, response.text
        assert response.json()["rating"] == value and response.json()["id"] == answer_id
        messages = api.get(f"/v1/conversations/{events[0].data['conversation_id']}").json()
        assert [m["rating"] for m in messages["messages"]] == [None, value]
    with runtime.database.session() as session:
        row = session.get(Message, answer_id)
        assert row is not None and row.rating is None and row.rated_at is None
    own_question = api.put(f"/v1/messages/{question_id}/rating", json={"rating": "up"})
    assert_input_error(own_question, 422, "message_id")


def test_the_trace_shows_tools_query_hits_packing_and_timings(
    runtime: Runtime, api: httpx.Client
) -> None:
    ids = ingest(runtime, DOCS)
    _, events = chat(api, BIKES_Q)
    final = last(events)
    response = api.get(f"/v1/messages/{final['message_id']}/trace")
    assert response.status_code == 200
    trace = response.json()
    assert trace["model"] == "builtin/extractive-1"
    assert trace["tools_offered"] == ["search_knowledge"] and trace["decision"] == "tools"
    assert trace["status"] == "complete"
    [call] = trace["tool_calls"]
    assert (call["id"], call["name"], call["query"]) == ("call_1", "search_knowledge", BIKES_Q)
    assert call["arguments"] == {"query": BIKES_Q}
    hits = call["hits"]
    assert hits and len(hits) <= runtime.settings.chat.search_k
    assert hits[0]["document_id"] == ids["parking.md"]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    for hit in hits:
        assert isinstance(hit["chunk_id"], int) and hit["score"] > 0
        assert set(hit) == {
            "chunk_id",
            "document_id",
            "score",
            "similarity",
            "vector_rank",
            "lexical_rank",
        }
    assert call["embed_ms"] >= 0 and call["search_ms"] >= 0 and call["ms"] >= 0
    packed = trace["packed"]
    assert [p["chunk_id"] for p in packed["passages"]] == [h["chunk_id"] for h in hits]
    assert packed["context_chars"] == sum(p["chars"] for p in packed["passages"]) > 0
    assert packed["history_messages"] == 0
    [citation] = final["citations"]
    assert {p["number"] for p in packed["passages"] if p["chunk_id"] in citation["chunk_ids"]} == {
        citation["number"]
    }
    timings = trace["timings"]
    assert timings["total_ms"] >= timings["first_token_ms"] > 0
    assert timings["total_ms"] >= timings["model_ms"] + timings["tools_ms"] - 1
    assert final["timings"] == timings
    # a user message keeps no trace
    question = events[0].data["user_message_id"]
    assert api.get(f"/v1/messages/{question}/trace").status_code == 404


def test_delete_removes_the_conversation_messages_ratings_and_traces(
    runtime: Runtime, api: httpx.Client
) -> None:
    _, doomed = chat(api, "hello")
    doomed_id = doomed[0].data["conversation_id"]
    _, more = chat(api, "thanks!", doomed_id)
    _, kept = chat(api, "good morning")
    doomed_messages = [
        doomed[0].data["user_message_id"],
        last(doomed)["message_id"],
        more[0].data["user_message_id"],
        last(more)["message_id"],
    ]
    kept_messages = [kept[0].data["user_message_id"], last(kept)["message_id"]]
    for message_id in (last(doomed)["message_id"], last(kept)["message_id"]):
        assert (
            api.put(f"/v1/messages/{message_id}/rating", json={"rating": "up"}).status_code == 200
        )
    assert table_counts(runtime, doomed_messages) == (4, 1, 2)

    response = api.delete(f"/v1/conversations/{doomed_id}")
    assert response.status_code == 204 and response.content == b""
    assert table_counts(runtime, doomed_messages) == (0, 0, 0)
    assert table_counts(runtime, kept_messages) == (2, 1, 1)
    with runtime.database.session() as session:
        assert session.get(Conversation, doomed_id) is None
    assert counts(runtime) == (1, 2, 1)
    assert api.get(f"/v1/conversations/{doomed_id}").status_code == 404
    assert api.delete(f"/v1/conversations/{doomed_id}").status_code == 404
    for message_id in doomed_messages[1::2]:
        assert api.get(f"/v1/messages/{message_id}/trace").status_code == 404
        rated = api.put(f"/v1/messages/{message_id}/rating", json={"rating": "down"})
        assert rated.status_code == 404
    assert [c["id"] for c in api.get("/v1/conversations").json()["conversations"]] == [
        kept[0].data["conversation_id"]
    ]


# ---------------------------------------------------------------------------------------------
# bad input and missing ids
# ---------------------------------------------------------------------------------------------


def _last_used(runtime: Runtime, conversation_id: str) -> Any:
    with runtime.database.session() as session:
        row = session.get(Conversation, conversation_id)
        assert row is not None
        return row.last_used_at


def _snapshot(runtime: Runtime, api: httpx.Client, conversation_id: str) -> Any:
    """Row counts and the conversation as read (minus last_used_at: reading is a use)."""
    conversation = api.get(f"/v1/conversations/{conversation_id}").json()
    conversation.pop("last_used_at")
    return counts(runtime), conversation


def test_bad_chat_requests_name_the_field_and_change_nothing(
    runtime: Runtime, api: httpx.Client
) -> None:
    _, events = chat(api, "hello")
    conversation_id = events[0].data["conversation_id"]
    before = _snapshot(runtime, api, conversation_id)
    limit = runtime.settings.chat.max_message_chars

    ours = [  # refused by the turn engine
        ({"message": ""}, "message"),
        ({"message": " \n\t "}, "message"),
        ({"message": "x" * (limit + 1)}, "message"),
        ({"message": "", "conversation_id": conversation_id}, "message"),
        ({"message": "y" * (limit + 1), "conversation_id": conversation_id}, "message"),
        ({"message": "hi", "inputs": {"city": "Oslo"}}, "inputs"),  # inputs need an agent
    ]
    for bad, bad_field in ours:
        with api.stream("POST", "/v1/chat", json=bad) as response:
            response.read()
            assert response.headers["content-type"] == "application/json"
        assert_input_error(response, 422, bad_field)
    schema = [  # refused by request validation
        ({}, "message"),
        ({"message": 5}, "message"),
        ({"message": None}, "message"),
        ({"message": ["hi"]}, "message"),
        ({"message": "hi", "conversation_id": 7}, "conversation_id"),
        ({"message": "hi", "stream": "yes"}, "stream"),
        ({"message": "hi", "stream": 1}, "stream"),
        ({"message": "hi", "agent": 5}, "agent"),
        ({"message": "hi", "conversation_id": conversation_id, "extra": True}, "extra"),
    ]
    for body, field in schema:
        assert_validation_error(api.post("/v1/chat", json=body), field)
    not_json = api.post("/v1/chat", content=b"message=hi", headers={"content-type": "text/plain"})
    assert not_json.status_code == 422
    unknown = api.post("/v1/chat", json={"message": "hi", "agent": "helper", "stream": False})
    assert unknown.status_code == 404 and "helper" in unknown.json()["detail"]["message"]
    assert _snapshot(runtime, api, conversation_id) == before


def test_bad_conversation_and_rating_requests_name_the_field_and_change_nothing(
    runtime: Runtime, api: httpx.Client
) -> None:
    _, events = chat(api, "hello")
    conversation_id = events[0].data["conversation_id"]
    answer_id = last(events)["message_id"]
    assert api.put(f"/v1/messages/{answer_id}/rating", json={"rating": "up"}).status_code == 200
    before = _snapshot(runtime, api, conversation_id)
    path = f"/v1/conversations/{conversation_id}"

    assert_input_error(api.patch(path, json={}), 422, "body")
    assert_input_error(api.patch(path, json={"title": None, "pinned": None}), 422, "body")
    for title in ["", "   ", "x" * 201, "bell\x07", "nul\x00here", "esc\x1b[2J", "del\x7f"]:
        assert_input_error(api.patch(path, json={"title": title, "pinned": True}), 422, "title")
    for body, field in [
        ({"title": 5}, "title"),
        ({"pinned": "yes"}, "pinned"),
        ({"pinned": 1}, "pinned"),
        ({"title": "ok", "color": "red"}, "color"),
    ]:
        assert_validation_error(api.patch(path, json=body), field)

    rating = f"/v1/messages/{answer_id}/rating"
    for body, field in [
        ({"rating": "meh"}, "rating"),
        ({"rating": "UP"}, "rating"),
        ({"rating": 1}, "rating"),
        ({}, "rating"),
        ({"rating": "down", "why": "bad"}, "why"),
    ]:
        assert_validation_error(api.put(rating, json=body), field)

    for query, field in [
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=-5", "limit"),
        ("offset=-1", "offset"),
    ]:
        assert_input_error(api.get(f"/v1/conversations?{query}"), 422, field)
    for query, field in [("limit=many", "limit"), ("offset=1.5", "offset")]:
        assert_validation_error(api.get(f"/v1/conversations?{query}"), field)
    assert len(api.get("/v1/conversations?limit=200&offset=0").json()["conversations"]) == 1

    after = _snapshot(runtime, api, conversation_id)
    assert after == before
    assert after[1]["messages"][1]["rating"] == "up" and after[1]["pinned"] is False


def test_a_huge_offset_is_refused_or_empty(runtime: Runtime, api: httpx.Client) -> None:
    chat(api, "hello")
    response = api.get(f"/v1/conversations?offset={10**20}")
    if response.status_code == 422:
        assert_input_error(response, 422, "offset")
    else:
        assert response.status_code == 200, response.text
        assert response.json() == {"conversations": []}


def _raw_json(client: httpx.Client, method: str, path: str, body: bytes) -> httpx.Response:
    return client.request(method, path, content=body, headers={"content-type": "application/json"})


def test_a_message_that_is_not_valid_unicode_is_refused(
    runtime: Runtime, api: httpx.Client
) -> None:
    response = _raw_json(api, "POST", "/v1/chat", b'{"message": "a\\ud800b hello"}')
    assert_input_error(response, 422, "message")
    assert counts(runtime) == (0, 0, 0)


def test_a_conversation_id_that_is_not_valid_unicode_is_refused(
    runtime: Runtime, api: httpx.Client
) -> None:
    body = b'{"message": "hello", "conversation_id": "\\ud800"}'
    response = _raw_json(api, "POST", "/v1/chat", body)
    assert_input_error(response, 422, "conversation_id")
    assert counts(runtime) == (0, 0, 0)


def test_a_body_that_is_not_json_names_the_body(runtime: Runtime, api: httpx.Client) -> None:
    response = _raw_json(api, "POST", "/v1/chat", b'{"message": "hello"')
    assert_input_error(response, 422, "body")
    assert counts(runtime) == (0, 0, 0)


def test_an_overlong_conversation_id_is_refused(runtime: Runtime, api: httpx.Client) -> None:
    response = api.post("/v1/chat", json={"message": "hi", "conversation_id": "a" * 65})
    assert_input_error(response, 422, "conversation_id")
    assert counts(runtime) == (0, 0, 0)


MISSING = ["0" * 32, "f" * 32, "not-an-id", "x" * 300, "%F0%9F%92%A5"]


def test_ids_that_do_not_exist_are_404_everywhere(runtime: Runtime, api: httpx.Client) -> None:
    chat(api, "hello")
    before = counts(runtime)
    for missing in MISSING:
        for method, path, body in [
            ("GET", f"/v1/conversations/{missing}", None),
            ("PATCH", f"/v1/conversations/{missing}", {"title": "New"}),
            ("DELETE", f"/v1/conversations/{missing}", None),
            ("PUT", f"/v1/messages/{missing}/rating", {"rating": "up"}),
            ("GET", f"/v1/messages/{missing}/trace", None),
        ]:
            response = api.request(method, path, json=body)
            if len(missing) > 64:  # longer than any id could be (the document says so): 422
                assert response.json()["detail"]["error"] == "InputError", response.text
                assert response.status_code == 422
                continue
            assert response.status_code == 404, (method, path, response.text)
            assert response.json()["detail"]["error"] == "NotFoundError"
        response = api.post("/v1/chat", json={"message": "hi", "conversation_id": missing})
        if len(missing) > 64:  # longer than any id could be: a bad request, not a lookup
            assert_input_error(response, 422, "conversation_id")
            continue
        assert response.status_code == 404, response.text
        assert response.json()["detail"]["message"].startswith("conversation ")
    assert counts(runtime) == before


def test_an_id_that_is_not_readable_is_422_naming_it(runtime: Runtime, api: httpx.Client) -> None:
    # A NUL or bytes that are not UTF-8 can be no id: refused like any bad parameter
    # (api.param_texts), the same in a path and in a chat body, on both backends.
    chat(api, "hello")
    before = counts(runtime)
    for method, path, body, field in [
        ("GET", "/v1/conversations/%00", None, "conversation_id"),
        ("PATCH", "/v1/conversations/a%00", {"pinned": True}, "conversation_id"),
        ("DELETE", "/v1/conversations/%FF", None, "conversation_id"),
        ("PUT", "/v1/messages/%00/rating", {"rating": "up"}, "message_id"),
        ("GET", "/v1/messages/a%00b/trace", None, "message_id"),
        ("POST", "/v1/chat", {"message": "hi", "conversation_id": "\x00"}, "conversation_id"),
    ]:
        response = api.request(method, path, json=body)
        assert_input_error(response, 422, field)
    assert counts(runtime) == before


def test_a_message_with_a_nul_character_is_refused(runtime: Runtime, api: httpx.Client) -> None:
    response = api.post("/v1/chat", json={"message": "hello\x00 there"})
    assert_input_error(response, 422, "message")
    assert "NUL" in response.json()["detail"]["reason"]
    assert counts(runtime) == (0, 0, 0)


def test_times_are_utc_with_an_offset_on_every_backend(runtime: Runtime, api: httpx.Client) -> None:
    _, events = chat(api, "hello")
    conversation = api.get(f"/v1/conversations/{events[0].data['conversation_id']}").json()
    listed = api.get("/v1/conversations").json()["conversations"][0]
    stamps = [conversation["created_at"], conversation["last_used_at"], listed["last_used_at"]]
    stamps += [m["created_at"] for m in conversation["messages"]]
    for stamp in stamps:
        assert stamp.endswith(("Z", "+00:00")), stamp


# ---------------------------------------------------------------------------------------------
# two users
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def token_setup(
    settings: Settings, embedder: MemoEmbedder
) -> Iterator[tuple[Runtime, httpx.Client]]:
    with (
        open_runtime(settings, embedder, auth_mode="token") as rt,
        serve(create_app(rt.settings, runtime=rt)) as client,
    ):
        yield rt, client


def _probes(conversation_id: str, question_id: str, answer_id: str) -> list[tuple[str, str, Any]]:
    conversation = f"/v1/conversations/{conversation_id}"
    return [
        ("POST", "/v1/chat", {"message": "let me in", "conversation_id": conversation_id}),
        (
            "POST",
            "/v1/chat",
            {"message": "let me in", "conversation_id": conversation_id, "stream": False},
        ),
        ("GET", conversation, None),
        ("PATCH", conversation, {"title": "Mine now"}),
        ("PATCH", conversation, {"pinned": True}),
        ("DELETE", conversation, None),
        ("PUT", f"/v1/messages/{answer_id}/rating", {"rating": "down"}),
        ("PUT", f"/v1/messages/{answer_id}/rating", {"rating": None}),
        ("PUT", f"/v1/messages/{question_id}/rating", {"rating": "up"}),
        ("GET", f"/v1/messages/{answer_id}/trace", None),
        ("GET", f"/v1/messages/{question_id}/trace", None),
        # bad bodies are refused before any lookup, for every id alike
        ("PATCH", conversation, {"title": ""}),
        ("PUT", f"/v1/messages/{answer_id}/rating", {"rating": "meh"}),
    ]


def _answers(
    client: httpx.Client, probes: list[tuple[str, str, Any]], headers: dict[str, str]
) -> list[tuple[int, Any]]:
    out = []
    for method, path, body in probes:
        response = client.request(method, path, json=body, headers=headers)
        out.append((response.status_code, response.json()))
    return out


def test_another_users_conversation_is_answered_exactly_like_a_missing_one(
    token_setup: tuple[Runtime, httpx.Client],
) -> None:
    rt, client = token_setup
    ingest(rt, DOCS)
    ann = add_user(rt, "ann@example.com")
    bob = add_user(rt, "bob@example.com")
    admin = add_user(rt, "admin@example.com", admin=True)
    assert client.post("/v1/chat", json={"message": "hello"}).status_code == 401

    _, mine = chat(client, VACATION_Q, headers=ann)
    _, theirs = chat(client, BIKES_Q, headers=bob)
    conversation_id = mine[0].data["conversation_id"]
    question_id, answer_id = mine[0].data["user_message_id"], last(mine)["message_id"]
    probes = _probes(conversation_id, question_id, answer_id)
    ann_view = client.get(f"/v1/conversations/{conversation_id}", headers=ann).json()
    ann_trace = client.get(f"/v1/messages/{answer_id}/trace", headers=ann).json()
    before = counts(rt)
    used_before = _last_used(rt, conversation_id)

    foreign = _answers(client, probes, bob)
    assert [status for status, _ in foreign] == [404] * 11 + [422] * 2
    assert all(body["detail"]["error"] == "NotFoundError" for _, body in foreign[:11])
    as_admin = _answers(client, probes, admin)
    assert as_admin[9] == (200, ann_trace)  # admins may read the trace ...
    assert as_admin[10][0] == 404  # (a question has none)
    # ... but nothing else: every conversation and rating request is exactly what bob got
    assert as_admin[:9] == foreign[:9] and as_admin[11:] == foreign[11:]

    # nothing changed for ann: not even the last use (only her own reads count)
    assert counts(rt) == before
    assert _last_used(rt, conversation_id) == used_before
    again = client.get(f"/v1/conversations/{conversation_id}", headers=ann).json()
    assert again.pop("last_used_at") > ann_view.pop("last_used_at")
    assert again == ann_view
    lists = {
        who: [c["id"] for c in client.get("/v1/conversations", headers=h).json()["conversations"]]
        for who, h in (("ann", ann), ("bob", bob), ("admin", admin))
    }
    assert lists == {
        "ann": [conversation_id],
        "bob": [theirs[0].data["conversation_id"]],
        "admin": [],
    }

    # once ann deletes it, bob gets exactly the same answers: he could not tell the difference
    assert client.delete(f"/v1/conversations/{conversation_id}", headers=ann).status_code == 204
    assert _answers(client, probes, bob) == foreign
    assert client.get(f"/v1/messages/{answer_id}/trace", headers=admin).status_code == 404


def _echo_answer(messages: list[ChatMessage]) -> list[Step]:
    found = passages(messages)
    cite = f" [{found[0].number}]" if found else ""
    return pieces(f"You said {last_user(messages)}{cite}", pause=0.01)


def test_two_users_streaming_at_once_only_see_their_own_events(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    model = ScriptedChatModel(searching(_echo_answer))
    with chat_api(settings, embedder, model, auth_mode="token") as (rt, client):
        ids = {
            **ingest(rt, {"roadmap.md": ROADMAP}, groups=["a"]),
            **ingest(rt, {"salaries.md": SALARIES}, groups=["b"]),
        }
        users = {
            "ann": add_user(rt, "ann@example.com", ("a",)),
            "bob": add_user(rt, "bob@example.com", ("b",)),
        }
        readable = {"ann": ids["roadmap.md"], "bob": ids["salaries.md"]}
        streams_each = 3
        start = threading.Barrier(2 * streams_each)
        results: dict[tuple[str, int], list[Frame]] = {}
        failures: list[BaseException] = []

        def run(who: str, index: int) -> None:
            try:
                start.wait(timeout=30)
                _, events = chat(client, f"{who} question {index} here", headers=users[who])
                results[who, index] = events
            except BaseException as exc:
                failures.append(exc)

        threads = [
            threading.Thread(target=run, args=(who, i))
            for who in users
            for i in range(streams_each)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not failures, failures
        assert len(results) == 2 * streams_each

        owned: dict[str, set[str]] = {who: set() for who in users}
        for (who, index), events in results.items():
            check_order(events)
            conversation_id = events[0].data["conversation_id"]
            owned[who].add(conversation_id)
            final = last(events)
            assert final["conversation_id"] == conversation_id
            assert final["text"] == f"You said {who} question {index} here [1]"
            other = "bob" if who == "ann" else "ann"
            assert other not in "".join(d["text"] for d in of(events, "delta"))
            assert [c["document_id"] for c in of(events, "citation")] == [readable[who]]
        for who, headers in users.items():
            listed = client.get("/v1/conversations", headers=headers).json()["conversations"]
            assert {c["id"] for c in listed} == owned[who]
            assert len(owned[who]) == streams_each


class RendezvousModel(ScriptedChatModel):
    """Each call waits (asynchronously) until ``expected`` calls are streaming at once."""

    def __init__(self, expected: int) -> None:
        super().__init__(answering("unused"))
        self.expected = expected
        self.arrived = 0
        self.together: asyncio.Event | None = None

    async def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> AsyncIterator[Any]:
        self.together = self.together or asyncio.Event()
        self.arrived += 1
        if self.arrived == self.expected:
            self.together.set()
        try:
            await asyncio.wait_for(self.together.wait(), timeout=20)
            yield TextDelta(f"met {self.expected}")
        except TimeoutError:
            yield TextDelta("alone")


def test_turns_stream_concurrently_on_the_servers_event_loop(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    model = RendezvousModel(expected=3)
    with chat_api(settings, embedder, model) as (_, client), ThreadPoolExecutor(3) as pool:
        bodies = [{"message": f"Question {i}", "stream": False} for i in range(3)]
        replies = list(pool.map(lambda body: client.post("/v1/chat", json=body), bodies))
    # a model call that blocked the loop (or turns run one by one) would never meet the others
    assert [r.json()["text"] for r in replies] == ["met 3"] * 3
