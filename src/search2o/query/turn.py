"""A chat turn: the model answers directly or calls tools once, then answers grounded in them.

:meth:`TurnEngine.prepare` validates the request and checks the conversation's owner before
anything is written (so a bad request or another user's conversation changes nothing).
:meth:`TurnEngine.run` then streams :mod:`search2o.events` values:

``conversation`` (first: the id, created or continued) → ``tool_call`` per call → ``citation`` on
each source's first use in the answer → ``delta`` pieces → ``done`` (or ``error``).

The conversation and the user's message are stored before the model is called; the answer is
stored when it ends. If the consumer stops early (client gone, Ctrl-C), the partial answer is
stored with status ``interrupted``; a model or tool failure stores what was written with status
``failed`` and ends with an ``error`` event.

:meth:`TurnEngine.run` is an async generator: the model streams asynchronously, while database
work, tools and the embedder (all blocking) run in worker threads so the event loop serves other
turns meanwhile. Synchronous callers use :meth:`TurnEngine.run_sync` / :meth:`TurnEngine.ask`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from search2o import aio
from search2o.accounts import Principal
from search2o.crypto.vault import Sealer, Vault
from search2o.errors import NotFoundError, Search2oError
from search2o.events import (
    CitationEvent,
    ConversationEvent,
    DeltaEvent,
    DoneEvent,
    Event,
    ToolCallEvent,
    error_event,
)
from search2o.knowledge.store import KnowledgeStore
from search2o.providers.chat import (
    ChatMessage,
    ChatModel,
    Decision,
    Passage,
    TextDelta,
    ToolCall,
)
from search2o.providers.tokens import build_token_counter
from search2o.query.citations import CitationFilter, CitationRegistry
from search2o.query.conversations import (
    append_message,
    clean_title,
    create_conversation,
    open_message,
    owned_conversation,
)
from search2o.query.page import PAGE_CUT_NOTICE, PAGE_NOTE, Page
from search2o.query.settings import ChatSettings, RetentionSettings
from search2o.query.summary import extractive_summary
from search2o.query.tools import KnowledgeTool, Tool, ToolOutcome, WebSearchTool, number_results
from search2o.query.websearch import WebSearchProvider
from search2o.query.window import ToolRound, Window, WindowBudget, group_turns
from search2o.storage.db import Database
from search2o.storage.models import (
    Conversation,
    ConversationSummary,
    Message,
    RetrievalTrace,
    utcnow,
)
from search2o.textrules import check_text

__all__ = ["PreparedTurn", "TurnEngine"]

log = logging.getLogger("search2o.query")


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


class TurnEngine:
    """Runs chat turns for every user of one process (holds no per-user state).

    Args:
        database: the open database.
        knowledge: the Knowledge Store ``search_knowledge`` searches.
        model: the chat model.
        settings: the ``chat`` settings.
        vault: the conversations' data keys (every stored text is sealed with them).
        web_search: the admin-configured web search provider, or ``None`` (no ``web_search``).
        retention: when conversations expire (an expired one is missing; ``None``: never).

    """

    def __init__(
        self,
        database: Database,
        knowledge: KnowledgeStore,
        model: ChatModel,
        settings: ChatSettings,
        vault: Vault,
        web_search: WebSearchProvider | None = None,
        retention: RetentionSettings | None = None,
    ) -> None:
        self._db = database
        self._vault = vault
        self._retention = retention
        self._knowledge = knowledge
        self.model = model
        self._settings = settings
        self._knowledge_tool = KnowledgeTool(knowledge, settings.search_k)
        profile = settings.active_profile
        self.budget = WindowBudget(profile, settings, build_token_counter(profile.tokenizer))
        self._web_tool = (
            WebSearchTool(web_search, settings.web_search.k, knowledge.settings.max_query_chars)
            if web_search is not None
            else None
        )

    def prepare(
        self,
        principal: Principal,
        message: str,
        conversation_id: str | None = None,
        page: Page | None = None,
    ) -> PreparedTurn:
        """Validate a turn request without writing anything.

        ``page`` (validated by :func:`~search2o.query.page.check_page`) goes to the model as
        one source beside the message, cut to its share of the window when longer.

        Raises:
            InputError: the message is empty, longer than ``chat.max_message_chars``, holds a
                NUL character or invalid Unicode, or does not fit the model's window while
                ``chat.long_message = "error"`` (field ``message``); no room is left for the
                page (field ``page.text``).
            NotFoundError: ``conversation_id`` is missing or another user's.

        """
        text = check_text(message, "message", max_chars=self._settings.max_message_chars)
        system = self._system_text(page is not None)
        model_message, truncated = self.budget.fit_message(system, text)
        page_source, page_cut = None, False
        if page is not None:
            found = page.found()
            page_source, page_cut = self.budget.fit_source(
                system,
                model_message,
                Passage(0, found.title, found.source, found.text),
                field="page.text",
                notice=PAGE_CUT_NOTICE,
            )
        if conversation_id is not None:
            with self._db.session() as session:
                owned_conversation(session, principal, conversation_id, self._retention)
        return PreparedTurn(
            principal,
            text,
            conversation_id,
            model_message=model_message,
            system=system,
            truncated=truncated,
            page=page,
            page_source=page_source,
            page_cut=page_cut,
        )

    def ask(
        self,
        principal: Principal,
        message: str,
        conversation_id: str | None = None,
        page: Page | None = None,
    ) -> list[Event]:
        """Run one whole turn and return its events (for callers that do not stream).

        Blocking; not to be called from a running event loop (use ``async for`` on :meth:`run`).

        Raises:
            InputError, NotFoundError: as :meth:`prepare`.

        """
        return list(self.run_sync(self.prepare(principal, message, conversation_id, page)))

    def run_sync(self, turn: PreparedTurn) -> Iterator[Event]:
        """:meth:`run` for synchronous callers, on the background loop of :mod:`search2o.aio`.

        Closing the iterator early (``close()``, Ctrl-C) cancels the turn and returns once the
        partial answer is stored as ``interrupted``.
        """
        return aio.iterate(self.run(turn))

    async def run(
        self,
        turn: PreparedTurn,
        stop: threading.Event | None = None,
        on_stored: Callable[[Session, str, str], None] | None = None,
    ) -> AsyncIterator[Event]:
        """Run a prepared turn, yielding its events (see the module docstring).

        ``on_stored(session, conversation_id, role)`` is called inside the transaction that
        stores the user's message (``role`` ``"user"``) and inside the one that stores the
        answer (``"assistant"``), so what it writes commits with that message or not at all
        (the chat service's run learns its conversation, then that its answer is stored).

        Setting ``stop`` (from any thread) ends the answer within ``_STOP_POLL_S`` even while
        the model is silent: the partial answer is stored as ``interrupted`` and the last event
        is ``done`` with ``status: "interrupted"``. Cancelling the task that iterates it, or
        closing the iterator, stores the partial answer the same way before the cancellation
        propagates.

        Raises:
            NotFoundError: the conversation was deleted between prepare and run.
            StorageError: the database failed.

        """
        clock = _Clock()
        title = (
            clean_title(await self.model.write_title(turn.message))
            if turn.conversation_id is None
            else ""
        )
        conversation, user_message, history, created = await asyncio.to_thread(
            self._open, turn, title, on_stored
        )
        yield ConversationEvent(
            conversation_id=conversation.id,
            title=history.title,
            created=created,
            user_message_id=user_message.id,
        )
        state = _AnswerState(CitationRegistry())
        state.filter = CitationFilter(state.registry)
        trace: dict[str, Any] = {"model": self.model.model_id, "tool_calls": []}
        status = "interrupted"
        stopped = False
        try:
            async for event in _until_stopped(self._turn(turn, history, state, trace, clock), stop):
                yield event
            status = "complete"
        except _StoppedError:
            stopped = True
        except Search2oError as exc:
            status = "failed"
            state.error = exc
        except Exception as exc:  # a bug in a model or tool: reported (and logged) by error_event
            status = "failed"
            state.error = exc
        finally:
            tail, _ = state.filter.finish()
            state.text += tail
            trace["timings"] = clock.timings()
            # The worker thread finishes the write even if this task is cancelled again.
            answer_id = await asyncio.to_thread(
                self._store_answer, turn, history.sealer, state, trace, status, on_stored
            )
            if answer_id is None and state.error is None:
                state.error = NotFoundError(
                    f"conversation {conversation.id!r} was deleted while the answer was "
                    "written; nothing was stored"
                )
        if state.error is not None:
            yield error_event(state.error, message_id=answer_id, conversation_id=conversation.id)
            return
        yield DoneEvent(
            conversation_id=conversation.id,
            message_id=answer_id,
            text=state.text,
            citations=[c.to_dict() for c in state.filter.used],
            searched=state.searched,
            message_truncated=turn.truncated,
            timings=trace["timings"],
            **({"status": "interrupted"} if stopped else {}),
        )

    # ---------------------------------------------------------------------------------------

    def _open(
        self,
        turn: PreparedTurn,
        title: str,
        on_stored: Callable[[Session, str, str], None] | None = None,
    ) -> tuple[Conversation, Message, _History, bool]:
        with self._db.session() as session:
            if turn.conversation_id is None:
                conversation, sealer = create_conversation(
                    session, self._vault, turn.principal, title
                )
                history = _History(conversation.id, sealer, title)
                created = True
            else:
                conversation = owned_conversation(
                    session, turn.principal, turn.conversation_id, self._retention
                )
                sealer = self._vault.sealer(session, conversation.id, conversation.user_id)
                history = self._read_history(session, sealer)
                history.title = sealer.open("title", conversation.title_sealed)
                created = False
            user_message = append_message(
                session,
                conversation,
                sealer,
                role="user",
                text=turn.message,
                agent=turn.agent,
                page=turn.page.stored() if turn.page is not None else None,
            )
            if on_stored is not None:
                on_stored(session, conversation.id, "user")
            session.expunge_all()
        return conversation, user_message, history, created

    def _read_history(self, session: Session, sealer: Sealer) -> _History:
        """Read the summary and the messages after it (summaries on) or the last N (off).

        Messages without text (an answer that failed before its first word) are skipped.
        """
        conversation_id = sealer.conversation_id
        history = _History(conversation_id, sealer)
        query = select(Message).where(
            Message.conversation_id == conversation_id,
            Message.role.in_(("user", "assistant")),
        )
        if self._settings.summaries:
            summary = session.get(ConversationSummary, conversation_id)
            if summary is not None:
                history.summary = sealer.open("summary", summary.sealed)
                history.through_seq = summary.through_seq
                query = query.where(Message.seq > summary.through_seq)
            rows = list(session.scalars(query.order_by(Message.seq)))
        else:
            limit = self._settings.history_messages
            rows = (
                list(session.scalars(query.order_by(Message.seq.desc()).limit(limit)))[::-1]
                if limit
                else []
            )
        for row in rows:
            text, _ = open_message(sealer, row)
            if text:
                history.messages.append(ChatMessage(row.role, text))  # type: ignore[arg-type]
                history.seqs.append(row.seq)
        return history

    async def _compact(
        self,
        history: _History,
        system: str,
        message: str,
        trace: dict[str, Any],
        sources: list[Passage],
    ) -> Window:
        """Fold the oldest turns into the summary when the history no longer fits the window.

        Keeps the newest half of the turns that fit, so compaction runs every so many turns,
        not on every turn. The summary is written by the model when it can (``summarize``),
        else extractively; it is stored at once, so a failed answer does not lose it.

        Returns:
            The window of the first model call, built once more only after a compaction.

        """
        window = self.budget.build(
            system, history.messages, message, summary=history.summary, sources=sources
        )
        if not self._settings.summaries or window.trace["history_turns_dropped"] == 0:
            return window
        turns = group_turns(history.messages)
        keep = max(1, window.trace["history_turns_packed"] // 2)
        folded = [index for turn in turns[:-keep] for index in turn]
        if not folded:
            return window
        max_tokens = int(self.budget.cap * self._settings.summary_share)
        started = time.perf_counter()
        writer = (
            getattr(self.model, "summarize", None)
            if self._settings.summary_writer == "model"
            else None
        )
        previous, messages = history.summary, [history.messages[i] for i in folded]
        summary = (
            await writer(previous, messages, max_tokens)
            if callable(writer)
            else extractive_summary(previous, messages, max_tokens * 3)
        )
        through = history.seqs[folded[-1]]
        await asyncio.to_thread(self._store_summary, history.sealer, summary, through)
        kept = len(folded)
        history.summary, history.through_seq = summary, through
        history.messages, history.seqs = history.messages[kept:], history.seqs[kept:]
        trace["summary"] = {
            "folded_messages": kept,
            "through_seq": through,
            "chars": len(summary),
            "ms": round((time.perf_counter() - started) * 1000, 2),
        }
        return self.budget.build(
            system, history.messages, message, summary=history.summary, sources=sources
        )

    def _store_summary(self, sealer: Sealer, summary: str, through: int) -> None:
        sealed = sealer.seal("summary", summary)
        with self._db.session() as session:
            if session.get(Conversation, sealer.conversation_id) is None:
                return  # deleted meanwhile: stays deleted
            row = session.get(ConversationSummary, sealer.conversation_id)
            if row is None:
                session.add(
                    ConversationSummary(
                        conversation_id=sealer.conversation_id, sealed=sealed, through_seq=through
                    )
                )
            else:
                row.sealed, row.through_seq, row.updated_at = sealed, through, utcnow()

    def _tools(self, principal: Principal) -> list[Tool]:
        tools: list[Tool] = []
        if not self.model.supports_tools:
            return tools
        if not self._knowledge.is_empty(principal):
            tools.append(self._knowledge_tool)
        if self._web_tool is not None:
            tools.append(self._web_tool)
        return tools

    def _system_text(self, page: bool = False) -> str:
        today = datetime.now(UTC).date().isoformat()
        note = f"\n\n{PAGE_NOTE}" if page else ""
        return f"{self._settings.system_prompt}{note}\n\nToday is {today}."

    async def _turn(
        self,
        turn: PreparedTurn,
        history: _History,
        state: _AnswerState,
        trace: dict[str, Any],
        clock: _Clock,
    ) -> AsyncIterator[Event]:
        tools = await asyncio.to_thread(self._tools, turn.principal)
        by_name = {tool.spec.name: tool for tool in tools}
        message = turn.model_message or turn.message
        system = turn.system or self._system_text(turn.page is not None)
        sources = self._number_page(turn, state, trace)
        window = await self._compact(history, system, message, trace, sources)
        messages = window.messages
        trace["tools_offered"] = list(by_name)
        trace["windows"] = [window.trace]
        trace["message_truncated"] = turn.truncated
        packed_history = [m for m in messages[:-1] if m.role in ("user", "assistant")]
        trace["packed"] = {
            "history_messages": len(packed_history),
            "history_chars": sum(len(m.content) for m in packed_history),
        }
        calls: list[ToolCall] = []
        async for event in _timed(self.model.stream(messages, [t.spec for t in tools]), clock):
            if isinstance(event, ToolCall):
                calls.append(event)
            elif isinstance(event, Decision):
                trace["decision_detail"] = event.detail
            else:
                for emitted in self._emit(event.text, state, clock):
                    yield emitted
        if not calls:
            trace["decision"] = "direct"
            return
        trace["decision"] = "tools"
        state.searched = True
        calls = calls[: self._settings.max_tool_calls]
        for call in calls:
            yield ToolCallEvent(id=call.id, name=call.name, arguments=call.arguments)
        outcomes = await self._run_tools(turn.principal, calls, by_name, clock)
        found: list[list[Passage]] = []
        packed: list[dict[str, Any]] = []
        for call, outcome in zip(calls, outcomes, strict=True):
            passages = number_results(outcome.found, state.registry)
            found.append(passages)
            trace["tool_calls"].append(
                {"id": call.id, "name": call.name, "arguments": call.arguments, **outcome.trace}
            )
            packed.extend(
                {"number": p.number, "chunk_id": f.chunk_id, "url": f.url, "chars": len(p.text)}
                for p, f in zip(passages, outcome.found, strict=True)
            )
        errors = [outcome.trace.get("error") for outcome in outcomes]
        window = self.budget.build(
            system,
            history.messages,
            message,
            ToolRound(calls, found, errors),
            summary=history.summary,
            sources=sources,
        )
        messages = window.messages
        trace["windows"].append(window.trace)
        # The page went with the message in both calls: it stays citable beside what fit.
        shown = set(window.trace["passages_packed"]) | {p.number for p in sources}
        state.filter.allowed = shown
        trace["packed"]["passages"] = [p for p in packed if p["number"] in shown]
        trace["packed"]["dropped_passages"] = [p for p in packed if p["number"] not in shown]
        trace["packed"]["context_chars"] = sum(p["chars"] for p in trace["packed"]["passages"])
        async for event in _timed(self.model.stream(messages, []), clock):
            if isinstance(event, TextDelta):
                for emitted in self._emit(event.text, state, clock):
                    yield emitted
            elif isinstance(event, Decision):
                trace["decision_detail"] = event.detail

    def _number_page(
        self, turn: PreparedTurn, state: _AnswerState, trace: dict[str, Any]
    ) -> list[Passage]:
        """Give the page the first number of the turn's registry, as a tool's source gets one."""
        if turn.page is None or turn.page_source is None:
            return []
        found = replace(turn.page.found(), text=turn.page_source.text)
        sources = number_results([found], state.registry)
        trace["page"] = {
            "number": sources[0].number,
            "chars": len(turn.page.text),
            "cut": turn.page_cut,
        }
        return sources

    def _emit(self, text: str, state: _AnswerState, clock: _Clock) -> Iterator[Event]:
        safe, fresh = state.filter.feed(text)
        for citation in fresh:
            yield CitationEvent(**citation.to_dict())
        if safe:
            if clock.first_token_s is None:
                clock.first_token_s = time.perf_counter() - clock.started
            state.text += safe
            yield DeltaEvent(text=safe)

    async def _run_tools(
        self,
        principal: Principal,
        calls: list[ToolCall],
        by_name: dict[str, Tool],
        clock: _Clock,
    ) -> list[ToolOutcome]:
        def run_one(call: ToolCall) -> ToolOutcome:
            tool = by_name.get(call.name)
            if tool is None:
                return ToolOutcome(trace={"error": f"unknown tool {call.name!r}"})
            try:
                return tool.run(principal, call.arguments)
            except Search2oError as exc:
                return ToolOutcome(trace={"error": exc.message})

        started = time.perf_counter()
        # Each call in its own worker thread, all at once; results keep the call order.
        outcomes = list(await asyncio.gather(*(asyncio.to_thread(run_one, c) for c in calls)))
        clock.tools_s += time.perf_counter() - started
        return outcomes

    def _store_answer(
        self,
        turn: PreparedTurn,
        sealer: Sealer,
        state: _AnswerState,
        trace: dict[str, Any],
        status: str,
        on_stored: Callable[[Session, str, str], None] | None = None,
    ) -> str | None:
        trace["status"] = status
        conversation_id = sealer.conversation_id
        # A conversation deleted while the turn ran stays deleted: the answer is dropped, whether
        # the row is already gone here or vanishes before append_message's update.
        try:
            with self._db.session() as session:
                conversation = session.get(Conversation, conversation_id)
                if conversation is None:
                    return None
                message = append_message(
                    session,
                    conversation,
                    sealer,
                    role="assistant",
                    text=state.text,
                    citations=[c.to_dict() for c in state.filter.used],
                    status=status,
                    searched=state.searched,
                    agent=turn.agent,
                )
                session.add(
                    RetrievalTrace(message_id=message.id, sealed=sealer.seal("trace", trace))
                )
                if on_stored is not None:
                    on_stored(session, conversation_id, "assistant")
                return message.id
        except NotFoundError:
            return None


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
