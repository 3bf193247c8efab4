"""What one agent run is given and gives back: services, limits, context, effects, trace, signals.

The :class:`~search2o.agents.interpreter.Interpreter` gets a :class:`RunContext`,
:class:`RunLimits` and the outside world through :class:`Services`; it collects what the run
changes in :class:`RunEffects` and stops with :class:`Paused` (``ask``), :class:`Ended` (``end``
or ``return`` from main) or a :class:`~search2o.errors.RunError`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from search2o.agents.commands_schema import Command
from search2o.agents.definition import AgentDefinition
from search2o.agents.expressions import SandboxLimits
from search2o.errors import InputError
from search2o.memory.changes import MemoryChanges
from search2o.providers.chat import ChatMessage
from search2o.state.changes import StateChanges
from search2o.state.model import ConversationState

__all__ = [
    "MAX_CALL_DEPTH",
    "MAX_TRACE_CHARS",
    "Ended",
    "Paused",
    "RunContext",
    "RunEffects",
    "RunLimits",
    "Services",
    "TraceEntry",
]


MAX_CALL_DEPTH = 32
"""Deepest nesting of ``call``; deeper recursion fails the run with a clear error."""


MAX_TRACE_CHARS = 2000
"""A traced argument or result longer than this (as JSON) is shortened."""


class Services(Protocol):
    """What commands need from outside the interpreter (the runner binds these to the runtime)."""

    def llm(
        self, profile: str | None, messages: list[ChatMessage], temperature: float | None = None
    ) -> str:
        """Call model ``profile`` (``None``: the default) on ``messages``; return its text.

        ``temperature`` overrides the profile's for this call.
        """
        ...

    def search(self, query: str, limit: int | None) -> list[dict[str, Any]]:
        """Search the knowledge base under the user's rights; hits as JSON objects.

        Each hit holds ``title``, ``source``, ``heading_path``, ``text``, ``score``,
        ``document_id``, ``chunk_id`` (the interpreter adds its citation ``number``).
        """
        ...

    def memory_search(
        self, query: str, agent: str | None, label: str | None, limit: int, changes: MemoryChanges
    ) -> list[dict[str, Any]]:
        """Search the user's memories (``{agentName, label, text, createdAt}``, best first)."""
        ...


@dataclass
class Paused(Exception):  # noqa: N818 - a control-flow signal, not an error
    """``ask`` paused the run: the question and the frames to resume from (JSON)."""

    question: str
    frames: list[dict[str, Any]]
    attempts: int = 1


@dataclass
class Ended(Exception):  # noqa: N818 - a control-flow signal, not an error
    """``end`` anywhere, or ``return`` from ``main``: the run's output (JSON)."""

    output: Any


@dataclass
class _Returned(Exception):  # noqa: N818 - a control-flow signal, not an error
    value: Any


@dataclass
class TraceEntry:
    """One executed command: where, its evaluated arguments, its result, its time (ms)."""

    function: str
    command: str
    position: list[int | str]
    arguments: Any
    result: Any = None
    ms: float = 0.0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form used by validation traces."""
        return {
            "function": self.function,
            "command": self.command,
            "position": self.position,
            "arguments": _short(self.arguments),
            "result": _short(self.result),
            "ms": round(self.ms, 3),
            "error": self.error,
        }


@dataclass
class RunEffects:
    """What a run changes, saved only when it ends, returns from main or pauses on ask."""

    state: StateChanges = field(default_factory=StateChanges)
    memory: MemoryChanges = field(default_factory=MemoryChanges)
    trace: list[TraceEntry] = field(default_factory=list)


@dataclass(frozen=True)
class RunLimits:
    """Bounds of one whole run, beyond each expression's own (:class:`SandboxLimits`).

    Attributes:
        max_commands: commands one run may execute (``call`` fan-out multiplies them).
        max_seconds: wall-clock time of one run, model calls included.
        max_value_chars: size of any value a command sets, returns, passes or outputs, as JSON.

    """

    max_commands: int = 10_000
    max_seconds: float = 120.0
    max_value_chars: int = 1_000_000


@dataclass
class RunContext:
    """The run's inputs: who, which agent, the state before the run, the query."""

    definition: AgentDefinition
    state: ConversationState
    query: str
    user_email: str
    conversation_id: str
    inputs: dict[str, Any]
    now: str
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    run_limits: RunLimits = field(default_factory=lambda: RunLimits())
    cancelled: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Frame:
    function: str
    locals: dict[str, Any]
    depth: int
    result: Any = None
    answer: tuple[str, int] | None = None
    resume_call: Callable[[], Any] | None = None


@dataclass
class _Step:
    """One command being executed: where it is, and its trace entry."""

    frame: _Frame
    command: Command
    position: list[int | str]
    resume: list[int | str] | None
    entry: TraceEntry


def _strip_fence(text: str) -> str:
    """Drop a Markdown code fence around JSON (models often add one)."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[-1].rsplit("```", 1)[0]
    return stripped


def _json_text(value: Any, field_name: str, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps`` of a value, or an InputError naming the field when it cannot be text."""
    try:
        return json.dumps(value, ensure_ascii=False, default=default)
    except ValueError as exc:  # an int of more digits than Python writes as text
        raise InputError(
            field_name, "holds an integer of more digits than can be written as text or JSON"
        ) from exc


def _short(value: Any) -> Any:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        try:
            return repr(value)[:MAX_TRACE_CHARS]
        except ValueError:
            return f"({type(value).__name__} that cannot be shown as text)"
    if len(text) <= MAX_TRACE_CHARS:
        return value
    return text[:MAX_TRACE_CHARS] + f"... ({len(text)} characters)"
