"""The records of conversation state: runs, prompts and transcript messages.

Runs are :class:`RunRecord` s (with a :class:`Pause` when paused), prompts :class:`Prompt` s
(changed by :class:`PromptChange` s).
Each is read from and written to the JSON forms of :mod:`search2o.state.model`, checked field by
field with errors naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from search2o.errors import InputError
from search2o.state.values import _mapping, _optional_text, _sequence, _text, check_json

__all__ = [
    "HISTORY_ROLES",
    "MESSAGE_ROLES",
    "PROMPT_SCOPES",
    "RUN_STATUSES",
    "Pause",
    "Prompt",
    "PromptChange",
    "PromptKey",
    "RunRecord",
    "prompt_key",
]


RUN_STATUSES = ("completed", "paused", "failed")
"""``completed``: ended with ``end`` or ``return`` from main; ``paused``: waiting on ``ask``;
``failed``: kept only if the Agent Engine chooses to record a failed run."""


PROMPT_SCOPES = ("conversation", "agent")


HISTORY_ROLES = ("user", "assistant", "tool")


PromptKey = tuple[str, str | None, str]
"""``(scope, agent, name)``: ``("conversation", None, name)`` or ``("agent", agent, name)``."""


def prompt_key(
    scope: str, name: str, agent: str | None = None, *, field: str = "prompt"
) -> PromptKey:
    """Return the checked key of a named prompt.

    Args:
        scope: ``"conversation"`` (one prompt per name) or ``"agent"`` (one per agent and name).
        name: the prompt's name.
        agent: the agent owning an ``agent``-scoped prompt; must be ``None`` for ``conversation``.
        field: how errors name the prompt (``<field>.scope``, ...).

    Returns:
        ``(scope, agent, name)``.

    Raises:
        InputError: unknown scope, empty or overlong name, or an agent missing/present where it
            must not be.

    """
    if scope not in PROMPT_SCOPES:
        raise InputError(f"{field}.scope", f"{scope!r} is not a scope (conversation or agent)")
    _text(name, f"{field}.name")
    if scope == "agent":
        _text(agent, f"{field}.agent")
    elif agent is not None:
        raise InputError(f"{field}.agent", "must be null for a conversation-scoped prompt")
    return (scope, agent, name)


def _prompt_label(key: PromptKey) -> str:
    scope, agent, name = key
    return f"prompts[{name}]" if scope == "conversation" else f"prompts[{agent}/{name}]"


def _entry(value: Any, field: str) -> dict[str, Any]:
    entry = _mapping(value, field)
    if entry.get("role") not in HISTORY_ROLES:
        raise InputError(
            f"{field}.role", f"{entry.get('role')!r} is not a role (user, assistant or tool)"
        )
    if "content" not in entry:
        raise InputError(f"{field}.content", "is required (a string, or null)")
    if entry["content"] is not None and not isinstance(entry["content"], str):
        raise InputError(f"{field}.content", "must be a string or null")
    copied: dict[str, Any] = check_json(entry, field)
    return copied


def _history(value: Any, field: str) -> list[dict[str, Any]]:
    return [_entry(item, f"{field}[{i}]") for i, item in enumerate(_sequence(value, field))]


MESSAGE_ROLES = ("user", "assistant")


def _message(value: Any, field: str) -> dict[str, Any]:
    """Return the checked JSON form of a transcript message (see the module docstring)."""
    data = _mapping(value, field)
    role = data.get("role")
    if role not in MESSAGE_ROLES:
        raise InputError(f"{field}.role", f"{role!r} is not a role (user or assistant)")
    citations = _sequence(data.get("citations", []), f"{field}.citations")
    return {
        "id": _text(data.get("id"), f"{field}.id"),
        "role": role,
        "text": _text(data.get("text", ""), f"{field}.text", limit=None, empty=True),
        "citations": check_json(citations, f"{field}.citations"),
        "status": _text(data.get("status", "complete"), f"{field}.status"),
        "agent": _optional_text(data.get("agent"), f"{field}.agent"),
        "searched": bool(data.get("searched", False)),
        "created_at": _text(data.get("created_at"), f"{field}.created_at"),
    }


def _messages(value: Any, field: str) -> list[dict[str, Any]]:
    return [_message(item, f"{field}[{i}]") for i, item in enumerate(_sequence(value, field))]


def _check_pause(value: Any, field: str) -> dict[str, Any]:
    """Return the checked JSON form of a pause given as a mapping."""
    data = _mapping(value, field)
    position = _sequence(data.get("position"), f"{field}.position")
    for i, step in enumerate(position):
        ok = (isinstance(step, int) and not isinstance(step, bool) and step >= 0) or (
            isinstance(step, str) and bool(step)
        )
        if not ok:
            raise InputError(f"{field}.position[{i}]", "must be an index >= 0 or a non-empty name")
    return {
        "function": _text(data.get("function"), f"{field}.function"),
        "position": [int(s) if isinstance(s, int) else str(s) for s in position],
        "question": _text(data.get("question"), f"{field}.question", limit=None, empty=True),
        "resume": check_json(
            _mapping(data.get("resume", {}), f"{field}.resume"), f"{field}.resume"
        ),
    }


def _check_run(value: Any, field: str) -> dict[str, Any]:
    """Return the checked JSON form of a run record given as a mapping."""
    data = _mapping(value, field)
    status = data.get("status")
    if status not in RUN_STATUSES:
        raise InputError(
            f"{field}.status", f"{status!r} is not a status ({', '.join(RUN_STATUSES)})"
        )
    pause = data.get("pause")
    if (status == "paused") != (pause is not None):
        raise InputError(f"{field}.pause", "is required exactly when the status is paused")
    return {
        "run_id": _text(data.get("run_id"), f"{field}.run_id"),
        "agent": _text(data.get("agent"), f"{field}.agent"),
        "status": status,
        "inputs": check_json(
            _mapping(data.get("inputs", {}), f"{field}.inputs"), f"{field}.inputs"
        ),
        "output": check_json(data.get("output"), f"{field}.output"),
        "pause": None if pause is None else _check_pause(pause, f"{field}.pause"),
        "started_at": _optional_text(data.get("started_at"), f"{field}.started_at"),
        "finished_at": _optional_text(data.get("finished_at"), f"{field}.finished_at"),
    }


@dataclass
class Pause:
    """Where a paused run waits for the user's answer to ``ask``.

    Attributes:
        function: the agent function that asked.
        position: the command's position inside it, as a path of indexes and branch names
            (e.g. ``[3]`` or ``[2, "then", 0]``); the Agent Engine chooses the encoding.
        question: the question asked (already evaluated).
        resume: anything else the Agent Engine needs to resume (JSON object), e.g. the variable
            that receives the answer.

    """

    function: str
    position: list[int | str]
    question: str
    resume: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the checked JSON form.

        Raises:
            InputError: a field breaks a rule (named ``pause.<field>``).

        """
        return _check_pause(vars(self), "pause")

    @classmethod
    def from_json(cls, data: Any, field: str = "pause") -> Pause:
        """Build a pause from its JSON form.

        Raises:
            InputError: a field is missing or of the wrong type (named ``<field>.<key>``).

        """
        checked = _check_pause(data, field)
        return cls(checked["function"], checked["position"], checked["question"], checked["resume"])


