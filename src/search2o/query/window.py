"""The window budget: what one model call carries, so no request exceeds the model's window.

Per call, with the active profile's ``context_tokens`` (C), ``answer_reserve`` (R) and the
``chat.token_margin`` share (m)::

    cap = C - R - ceil(m * C)

The system text and the current message always go in (with 96 tokens kept for a tool call and
its results); a message that cannot fit is refused
with an :class:`InputError` naming the sizes, or, with ``chat.long_message = "truncate"``, cut to
fit with a notice appended. Of what is left, retrieved passages get up to ``chat.context_share``
(default half), packed in order — each tool call's passages are best-first — as whole passages;
history fills the rest newest-first, whole turns only (a user message with the answers after
it), so older turns drop first. Token counts come from the profile's counter
(:mod:`search2o.providers.tokens`), each message counted with its role markers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from search2o.errors import InputError
from search2o.providers.chat import ChatMessage, Passage, ToolCall, render_passages
from search2o.providers.tokens import TokenCounter, message_tokens
from search2o.query.settings import ChatSettings, ModelProfile
from search2o.query.summary import SUMMARY_HEADER

__all__ = ["TRUNCATION_NOTICE", "ToolRound", "Window", "WindowBudget", "group_turns"]

TRUNCATION_NOTICE = "\n\n[The message was cut here: it is longer than the model's window.]"
# Kept free beside system text and message: a tool call and its (possibly empty) results.
_TOOL_ROUND_TOKENS = 96


@dataclass
class Window:
    """The messages of one call and what was packed or dropped (for the retrieval trace)."""

    messages: list[ChatMessage]
    trace: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolRound:
    """The tool calls of a turn and, per call, the passages it returned (best first)."""

    calls: list[ToolCall]
    passages: list[list[Passage]]
    errors: list[str | None]


class WindowBudget:
    """Builds windows for one profile.

    Args:
        profile: ``context_tokens`` and ``answer_reserve`` are used.
        settings: ``token_margin``, ``context_share`` and ``long_message`` are used.
        counter: the profile's token counter.

    """

    def __init__(
        self, profile: ModelProfile, settings: ChatSettings, counter: TokenCounter
    ) -> None:
        self.cap = (
            profile.context_tokens
            - profile.answer_reserve
            - math.ceil(settings.token_margin * profile.context_tokens)
        )
        self._share = settings.context_share
        self._truncate = settings.long_message == "truncate"
        self.counter = counter

    def _tokens(self, message: ChatMessage) -> int:
        extra = sum(len(c.name) + len(str(c.arguments)) for c in message.tool_calls)
        content = message.content
        if message.passages and message.role != "tool":  # sources read after the question
            content = f"{content}\n\n{render_passages(message.passages)}"
        return message_tokens(self.counter, content) + math.ceil(extra / 3)

    def fit_message(self, system: str, message: str) -> tuple[str, bool]:
        """Return the message, cut to fit when allowed, and whether it was cut.

        Raises:
            InputError: the system text and message exceed the cap and truncation is off
                (field ``message``; the error names both sizes).

        """
        fixed = message_tokens(self.counter, system)
        room = self.cap - fixed - _TOOL_ROUND_TOKENS
        size = message_tokens(self.counter, message)
        if size <= room:
            return message, False
        if not self._truncate or room <= message_tokens(self.counter, TRUNCATION_NOTICE) + 16:
            raise InputError(
                "message",
                f"is {size} tokens long; this model's window leaves room for {max(room, 0)} "
                f"(window {self.cap} tokens after the answer reserve and margin, system text "
                f"{fixed}). Shorten it or split it into several messages",
            )
        return self._cut(message, room), True

    def fit_source(
        self, system: str, message: str, source: Passage, *, field: str, notice: str
    ) -> tuple[Passage, bool]:
        """Return ``source`` (sent with the message), cut to its share of the window.

        A source the caller sends with the question (a page's text) may take
        ``chat.context_share`` of what the system text, the message and a tool round leave,
        like retrieved passages; a longer one is cut at that size with ``notice`` appended.

        Returns:
            ``(source, cut)``: the source as it fits and whether its text was cut.

        Raises:
            InputError: not even a short piece of the source fits (named ``field``).

        """
        fixed = message_tokens(self.counter, system) + message_tokens(self.counter, message)
        room = int((self.cap - fixed - _TOOL_ROUND_TOKENS) * self._share)
        current = ChatMessage("user", "", passages=[source])
        if self._tokens(current) <= room:
            return source, False
        header = self._tokens(ChatMessage("user", "", passages=[replace(source, text="")]))
        if room - header <= message_tokens(self.counter, notice) + 16:
            raise InputError(
                field,
                f"does not fit: this model's window leaves {max(room, 0)} tokens for it beside "
                "the message; shorten the message",
            )
        text = self._cut(source.text, room - header, notice)
        return replace(source, text=text), True

    def _cut(self, message: str, room: int, notice: str = TRUNCATION_NOTICE) -> str:
        """Return the longest prefix of ``message`` plus ``notice`` within ``room`` tokens."""
        budget = room - message_tokens(self.counter, notice)
        low, high = 0, len(message)
        while low < high:  # binary search: counts grow with length
            middle = (low + high + 1) // 2
            if message_tokens(self.counter, message[:middle]) <= budget:
                low = middle
            else:
                high = middle - 1
        return message[:low] + notice

    def build(
        self,
        system: str,
        history: list[ChatMessage],
        message: str,
        tools: ToolRound | None = None,
        summary: str = "",
        sources: list[Passage] | None = None,
    ) -> Window:
        """Pack one call: system, summary, history that fits, the message, the tool round.

        ``message`` must already fit (see :meth:`fit_message`), and so must ``sources``, the
        sources sent with it (see :meth:`fit_source`), which go on the message. The summary of
        older turns (:mod:`search2o.query.summary`) goes right after the system text, when it
        fits.
        """
        head = [ChatMessage("system", system)]
        current = ChatMessage("user", message, passages=list(sources or []))
        left = self.cap - self._tokens(head[0]) - self._tokens(current)
        trace: dict[str, Any] = {"cap": self.cap, "counter": self.counter.name}
        if summary:
            note = ChatMessage("system", f"{SUMMARY_HEADER}\n{summary}")
            size = self._tokens(note)
            if size <= left - _TOOL_ROUND_TOKENS:
                head.append(note)
                left -= size
            trace["summary_tokens"] = size if len(head) > 1 else 0
        tail: list[ChatMessage] = []
        if tools is not None:
            call_message = ChatMessage("assistant", "", tool_calls=tools.calls)
            left -= self._tokens(call_message)
            if left < _TOOL_ROUND_TOKENS:
                # Long tool arguments beside a message that nearly fills the window: cut the
                # message for this call only, so the request still fits.
                room = message_tokens(self.counter, message) - (_TOOL_ROUND_TOKENS - left)
                current = ChatMessage("user", self._cut(message, room), passages=current.passages)
                left = _TOOL_ROUND_TOKENS
                trace["message_cut_for_tools"] = True
            kept, packed, dropped, used = self._pack_passages(tools, int(left * self._share))
            left -= used
            tail = [call_message, *kept]
            trace.update(context_tokens=used, passages_packed=packed, passages_dropped=dropped)
        turns = _turns(history)
        chosen: list[list[ChatMessage]] = []
        for turn in reversed(turns):
            size = sum(self._tokens(m) for m in turn)
            if size > left:
                break
            chosen.append(turn)
            left -= size
        kept_history = [m for turn in reversed(chosen) for m in turn]
        trace.update(
            history_turns_packed=len(chosen),
            history_turns_dropped=len(turns) - len(chosen),
            tokens=self.cap - left,
        )
        return Window([*head, *kept_history, current, *tail], trace)

    def _pack_passages(
        self, tools: ToolRound, budget: int
    ) -> tuple[list[ChatMessage], list[int], list[int], int]:
        kept: list[list[Passage]] = [[] for _ in tools.calls]

        def messages() -> list[ChatMessage]:
            return [
                ChatMessage(
                    "tool",
                    f"error: {error}" if error else render_passages(passages),
                    tool_call_id=call.id,
                    passages=passages,
                )
                for call, passages, error in zip(tools.calls, kept, tools.errors, strict=True)
            ]

        def size() -> int:
            return sum(self._tokens(m) for m in messages())

        packed: list[int] = []
        dropped: list[int] = []
        used = size()
        # Round-robin over calls, each call's passages best first; a passage goes in whole
        # or not at all.
        for rank in range(max((len(p) for p in tools.passages), default=0)):
            for index, passages in enumerate(tools.passages):
                if rank >= len(passages):
                    continue
                passage = passages[rank]
                kept[index].append(passage)
                grown = size()
                if grown <= max(budget, used):
                    used = grown
                    packed.append(passage.number)
                else:
                    kept[index].pop()
                    dropped.append(passage.number)
        return messages(), packed, dropped, used


def group_turns(history: list[ChatMessage]) -> list[list[int]]:
    """Group history into turns, as index lists: each user message with the messages after it."""
    turns: list[list[int]] = []
    for index, message in enumerate(history):
        if message.role == "user" or not turns:
            turns.append([index])
        else:
            turns[-1].append(index)
    return turns


def _turns(history: list[ChatMessage]) -> list[list[ChatMessage]]:
    return [[history[i] for i in turn] for turn in group_turns(history)]
