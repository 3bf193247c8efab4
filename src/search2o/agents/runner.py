"""Agent runs in a conversation: restore the state, interpret, save on end, return and ask.

:meth:`AgentRunner.run` is one run, as events shaped like a chat turn's, streamed as they
happen (:mod:`search2o.events`): ``conversation`` first, a ``step``
(``function``, ``command``) as each command starts, then ``delta`` (the answer, or the question
of an ``ask``) and ``done``, or ``error``:

1. The user's message joins the conversation's transcript (a new conversation is born by it).
2. The conversation state is restored from the state store. If a run waits on ``ask`` and the
   message names no agent or that agent, the message is the answer and the run resumes after
   the ``ask``. If it names another agent, the waiting run is closed (recorded as ``failed``
   with output ``{"abandoned_for": <agent>}``, saved with the new run) and the new agent runs.
3. The interpreter (:mod:`search2o.agents.interpreter`) executes; model calls, knowledge and
   memory searches happen during the run.
4. On ``end``, ``return`` from main or ``ask``: one transaction stores the run record, the
   prompts and variables (the state store's save, compare-and-swap on the version read in 2),
   the memory stores/deletes/retrievals, and the answer (or question) as the agent's message.
   On ``fail`` or any error nothing of the run is saved: the state and memories stay as they
   were, and the transcript records the failed answer with its error.

A validation run (``validation=True``) keeps its state in our own store even when hooks are
configured, never applies memory changes, and returns the trace of every command.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from search2o import aio
from search2o.accounts import Principal
from search2o.agents.definition import AgentDefinition, check_inputs
from search2o.agents.interpreter import Interpreter
from search2o.agents.run_parts import (
    PreparedRun,
    _cite,
    _now,
    _Opened,
    _transcript_message,
    _waiting_run,
)
from search2o.agents.run_types import Paused, RunContext, RunEffects
from search2o.crypto.vault import Vault
from search2o.errors import ConflictError, RunError, Search2oError
from search2o.events import (
    ConversationEvent,
    DeltaEvent,
    DoneEvent,
    Event,
    StepEvent,
    error_event,
)
from search2o.knowledge.store import KnowledgeStore
from search2o.memory.changes import MemoryChanges
from search2o.memory.store import MemoryStore
from search2o.providers.chat import ChatMessage, ChatModel, ChatModels, TextDelta
from search2o.query.conversations import (
    append_message,
    clean_title,
    create_conversation,
    owned_conversation,
    touch_entry,
)
from search2o.state import StateStore
from search2o.state.changes import StateChanges
from search2o.state.model import ConversationState
from search2o.state.records import Pause, RunRecord
from search2o.storage.db import Database
from search2o.storage.models import Message
from search2o.textrules import check_text

if TYPE_CHECKING:
    from search2o.config import Settings

__all__ = ["AgentRunner", "PreparedRun"]

log = logging.getLogger("search2o.agents")


class AgentRunner:
    """Runs agents for every user of one process (holds no per-user state).

    Args:
        database, vault: where conversations, messages and their keys live.
        state_store: the conversation state store (ours or the enterprise's hooks).
        validation_state_store: always ours (validation runs).
        memory: long-term memories.
        knowledge: the Knowledge Store the ``search`` command searches.
        settings: the process settings (``chat`` profiles, ``retention``).
        models: the process's chat models, one per profile (shared with the Query Engine).

    """

    def __init__(
        self,
        *,
        database: Database,
        vault: Vault,
        state_store: StateStore,
        validation_state_store: StateStore,
        memory: MemoryStore,
        knowledge: KnowledgeStore,
        settings: Settings,
        models: ChatModels,
    ) -> None:
        self._db = database
        self._vault = vault
        self._state = state_store
        self._validation_state = validation_state_store
        self._memory = memory
        self._knowledge = knowledge
        self._settings = settings
        self._models = models

    # --- preparing ------------------------------------------------------------------------------

    def prepare(
        self,
        principal: Principal,
        definition: AgentDefinition,
        message: str,
        conversation_id: str | None = None,
        inputs: dict[str, Any] | None = None,
        *,
        validation: bool = False,
    ) -> PreparedRun:
        """Validate a run request without writing anything.

        Raises:
            InputError: field ``message``: empty, longer than ``chat.max_message_chars``, or
                holding a NUL or a lone surrogate (:func:`search2o.textrules.check_text`, as a
                chat turn); bad ``inputs`` (field ``inputs.<name>``, see
                :func:`~search2o.agents.definition.check_inputs`).
            NotFoundError: ``conversation_id`` is missing or another user's.

        """
        text = check_text(
            message if isinstance(message, str) else "",
            "message",
            max_chars=self._settings.chat.max_message_chars,
            setting="chat.max_message_chars",
        )
        checked = check_inputs(definition, inputs)
        if conversation_id is not None:
            with self._db.session() as session:
                owned_conversation(session, principal, conversation_id, self._settings.retention)
        return PreparedRun(principal, definition, text, conversation_id, checked, validation)

    def waiting_agent(self, principal: Principal, conversation_id: str) -> str | None:
        """Return the agent whose run waits on ``ask`` in the conversation, if any.

        Every chat follow-up asks this, so the state (perhaps an enterprise hook's HTTP call)
        is restored only when the conversation's latest answer is an agent's: a waiting run's
        question always is, as every message after it goes to that agent.

        Raises:
            NotFoundError: the conversation is missing or another user's.

        """
        return self.answering_agent(principal, conversation_id, waiting_only=True)

    def kept_by_hooks(self, principal: Principal, conversation_id: str) -> bool:
        """Tell whether the state hooks keep the conversation's transcript.

        Raises:
            NotFoundError: the conversation is missing or another user's.

        """
        with self._db.session() as session:
            row = owned_conversation(session, principal, conversation_id, self._settings.retention)
            return bool(row.kept_by_hooks)

    def answering_agent(
        self, principal: Principal, conversation_id: str, *, waiting_only: bool = False
    ) -> str | None:
        """Return the agent that answers the next message of the conversation, if one does.

        The agent whose run waits on ``ask``; or, in a conversation the state hooks keep
        (``kept_by_hooks``: an agent conversation whose transcript is the enterprise's), the
        last agent that ran in it — such a conversation is answered by its agent, never by a
        chat turn that would store messages with us. ``waiting_only`` asks the first question
        alone.

        Raises:
            NotFoundError: the conversation is missing or another user's.

        """
        with self._db.session() as session:
            row = owned_conversation(session, principal, conversation_id, self._settings.retention)
            hooked = row.kept_by_hooks
            latest = session.scalar(
                select(Message.agent)
                .where(Message.conversation_id == conversation_id, Message.role == "assistant")
                .order_by(Message.seq.desc())
                .limit(1)
            )
        if latest is None and not hooked:
            return None
        restored = self._state.restore(conversation_id, principal)
        if restored is None:
            return None
        waiting = _waiting_run(restored[0])
        if waiting is not None:
            return waiting.agent
        if hooked and not waiting_only and restored[0].runs:
            return restored[0].runs[-1].agent
        return None

    # --- running --------------------------------------------------------------------------------

    def run_sync(self, run: PreparedRun) -> Iterator[Event]:
        """:meth:`run` for synchronous callers (the CLI), on :mod:`search2o.aio`'s loop."""
        return aio.iterate(self.run(run))

    async def run(
        self,
        run: PreparedRun,
        stop: threading.Event | None = None,
        on_stored: Callable[[Session, str, str], None] | None = None,
    ) -> AsyncIterator[Event]:
        """Run ``run`` and yield its events as they happen (see the module docstring).

        ``on_stored(session, conversation_id, role)`` is called inside the transaction that
        stores the user's message (``"user"``; in a conversation the hooks keep, the one that
        touches its entry) and inside the one that stores the answer or the failure
        (``"assistant"``), as in :meth:`search2o.query.turn.TurnEngine.run`.

        The run executes in a worker thread (the event loop stays free for other requests);
        its events cross to this coroutine through a queue. Setting ``stop``, or a consumer
        that stops early, stops the run before its next command; like any failed run it saves
        nothing and ends with an ``error`` event (``RunError``: "the run was stopped").
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        cancelled = stop or threading.Event()

        def emit(event: Event | None) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, event)

        def work() -> None:
            try:
                self._execute(run, emit, cancelled, on_stored)
            except Exception as exc:  # e.g. the conversation was deleted meanwhile; or a bug
                emit(error_event(exc))
            finally:
                emit(None)

        worker = asyncio.ensure_future(asyncio.to_thread(work))
        try:
            while (event := await queue.get()) is not None:
                yield event
        finally:
            cancelled.set()  # a no-op when the run is over
        await worker

    def _execute(
        self,
        run: PreparedRun,
        emit: Callable[[Event], None],
        cancelled: threading.Event | None = None,
        on_stored: Callable[[Session, str, str], None] | None = None,
    ) -> None:
        opened = self._open(run, on_stored)
        conversation_id, user_message_id, created = opened.id, opened.message_id, opened.created
        emit(
            ConversationEvent(
                conversation_id=conversation_id,
                created=created,
                user_message_id=user_message_id,
                agent=run.definition.name,
            )
        )
        store = self._validation_state if run.validation else self._state
        restored = store.restore(conversation_id, run.principal)
        state, version = restored if restored is not None else (ConversationState(), 0)
        effects = RunEffects(memory=self._memory.new_changes(validation=run.validation))
        context = RunContext(
            definition=run.definition,
            state=state,
            query=run.message,
            user_email=run.principal.email,
            conversation_id=conversation_id,
            inputs=run.inputs,
            now=_now(),
            cancelled=cancelled or threading.Event(),
        )
        interpreter = Interpreter(
            context,
            _Services(self, run),
            effects,
            trace=run.validation,
            on_step=lambda function, key: emit(StepEvent(function=function, command=key)),
        )
        waiting = _waiting_run(state)
        started = _now()
        run_id = uuid.uuid4().hex
        try:
            if waiting is not None and waiting.agent == run.definition.name:
                run_id, started = waiting.run_id, waiting.started_at or started
                resume = waiting.pause.resume if waiting.pause is not None else {}
                context.query = str(resume.get("query", run.message))
                output = interpreter.resume(resume["frames"], run.message, int(resume["attempts"]))
            else:
                if waiting is not None:
                    waiting.status, waiting.pause = "failed", None
                    waiting.output = {"abandoned_for": run.definition.name}
                    waiting.finished_at = _now()
                    effects.state.record_run(waiting)
                output = interpreter.start()
            record = RunRecord(
                run_id, run.definition.name, "completed", run.inputs, output, None, started, _now()
            )
            if isinstance(output, str):
                text, citations = _cite(output, interpreter.citations)
            else:  # a JSON value is shown as it is: brackets in it are not citation markers
                text, citations = json.dumps(output, ensure_ascii=False), []
            status = "completed"
        except Paused as paused:
            resume = {"frames": paused.frames, "attempts": paused.attempts, "query": context.query}
            pause = Pause(
                paused.frames[-1]["function"],
                paused.frames[-1]["position"],
                paused.question,
                resume,
            )
            record = RunRecord(
                run_id, run.definition.name, "paused", run.inputs, None, pause, started
            )
            text, output, status = paused.question, None, "paused"
            citations = []
        except RunError as exc:
            closing = None
            if waiting is not None and waiting.agent == run.definition.name:
                # The answer to a waiting question failed the run: close that run, or the
                # conversation would be stuck on it. Nothing else of the run is saved.
                waiting.status, waiting.pause = "failed", None
                waiting.output = {"error": exc.message}
                waiting.finished_at = _now()
                closing = (store, waiting, version)
            emit(self._failed(run, opened, exc, effects, closing, on_stored))
            return
        effects.state.record_run(record)
        try:
            message_id = self._save(
                run, opened, store, effects, version, text, citations, on_stored
            )
        except Search2oError as exc:
            emit(self._failed(run, opened, exc, effects, None, on_stored))
            return
        emit(DeltaEvent(text=text))
        done: dict[str, Any] = {
            "conversation_id": conversation_id,
            "message_id": message_id,
            "text": text,
            "status": status,
            "output": output,
            "citations": citations,
            "agent_run_id": run_id,
            "agent": run.definition.name,
        }
        if effects.memory.rejected:
            done["memory_rejected"] = [
                {"agentName": r.agent, "label": r.label, "reason": r.reason}
                for r in effects.memory.rejected
            ]
        if run.validation:
            done["trace"] = [entry.to_json() for entry in effects.trace]
        emit(DoneEvent(**done))

    def _open(
        self, run: PreparedRun, on_stored: Callable[[Session, str, str], None] | None = None
    ) -> _Opened:
        """Create or open the conversation and store the user's message (with us or not).

        With state hooks that keep transcripts (and not for validation runs), a conversation
        this run creates is ``kept_by_hooks``: its messages go into the state at the save, and
        here only the entry is written.
        """
        keeps = self._state.keeps_transcript and not run.validation
        with self._db.session() as session:
            if run.conversation_id is None:
                title = clean_title(f"{run.definition.name}: {run.message}")
                conversation, sealer = create_conversation(
                    session, self._vault, run.principal, title
                )
                conversation.kept_by_hooks = keeps
                created = True
            else:
                conversation = owned_conversation(
                    session, run.principal, run.conversation_id, self._settings.retention
                )
                sealer = self._vault.sealer(session, conversation.id, conversation.user_id)
                created = False
            if conversation.kept_by_hooks:
                question = _transcript_message("user", run.message, run.definition.name)
                touch_entry(session, conversation)
                if on_stored is not None:
                    on_stored(session, conversation.id, "user")
                return _Opened(conversation.id, question["id"], created, question)
            message = append_message(
                session,
                conversation,
                sealer,
                role="user",
                text=run.message,
                agent=run.definition.name,
            )
            if on_stored is not None:
                on_stored(session, conversation.id, "user")
            return _Opened(conversation.id, message.id, created)

    def _save(
        self,
        run: PreparedRun,
        opened: _Opened,
        store: StateStore,
        effects: RunEffects,
        version: int,
        text: str,
        citations: list[dict[str, Any]],
        on_stored: Callable[[Session, str, str], None] | None = None,
    ) -> str:
        """Save state, memories and the agent's message in one transaction; return its id.

        In a conversation the hooks keep, the question and the answer join the state's
        transcript instead of our ``messages`` table.
        """
        self._memory.prepare(effects.memory)
        with self._db.session() as session:
            conversation = owned_conversation(
                session, run.principal, opened.id, self._settings.retention
            )
            self._memory.apply(session, run.principal, effects.memory)
            if opened.question is not None:
                answer = _transcript_message(
                    "assistant", text, run.definition.name, citations=citations
                )
                effects.state.add_message(opened.question)
                effects.state.add_message(answer)
                touch_entry(session, conversation, messages=2)
                message_id = str(answer["id"])
            else:
                sealer = self._vault.sealer(session, conversation.id, conversation.user_id)
                message = append_message(
                    session,
                    conversation,
                    sealer,
                    role="assistant",
                    text=text,
                    citations=citations,
                    agent=run.definition.name,
                    status="complete",
                )
                message_id = str(message.id)
            # Last: a hook store's save leaves the enterprise's side changed only when every
            # write of ours went through; if it fails, this transaction rolls back.
            store.save(opened.id, run.principal, effects.state, version, session=session)
            if on_stored is not None:
                on_stored(session, opened.id, "assistant")
            return message_id

    def _failed(
        self,
        run: PreparedRun,
        opened: _Opened,
        error: Search2oError,
        effects: RunEffects,
        closing: tuple[StateStore, RunRecord, int] | None = None,
        on_stored: Callable[[Session, str, str], None] | None = None,
    ) -> Event:
        """Record the failed answer in the transcript; the state and memories stay.

        In a conversation the hooks keep, nothing of the failed run is written: its transcript
        is state, and state is never saved for a failed run.
        ``closing``: a waiting run to record as failed (and nothing else), in the same
        transaction, so the next message is not taken for its answer again.
        """
        conversation_id = opened.id
        with self._db.session() as session:
            conversation = owned_conversation(session, run.principal, conversation_id, None)
            message_id: str | None = None
            if opened.question is None:
                sealer = self._vault.sealer(session, conversation.id, conversation.user_id)
                message = append_message(
                    session,
                    conversation,
                    sealer,
                    role="assistant",
                    text=f"The agent {run.definition.name} failed: {error.message}",
                    agent=run.definition.name,
                    status="failed",
                )
                message_id = str(message.id)
            if closing is not None:
                store, closed, version = closing
                changes = StateChanges()
                changes.record_run(closed)
                # another message may have got there first: then it decides
                with contextlib.suppress(ConflictError):
                    store.save(conversation_id, run.principal, changes, version, session=session)
            if on_stored is not None:
                on_stored(session, conversation_id, "assistant")
        extra: dict[str, Any] = {}
        if run.validation:
            extra["trace"] = [entry.to_json() for entry in effects.trace]
        return error_event(error, message_id=message_id, conversation_id=conversation_id, **extra)

    # --- services -------------------------------------------------------------------------------

    def model(self, profile: str | None, temperature: float | None = None) -> ChatModel:
        """Return the chat model of ``profile`` (``None``: ``chat.profile``), built once.

        ``temperature`` builds it with that temperature in place of the profile's. The models
        are the process's (shared with the Query Engine).
        """
        return self._models.get(profile, temperature)


class _Services:
    """The interpreter's :class:`~search2o.agents.interpreter.Services` for one run."""

    def __init__(self, runner: AgentRunner, run: PreparedRun) -> None:
        self._runner = runner
        self._run = run

    def llm(
        self, profile: str | None, messages: list[ChatMessage], temperature: float | None = None
    ) -> str:
        model = self._runner.model(profile, temperature)

        async def collect() -> str:
            parts = [
                event.text
                async for event in model.stream(messages, [])
                if isinstance(event, TextDelta)
            ]
            return "".join(parts)

        return aio.run(collect())

    def search(self, query: str, limit: int | None) -> list[dict[str, Any]]:
        k = limit or self._runner._settings.chat.search_k
        result = self._runner._knowledge.search(self._run.principal, query, k)
        return [
            {
                "number": n,
                "title": hit.title,
                "source": hit.source,
                "heading_path": list(hit.heading_path),
                "text": hit.text,
                "score": round(hit.score, 6),
                "similarity": hit.similarity,
                "document_id": hit.document_id,
                "chunk_id": hit.chunk_id,
            }
            for n, hit in enumerate(result.hits, start=1)
        ]

    def memory_search(
        self, query: str, agent: str | None, label: str | None, limit: int, changes: MemoryChanges
    ) -> list[dict[str, Any]]:
        hits = self._runner._memory.search(
            self._run.principal,
            query,
            agent=agent,
            label=label,
            limit=limit,
            changes=changes,
            touch=not self._run.validation,
        )
        return [hit.to_dict() for hit in hits]
