"""The events of an answer: one typed, frozen vocabulary for chat turns and agent runs.

The Query Engine and the Agent Engine yield these; the chat service (:mod:`search2o.chat`)
numbers them, records them for replay and hands them to every surface; the HTTP API sends each
as one Server-Sent Event (``id: <seq>``, ``event: <kind>``, ``data: <json>``; WHATWG HTML,
"Server-sent events"). Their JSON schemas are in the OpenAPI document (``ChatEvent``).

Order: ``conversation`` first (it carries the run's id), then any of ``tool_call``, ``step``,
``citation``, ``delta``, then exactly one of ``done`` or ``error``, last. :func:`error_event`
is the one place where an exception becomes an ``error`` event.

Every class has ``kind`` (the SSE event name) and :attr:`Event.data` (the JSON payload: the
fields that were set, so a turn's ``done`` carries no agent fields).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from search2o.errors import Search2oError

__all__ = [
    "EVENT_TYPES",
    "CitationEvent",
    "ConversationEvent",
    "DeltaEvent",
    "DoneEvent",
    "ErrorEvent",
    "Event",
    "StepEvent",
    "ToolCallEvent",
    "error_event",
    "event_from",
]

log = logging.getLogger("search2o.events")


class Event(BaseModel):
    """One event of an answer; subclasses set :attr:`kind`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ClassVar[str] = ""

    @property
    def data(self) -> dict[str, Any]:
        """The JSON payload: every field that was set (``None`` kept when set explicitly)."""
        return self.model_dump(mode="json", exclude_unset=True)

    @property
    def final(self) -> bool:
        """Whether this event ends the answer (``done`` or ``error``)."""
        return self.kind in ("done", "error")


class ConversationEvent(Event):
    """Always first: the conversation (new or continued) and the run's id."""

    kind: ClassVar[str] = "conversation"
    conversation_id: str
    created: bool
    user_message_id: str
    title: str | None = Field(default=None, description="the conversation's title (turns)")
    agent: str | None = Field(default=None, description="the agent that runs (agent runs)")
    run_id: str | None = Field(
        default=None,
        description="this answer's run: follow it with GET /v1/runs/{run_id}/events, stop it "
        "with POST /v1/runs/{run_id}/stop",
    )


class ToolCallEvent(Event):
    """The model called a tool (``search_knowledge`` or ``web_search``) with its query."""

    kind: ClassVar[str] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any]


class StepEvent(Event):
    """An agent run reached a command (progress)."""

    kind: ClassVar[str] = "step"
    function: str
    command: str


class CitationEvent(Event):
    """The source a ``[n]`` marker of the answer points to, sent on its first use."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: ClassVar[str] = "citation"
    number: int
    title: str
    source: str
    url: str | None = Field(default=None, description="http/https only, else null")
    document_id: int | None = None
    heading_path: list[str] = Field(default_factory=list)


class DeltaEvent(Event):
    """The next piece of the answer's text."""

    kind: ClassVar[str] = "delta"
    text: str


class DoneEvent(Event):
    """Last on success: the stored answer."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: ClassVar[str] = "done"
    conversation_id: str
    message_id: str | None
    text: str
    citations: list[dict[str, Any]] = Field(default_factory=list)
    searched: bool | None = Field(default=None, description="turns: whether it searched")
    message_truncated: bool | None = None
    timings: dict[str, Any] | None = None
    status: str | None = Field(default=None, description="agent runs: completed or paused")
    output: Any = Field(default=None, description="agent runs: the value the run ended with")
    agent: str | None = None
    agent_run_id: str | None = Field(
        default=None, description="agent runs: the agent's run (kept across ask and resume)"
    )


class ErrorEvent(Event):
    """Last on failure: the error's class and a sentence; the partial answer's id if stored."""

    model_config = ConfigDict(frozen=True, extra="allow")

    kind: ClassVar[str] = "error"
    error: str = Field(description="the error class, e.g. ProviderError, InternalError")
    message: str
    message_id: str | None = None
    conversation_id: str | None = None


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        ConversationEvent,
        ToolCallEvent,
        StepEvent,
        CitationEvent,
        DeltaEvent,
        DoneEvent,
        ErrorEvent,
    )
}


def event_from(kind: str, data: dict[str, Any]) -> Event:
    """Rebuild an event from its kind and payload (as recorded for replay).

    Raises:
        ValueError: an unknown kind, or a payload that does not fit it.

    """
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    return cls.model_validate(data)


def error_event(exc: BaseException, **context: Any) -> ErrorEvent:
    """Turn an exception into the ``error`` event: the one place this happens.

    A :class:`Search2oError` keeps its class name and message (written for people). Anything
    else is a bug: it is logged with its traceback and the event says only ``InternalError``,
    so no internal detail reaches a client.

    Args:
        exc: what went wrong.
        **context: extra payload (``message_id``, ``conversation_id``, ``trace``).

    """
    if isinstance(exc, Search2oError):
        return ErrorEvent(error=type(exc).__name__, message=exc.message, **context)
    ids = {k: v for k, v in context.items() if k in ("conversation_id", "message_id")}
    log.error("an answer failed", exc_info=exc, extra={"fields": ids})
    return ErrorEvent(
        error="InternalError",
        message="the answer failed; the server log has the details",
        **context,
    )
