"""The chat service: the one entry below every surface for answering a message.

:meth:`ChatService.prepare` validates a message once for chat turns and agent runs alike
(:func:`search2o.textrules.check_text`), decides what answers it — the agent named, the agent
whose question waits in the conversation, or a chat turn of the Query Engine — and checks the
conversation's owner, all before anything is written. Then:

* :meth:`ChatService.start` begins the answer as a *run* (:mod:`search2o.chat.runs`) written by a
  task of this process, independent of whoever asked: a client whose connection drops does not
  stop it, and follows it again with :meth:`ChatService.follow` from the last event it saw
  (on any process sharing the database);
* :meth:`ChatService.run` is start + follow for a caller that consumes the answer itself (the
  CLI, a JSON response): closing it early stops the answer;
* :meth:`ChatService.stop` stops a run from any process; the partial answer is stored as
  ``interrupted``.

The API (``POST /v1/chat``, ``/v1/runs``), ``search2o chat``, ``search2o ask`` and
``search2o agents run`` all go through here, so ``search2o chat`` answers an agent's waiting
question like the API does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from search2o import aio
from search2o.accounts import Principal
from search2o.agents.registry import AgentRegistry
from search2o.agents.run_parts import PreparedRun
from search2o.agents.runner import AgentRunner
from search2o.chat.runs import LiveRuns, RunInfo, RunStore
from search2o.errors import InputError, StorageError
from search2o.events import ConversationEvent, DoneEvent, ErrorEvent, Event, error_event
from search2o.query.page import check_page
from search2o.query.turn import TurnEngine
from search2o.query.turn_state import PreparedTurn
from search2o.textrules import check_text, text_problem

if TYPE_CHECKING:
    from search2o.config import Settings

__all__ = ["ChatService", "PreparedAnswer"]

log = logging.getLogger("search2o.chat")

PageInput = tuple[str | None, str | None, str]
"""A page as received: ``(url, title, text)``, validated by :func:`check_page`."""


@dataclass(frozen=True)
class PreparedAnswer:
    """A validated message and what will answer it: a chat turn or an agent run."""

    principal: Principal
    turn: PreparedTurn | None = None
    agent_run: PreparedRun | None = None

    @property
    def conversation_id(self) -> str | None:
        """The conversation the message continues, or ``None`` for a new one."""
        ask = self.turn if self.turn is not None else self.agent_run
        return ask.conversation_id if ask is not None else None

    @property
    def agent(self) -> str | None:
        """The agent that answers, or ``None`` for a chat turn."""
        return self.agent_run.definition.name if self.agent_run is not None else None


@dataclass
class _Writer:
    """A run being written by this process: its task and its stop signal."""

    task: asyncio.Task[None]
    stop: threading.Event = field(default_factory=threading.Event)


class ChatService:
    """Answers messages as runs (see the module docstring).

    Args:
        settings: the process's settings (``chat.max_message_chars``, ``runs``).
        turns: builds the Query Engine on first use (it loads models).
        runner: builds the Agent Engine's runner on first use.
        agents: the stored agent definitions.
        runs: the database side of runs.

    """

    def __init__(
        self,
        settings: Settings,
        turns: Callable[[], TurnEngine],
        runner: Callable[[], AgentRunner],
        agents: AgentRegistry,
        runs: RunStore,
    ) -> None:
        self._settings = settings
        self._turns = turns
        self._runner = runner
        self._agents = agents
        self.runs = runs
        self.live = LiveRuns()
        self._writers: dict[str, _Writer] = {}
        self._swept = False

    # --- preparing --------------------------------------------------------------------------

    def prepare(
        self,
        principal: Principal,
        message: str,
        conversation_id: str | None = None,
        agent: str | None = None,
        inputs: dict[str, Any] | None = None,
        page: PageInput | None = None,
    ) -> PreparedAnswer:
        """Validate a message and decide what answers it, writing nothing.

        ``page`` is the page the user reads, ``(url, title, text)``, sent as one untrusted
        source with a chat turn (:mod:`search2o.query.page`); an agent run takes none.

        An agent answers when ``agent`` is named, when the conversation has an agent's run
        waiting on ``ask`` (the message is its answer; a deleted agent's question is moot and a
        chat turn answers), or when the state hooks keep the conversation (its last agent
        answers: its transcript is the enterprise's). Otherwise a chat turn does.

        Raises:
            InputError: the message is empty, too long, holds a NUL or a lone surrogate
                (``message``); a NUL or lone surrogate in ``conversation_id``; ``inputs``
                without an agent; bad inputs; a bad ``page`` field
                (``page.url``, ``page.title``, ``page.text``), or a page for an agent.
            NotFoundError: the conversation is missing or another user's; no such agent.

        """
        text = check_text(
            message,
            "message",
            max_chars=self._settings.chat.max_message_chars,
            setting="chat.max_message_chars",
        )
        if conversation_id is not None and (problem := text_problem(conversation_id)):
            # As a NUL in a path parameter (api.param_texts): no id can hold it.
            raise InputError("conversation_id", problem)
        checked = (
            check_page(*page, max_chars=self._settings.chat.max_page_chars)
            if page is not None
            else None
        )
        if agent is None and conversation_id is not None:
            runner = self._runner()
            agent = runner.answering_agent(principal, conversation_id)
            if agent is not None and agent not in {a.name for a in self._agents.list()}:
                agent = None  # its agent was deleted: the question is moot, the chat goes on
            if agent is None and runner.kept_by_hooks(principal, conversation_id):
                raise InputError(
                    "agent",
                    "this conversation is kept by the organisation's state service and has no "
                    "agent to answer it; name one with `agent`, or start a new conversation",
                )
        if agent is None:
            if inputs is not None:
                raise InputError("inputs", "only with `agent`")
            turn = self._turns().prepare(principal, text, conversation_id, checked)
            return PreparedAnswer(principal, turn=turn)
        if checked is not None:
            raise InputError(
                "page", "a page goes with a chat turn only, not to an agent (nor its question)"
            )
        runner = self._runner()
        definition = self._agents.get(agent, field="agent")
        prepared = runner.prepare(principal, definition, text, conversation_id, inputs)
        return PreparedAnswer(principal, agent_run=prepared)

    # --- running ----------------------------------------------------------------------------

    async def start(self, prepared: PreparedAnswer) -> str:
        """Begin the answer as a run written by a task of this process; return the run's id.

        A message continuing a conversation first interrupts the stale runs there
        (:meth:`RunStore.interrupt_orphans`), so a dead run's answer comes before it.

        The first event (``conversation``) carries the id. Must be awaited on the event loop
        that will keep running the task (the server's, or :mod:`search2o.aio`'s).
        """
        if not self._swept:  # the first answer of a process cleans up after earlier ones
            self._swept = True
            await asyncio.to_thread(self.runs.sweep)
        elif prepared.conversation_id is not None:
            # A run that died in this conversation gets its answer before the new question.
            await asyncio.to_thread(self.runs.interrupt_orphans, prepared.conversation_id)
        run_id = await asyncio.to_thread(self.runs.create, prepared.principal, prepared.agent)
        self.live.open(run_id, prepared.principal.user_id)
        stop = threading.Event()
        task = asyncio.get_running_loop().create_task(self._write(run_id, prepared, stop))
        self._writers[run_id] = _Writer(task, stop)
        task.add_done_callback(lambda _t: self._writers.pop(run_id, None))
        return run_id

    async def follow(
        self, principal: Principal, run_id: str, after: int = 0
    ) -> AsyncIterator[tuple[int, Event]]:
        """Yield ``(number, event)`` for every event of a run above ``after``, then live ones.

        Ends after the run's last event. Leaving early changes nothing: the run goes on.

        Raises:
            NotFoundError: the run is missing, finished long ago, or another user's.

        """
        info = await asyncio.to_thread(self.runs.info, principal, run_id)
        seq = max(after, 0)
        poll = self._settings.runs.poll_s
        while True:
            local = self.live.after(run_id, principal.user_id, seq)
            if local is not None:
                events, finished = local
                for number, event in events:
                    seq = number
                    yield number, event
                    if event.final:
                        return
                if not finished:
                    await self.live.wait(run_id, self._settings.runs.heartbeat_s)
                continue
            events, info = await asyncio.to_thread(self.runs.events_after, principal, run_id, seq)
            for number, event in events:
                seq = number
                yield number, event
                if event.final:
                    return
            if info.finished and seq >= info.last_seq:
                # Its process died before the last event (kill -9): say so, then end.
                yield seq + 1, _interrupted(info)
                return
            await asyncio.sleep(poll)

    async def run(self, prepared: PreparedAnswer) -> AsyncIterator[Event]:
        """Start the answer and yield its events; closing this early stops the answer.

        For callers that consume the answer themselves (the CLI, a JSON response). The stop is
        awaited, so when this returns the partial answer is stored.
        """
        run_id = await self.start(prepared)
        ended = False
        try:
            async for _, event in self.follow(prepared.principal, run_id):
                ended = event.final
                yield event
        finally:
            writer = self._writers.get(run_id)
            if writer is not None:
                if not ended:
                    writer.stop.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(writer.task)

    def run_sync(self, prepared: PreparedAnswer) -> Iterator[Event]:
        """:meth:`run` for synchronous callers, on :mod:`search2o.aio`'s loop (Ctrl-C stops)."""
        return aio.iterate(self.run(prepared))

    def stop(self, principal: Principal, run_id: str) -> RunInfo:
        """Stop a run, whichever process writes it; its partial answer is stored interrupted.

        Raises:
            NotFoundError: the run is missing or another user's.

        """
        info = self.runs.request_stop(principal, run_id)
        writer = self._writers.get(run_id)
        if writer is not None and not info.finished:
            writer.stop.set()  # this process writes it: no need to wait for the heartbeat
        return info

    async def close(self) -> None:
        """Stop every run this process writes and wait for each to store its answer."""
        writers = list(self._writers.values())
        for writer in writers:
            writer.stop.set()
        for writer in writers:
            with contextlib.suppress(asyncio.CancelledError):
                await writer.task

    # --- the writer -------------------------------------------------------------------------

    def _events(
        self, run_id: str, prepared: PreparedAnswer, stop: threading.Event
    ) -> AsyncIterator[Event]:
        # The run learns its conversation in the transaction that stores the question, and
        # that its answer is stored in the answer's: a process killed before the run records
        # anything leaves the sweeper a conversation for the interrupted answer, and one
        # killed after the answer leaves it nothing to add.
        link = functools.partial(self.runs.note_stored, run_id)
        if prepared.agent_run is not None:
            return self._runner().run(prepared.agent_run, stop, link)
        assert prepared.turn is not None
        return self._turns().run(prepared.turn, stop, link)

    async def _write(self, run_id: str, prepared: PreparedAnswer, stop: threading.Event) -> None:
        """Drive the answer; publish each event here and record it, batched, in the database."""
        settings = self._settings.runs
        owner = prepared.principal.user_id
        pending: list[tuple[int, Event]] = []
        conversation: str | None = None
        seq, status, flushed = 0, "failed", time.monotonic()

        async def flush() -> None:
            nonlocal flushed
            batch, pending[:] = list(pending), []
            flushed = time.monotonic()
            if await asyncio.to_thread(self.runs.record, run_id, owner, conversation, batch):
                stop.set()

        iterator = aiter(self._events(run_id, prepared, stop))
        step: asyncio.Future[Event] | None = None
        try:
            while True:
                step = asyncio.ensure_future(anext(iterator))
                while not step.done():
                    await asyncio.wait({step}, timeout=settings.heartbeat_s)
                    if not step.done():
                        await flush()  # a heartbeat, and the stop flag, while the answer waits
                try:
                    event = step.result()
                except StopAsyncIteration:
                    break
                except Exception as exc:  # the engine failed before its own error event
                    event = error_event(exc, conversation_id=conversation)
                seq += 1
                if isinstance(event, ConversationEvent):
                    conversation = event.conversation_id
                    event = event.model_copy(update={"run_id": run_id})
                self.live.publish(run_id, seq, event)
                pending.append((seq, event))
                if event.final:
                    status = _status(event, stop)
                    break
                if time.monotonic() - flushed >= settings.flush_s:
                    await flush()
        except asyncio.CancelledError:
            # The process is going away: let the answer store what it wrote, then go.
            stop.set()
            await _settle(step)
            raise
        except StorageError as exc:
            # Its events cannot be recorded (the database went away mid-answer): stop the
            # answer and end it for its followers with the error, so a client gets a clear 503
            # instead of waiting for events that never come. Once the database is back, the
            # runs sweeper interrupts the run (its heartbeat stopped) and stores what it wrote.
            stop.set()
            await _settle(step)
            seq += 1
            self.live.publish(run_id, seq, error_event(exc, conversation_id=conversation))
        finally:
            try:
                if step is None or step.done():
                    await aio.aclose(iterator)
                with contextlib.suppress(Exception):
                    await flush()
                try:
                    await asyncio.to_thread(self.runs.finish, run_id, status)
                except StorageError as exc:
                    log.warning(
                        "a run could not be finished; the runs sweeper will",
                        extra={"fields": {"run_id": run_id, "error": type(exc).__name__}},
                    )
            finally:
                self.live.close(run_id)  # followers here end, whatever the database said


async def _settle(step: asyncio.Future[Event] | None) -> None:
    """Give the engine's pending step up to ``_DRAIN_S`` to see the stop flag and finish."""
    if step is not None and not step.done():
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(step), _DRAIN_S)


_DRAIN_S = 10.0


def _status(event: Event, stop: threading.Event) -> str:
    if isinstance(event, DoneEvent):
        return "interrupted" if event.status == "interrupted" else "complete"
    return "interrupted" if stop.is_set() else "failed"


def _interrupted(info: RunInfo) -> ErrorEvent:
    return ErrorEvent(
        error="RunInterrupted",
        message="the answer was interrupted (the server writing it stopped); what it wrote "
        "so far is in the conversation",
        conversation_id=info.conversation_id,
    )
