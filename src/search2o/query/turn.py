"""A chat turn: the model answers directly or calls tools once, then answers grounded in them.

:meth:`TurnEngine.prepare` validates the request and checks the conversation's owner before
anything is written (so a bad request or another user's conversation changes nothing).
:meth:`TurnEngine.run` then streams :mod:`search2o.events` values:

``conversation`` (first: the id, created or continued) → ``tool_call`` per call → ``citation``
on each source's first use in the answer → ``delta`` pieces → ``done`` (or ``error``).

The conversation and the user's message are stored before the model is called; the answer is
stored when it ends. If the consumer stops early (client gone, Ctrl-C), the partial answer is
stored with status ``interrupted``; a model or tool failure stores what was written with status
``failed`` and ends with an ``error`` event.

:meth:`TurnEngine.run` is an async generator: the model streams asynchronously, while database
work, tools and the embedder (all blocking) run in worker threads so the event loop serves other
turns meanwhile. Synchronous callers use :meth:`TurnEngine.run_sync` / :meth:`TurnEngine.ask`.

The phases live apart: opening the conversation and its history in
:mod:`search2o.query.turn_history`, what a turn carries between phases in
:mod:`search2o.query.turn_state`; the model's turn, its tools and storing the answer here.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

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
    owned_conversation,
)
from search2o.query.page import PAGE_CUT_NOTICE, PAGE_NOTE, Page
from search2o.query.settings import ChatSettings, RetentionSettings
from search2o.query.tools import KnowledgeTool, Tool, ToolOutcome, WebSearchTool, number_results
from search2o.query.turn_history import ConversationPhase
from search2o.query.turn_state import (
    PreparedTurn,
    _AnswerState,
    _Clock,
    _History,
    _StoppedError,
    _timed,
    _until_stopped,
)
from search2o.query.websearch import WebSearchProvider
from search2o.query.window import ToolRound, WindowBudget
from search2o.storage.db import Database
from search2o.storage.models import (
    Conversation,
    RetrievalTrace,
)
from search2o.textrules import check_text

__all__ = ["PreparedTurn", "TurnEngine"]

log = logging.getLogger("search2o.query")


class TurnEngine(ConversationPhase):
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
