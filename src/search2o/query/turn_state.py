"""What one chat turn carries between its phases: the request, clock, history, answer so far.

And the two stream wrappers of :meth:`~search2o.query.turn.TurnEngine.run`: one that stops it
when its ``stop`` event is set, one that times the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from search2o import aio
from search2o.accounts import Principal
from search2o.crypto.vault import Sealer
from search2o.events import (
    Event,
)
from search2o.providers.chat import (
    ChatMessage,
    Passage,
)
from search2o.query.citations import CitationFilter, CitationRegistry
from search2o.query.page import Page

__all__ = ["PreparedTurn"]


@dataclass(frozen=True)
class PreparedTurn:
    """A validated turn request: the caller, the message, and the conversation (``None`` = new).

    ``model_message`` is what the model reads: the message, or its truncation when it does not
    fit the window and ``chat.long_message = "truncate"``; the transcript keeps ``message``.
    ``page`` is the page sent with the message (:mod:`search2o.query.page`); ``page_source``
    is its text as the model reads it (number 0 until the turn numbers it), ``page_cut``
    whether it was cut to fit the window.
    """

    principal: Principal
    message: str
    conversation_id: str | None
    agent: str | None = None
    model_message: str = ""
    system: str = ""
    truncated: bool = False
    page: Page | None = None
    page_source: Passage | None = None
    page_cut: bool = False


@dataclass
class _Clock:
    started: float = field(default_factory=time.perf_counter)
    model_s: float = 0.0
    tools_s: float = 0.0
    first_token_s: float | None = None

    def ms(self, seconds: float) -> float:
        return round(seconds * 1000, 2)

    def timings(self) -> dict[str, float | None]:
        total = time.perf_counter() - self.started
        return {
            "total_ms": self.ms(total),
            "model_ms": self.ms(self.model_s),
            "tools_ms": self.ms(self.tools_s),
            "engine_ms": self.ms(total - self.model_s - self.tools_s),
            "first_token_ms": None if self.first_token_s is None else self.ms(self.first_token_s),
        }


_STOP_POLL_S = 0.05


class _StoppedError(Exception):
    """Raised inside :meth:`TurnEngine.run` when its ``stop`` event is set."""


async def _until_stopped(
    events: AsyncIterator[Event], stop: threading.Event | None
) -> AsyncIterator[Event]:
    """Pass ``events`` through until ``stop`` is set; then cancel the pending step and raise.

    The step in progress (a model call, a tool) is cancelled, so a silent model does not delay
    the stop: the generator's own clean-up (closing the model's stream) runs as it is cancelled.

    Raises:
        _StoppedError: ``stop`` was set.

    """
    if stop is None:
        async for event in events:
            yield event
        return
    iterator = aiter(events)
    try:
        while True:
            if stop.is_set():
                raise _StoppedError
            step = asyncio.ensure_future(anext(iterator))
            while not step.done():
                await asyncio.wait({step}, timeout=_STOP_POLL_S)
                if stop.is_set() and not step.done():
                    step.cancel()
                    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                        await step
                    raise _StoppedError
            try:
                event = step.result()
            except StopAsyncIteration:
                return
            yield event
    finally:
        await aio.aclose(iterator)


async def _timed(events: AsyncIterator[Any], clock: _Clock) -> AsyncIterator[Any]:
    """Pass ``events`` through, adding the time spent waiting for each to ``clock.model_s``."""
    started: float | None = time.perf_counter()
    try:
        async for event in events:
            clock.model_s += time.perf_counter() - (started or 0.0)
            started = None  # the consumer's time is not the model's
            yield event
            started = time.perf_counter()
    finally:
        if started is not None:
            clock.model_s += time.perf_counter() - started
        await aio.aclose(events)  # releases the model's connection when left early


@dataclass
class _History:
    """A conversation's summary and the messages after it (with their positions)."""

    conversation_id: str
    sealer: Sealer
    title: str = ""
    summary: str = ""
    through_seq: int = 0
    messages: list[ChatMessage] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)


@dataclass
class _AnswerState:
    registry: CitationRegistry
    filter: CitationFilter = field(init=False)
    text: str = ""
    searched: bool = False
    error: BaseException | None = None