@dataclass
class RunRecord:
    """One run of an agent in the conversation.

    Attributes:
        run_id: unique within the conversation; a later record with the same id replaces it
            (a paused run that resumed and completed).
        agent: the agent's name.
        status: one of :data:`RUN_STATUSES`; ``paused`` exactly when :attr:`pause` is set.
        inputs: the run's inputs (JSON object).
        output: what ``return``/``end`` produced (JSON), ``None`` while paused.
        pause: where a paused run waits.
        started_at, finished_at: ISO-8601 times, as the Agent Engine writes them.

    """

    run_id: str
    agent: str
    status: str
    inputs: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    pause: Pause | None = None
    started_at: str | None = None
    finished_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the checked JSON form.

        Raises:
            InputError: a field breaks a rule, e.g. ``runs[<run_id>].inputs`` is not JSON.

        """
        data = dict(vars(self))
        data["pause"] = None if self.pause is None else vars(self.pause)
        return _check_run(data, f"runs[{self.run_id}]")

    @classmethod
    def from_json(cls, data: Any, field: str = "run") -> RunRecord:
        """Build a run record from its JSON form.

        Raises:
            InputError: a field is missing or breaks a rule (named from ``field``).

        """
        checked = _check_run(data, field)
        pause = checked["pause"]
        return cls(
            run_id=checked["run_id"],
            agent=checked["agent"],
            status=checked["status"],
            inputs=checked["inputs"],
            output=checked["output"],
            pause=None
            if pause is None
            else Pause(pause["function"], pause["position"], pause["question"], pause["resume"]),
            started_at=checked["started_at"],
            finished_at=checked["finished_at"],
        )


@dataclass
class Prompt:
    """A named prompt: its system text and the full history of its conversation.

    ``history`` entries are ``{"role": "user"|"assistant"|"tool", "content": str|None, ...}``;
    tool fields (``tool_calls``, ``tool_call_id``, ``name``) ride along as JSON.
    """

    system: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class PromptChange:
    """What one run did to one named prompt: set its system text and/or append entries.

    A prompt that does not exist yet is created (system text ``""`` unless ``system`` is set).
    """

    scope: str
    agent: str | None
    name: str
    system: str | None = None
    append: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> PromptKey:
        """The prompt's checked :data:`PromptKey`."""
        return prompt_key(self.scope, self.name, self.agent)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form.

        Raises:
            InputError: a bad key, system text or history entry (named
                ``prompts[<name>].append[<i>]...``).

        """
        key = self.key
        label = _prompt_label(key)
        return {
            "scope": key[0],
            "agent": key[1],
            "name": key[2],
            "system": _optional_text(self.system, f"{label}.system"),
            "append": _history(self.append, f"{label}.append"),
        }

    @classmethod
    def from_json(cls, data: Any, field: str = "prompt") -> PromptChange:
        """Build a prompt change from its JSON form.

        Raises:
            InputError: a field is missing or breaks a rule.

        """
        value = _mapping(data, field)
        scope, agent, name = prompt_key(
            value.get("scope", ""), value.get("name", ""), value.get("agent"), field=field
        )
        change = cls(scope, agent, name, value.get("system"), value.get("append", []))
        checked = change.to_json()
        return cls(
            checked["scope"],
            checked["agent"],
            checked["name"],
            checked["system"],
            checked["append"],
        )
