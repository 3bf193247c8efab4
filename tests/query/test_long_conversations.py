"""Long conversations: every request fits the window, and old facts survive in the summary."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from search2o.providers.chat import ChatMessage
from search2o.query.settings import ModelProfile
from search2o.query.summary import SUMMARY_HEADER, extractive_summary
from search2o.runtime import Runtime
from tests.providers.test_openai_chat import Scripted, completion, text_stream
from tests.query.doubles import use_profile


def test_extractive_summary_keeps_what_the_user_said_longest() -> None:
    messages = [
        ChatMessage("user", "My badge number is 4417."),
        ChatMessage("assistant", "Noted. I will remember it."),
    ]
    for n in range(30):
        messages += [ChatMessage("user", f"What about topic {n}?"), ChatMessage("assistant", "Ok.")]
    summary = extractive_summary("", messages, 300)
    assert len(summary) <= 300
    assert summary.splitlines()[0] == "User said: My badge number is 4417."
    assert "Answer:" not in summary  # answers go first, then questions, oldest first
    assert summary.splitlines()[-1] == "User asked: What about topic 29?"
    folded = extractive_summary(summary, [ChatMessage("user", "I work in Lyon.")], 300)
    assert "4417" in folded and folded.endswith("User said: I work in Lyon.")


def _request_tokens(body: dict[str, Any]) -> int:
    """Tokens of a request as the profile counts them (3 characters per token + 4 per message)."""
    return sum(math.ceil(len(m.get("content") or "") / 3) + 4 for m in body["messages"])


@pytest.fixture
def server() -> Iterator[Scripted]:
    scripted = Scripted(default=lambda body: text_stream("Noted."))
    yield scripted
    scripted.httpd.shutdown()
    scripted.httpd.server_close()


def _use(runtime: Runtime, server: Scripted, context: int, reserve: int, **chat: Any) -> int:
    profile = ModelProfile(
        provider="openai",
        model="scripted",
        base_url=server.url,
        max_retries=0,
        context_tokens=context,
        answer_reserve=reserve,
    )
    return use_profile(runtime, profile, **chat)


@pytest.mark.slow
def test_500_turns_fit_a_4096_window_and_remember_turn_3(
    runtime: Runtime, server: Scripted
) -> None:
    cap = _use(runtime, server, 4096, 512, summary_writer="extractive")
    me = runtime.local_principal()
    conversation = None
    for turn in range(1, 501):
        if turn == 3:
            text = "My badge number is 4417-XYZ, please keep it in mind."
        elif turn == 500:
            text = "What is my badge number?"
        else:
            text = f"What does the handbook say about topic {turn}? " + "Details please. " * 8
        events = runtime.turns.ask(me, text, conversation)
        conversation = events[0].data["conversation_id"]
        assert events[-1].kind == "done", events[-1].data
    chat_requests = [r for r in server.requests if r.get("stream")]
    assert len(chat_requests) == 500  # titles are extra, non-streamed requests
    assert max(_request_tokens(r) for r in server.requests) <= cap
    last = chat_requests[-1]["messages"]
    summary = [
        m["content"] for m in last if m["role"] == "system" and SUMMARY_HEADER in m["content"]
    ]
    assert summary and "4417-XYZ" in summary[0]
    verbatim = [m["content"] for m in last if m["role"] in ("user", "assistant")]
    assert not any("4417-XYZ" in text for text in verbatim)  # it came through the summary
    assert len(runtime.conversations.messages(me, conversation)) == 1000  # nothing lost


def test_the_model_writes_the_summary_when_it_can(runtime: Runtime, server: Scripted) -> None:
    def reply(body: dict[str, Any]) -> Any:
        prompt = body["messages"][-1]["content"]
        if not body.get("stream") and prompt.startswith("Update the summary"):
            return completion("The user's badge number is 4417-XYZ.")
        if not body.get("stream"):
            return completion("A title")
        return text_stream("Noted.")

    server.default = reply
    cap = _use(runtime, server, 1024, 128)
    me = runtime.local_principal()
    conversation = None
    for turn in range(12):
        text = "My badge number is 4417-XYZ." if turn == 0 else f"Question {turn}? " + "x " * 150
        events = runtime.turns.ask(me, text, conversation)
        conversation = events[0].data["conversation_id"]
        assert events[-1].kind == "done", events[-1].data
    summarize_calls = [r for r in server.requests if "Update the summary" in str(r["messages"])]
    assert summarize_calls  # a separate model call wrote it
    last = [r for r in server.requests if r.get("stream")][-1]["messages"]
    assert last[1]["role"] == "system"
    assert last[1]["content"] == f"{SUMMARY_HEADER}\nThe user's badge number is 4417-XYZ."
    assert max(_request_tokens(r) for r in server.requests if r.get("stream")) <= cap
    trace = runtime.conversations.trace(me, events[-1].data["message_id"])
    assert all(w["tokens"] <= w["cap"] for w in trace["windows"])


def test_deleting_a_conversation_removes_its_summary(runtime: Runtime, server: Scripted) -> None:
    from sqlalchemy import func, select

    from search2o.storage.models import ConversationSummary

    _use(runtime, server, 1024, 128, summary_writer="extractive")
    me = runtime.local_principal()
    conversation = None
    for turn in range(10):
        events = runtime.turns.ask(me, f"Question {turn}? " + "y " * 200, conversation)
        conversation = events[0].data["conversation_id"]
    with runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(ConversationSummary)) == 1
    runtime.conversations.delete(me, conversation)
    with runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(ConversationSummary)) == 0
