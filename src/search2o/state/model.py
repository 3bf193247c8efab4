"""The conversation state of the Agent Engine, the changes one run adds, and how they apply.

A :class:`ConversationState` holds what the agents that ran in one conversation keep between
runs (docs/conversation-state.md):

* ``runs``: every run so far, as a :class:`RunRecord` (agent, inputs, output, status, and for a
  paused run the :class:`Pause`: function, command position, question);
* ``prompts``: named :class:`Prompt` s (system text + the full history of user turns, assistant
  answers and tool results), keyed by :data:`PromptKey` ``(scope, agent, name)`` — scope
  ``"conversation"`` (``agent`` is ``None``: one per name) or ``"agent"`` (one per agent and
  name);
* ``conv``: the ``conv.`` variables every agent shares;
* ``agent``: the ``agent.`` variables of each agent that has run (``{agent: {name: value}}``);
* ``transcript``: the conversation's messages, when state hooks keep the whole conversation
  (with hooks set, an agent conversation's messages live here, in the enterprise's store, and
  our database keeps only the conversation's entry); empty otherwise.

Local variables are not kept. A run does not send a new copy of the state: it records a
:class:`StateChanges` — new or updated run records, appended prompt entries and system texts,
variables set and deleted — and :func:`apply` folds it into the state. Stores keep these
changes (so storage grows with what runs add) and fold them into snapshots now and then.

Every value must be JSON: ``None``, ``bool``, ``int``, finite ``float``, ``str``, lists
(tuples are stored as lists) and dicts with string keys. Anything else fails the save with an
:class:`~search2o.errors.InputError` naming the variable (``conv.<name>``, ``agent.<name>``),
never a silent ``None`` (RFC 8259 has no NaN or Infinity; ``json.dumps(allow_nan=False)``
refuses them the same way). Saved values are deep copies, so later changes to the objects a
run holds do not reach the store.

JSON forms (``format`` 1; stores seal these, hooks receive the state's form in plain)::

    state   = {"format": 1, "runs": [run...], "prompts": [prompt...],
               "conv": {name: value}, "agent": {agent: {name: value}},
               "transcript": [message...]}
    run     = {"run_id", "agent", "status", "inputs": {..}, "output": value,
               "pause": null | {"function", "position": [int|str...], "question", "resume": {..}},
               "started_at": iso|null, "finished_at": iso|null}
    prompt  = {"scope", "agent": str|null, "name", "system", "history": [entry...]}
    entry   = {"role": "user"|"assistant"|"tool", "content": str|null, ...tool fields}
    message = {"id", "role": "user"|"assistant", "text", "citations": [..], "status",
               "agent": str|null, "searched": bool, "created_at": iso}
    changes = {"format": 1, "runs": [run...],
               "prompts": [{"scope", "agent", "name", "system": str|null, "append": [entry...]}],
               "conv_set": {..}, "conv_delete": [name...],
               "agent_set": {agent: {..}}, "agent_delete": {agent: [name...]},
               "messages": [message...]}
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any

from search2o.errors import InputError

__all__ = [
    "HISTORY_ROLES",
    "MESSAGE_ROLES",
    "PROMPT_SCOPES",
    "RUN_STATUSES",
    "STATE_FORMAT",
    "ConversationState",
    "Pause",
    "Prompt",
    "PromptChange",
    "PromptKey",
    "RunRecord",
    "StateChanges",
    "apply",
    "check_json",
    "prompt_key",
]

STATE_FORMAT = 1
"""The version of the JSON forms above; readers refuse any other."""

RUN_STATUSES = ("completed", "paused", "failed")
"""``completed``: ended with ``end`` or ``return`` from main; ``paused``: waiting on ``ask``;
``failed``: kept only if the Agent Engine chooses to record a failed run."""

PROMPT_SCOPES = ("conversation", "agent")
HISTORY_ROLES = ("user", "assistant", "tool")

PromptKey = tuple[str, str | None, str]
"""``(scope, agent, name)``: ``("conversation", None, name)`` or ``("agent", agent, name)``."""

MAX_DEPTH = 200
"""Deepest nesting of lists and dicts a value may have."""

_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
_MAX_NAME = 200


# --- JSON values -------------------------------------------------------------------------


def check_json(value: Any, field: str) -> Any:
    """Return a deep copy of ``value`` in plain JSON types, or say why it is not JSON.

    Args:
        value: the value to check.
        field: how the error names it, e.g. ``"conv.total"``.

    Returns:
        The same value built from ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``
        (tuples become lists, ``int``/``float``/``str`` subclasses their base type).

    Raises:
        InputError: ``field`` with reason ``"is not JSON-serialisable: <type>"`` (plus where
            inside the value, e.g. ``(at ['items'][2])``) for a non-JSON type, NaN or infinity,
            a non-string dict key, a value that contains itself, or nesting deeper than
            :data:`MAX_DEPTH`.

    """
    return _copy_json(value, field, "", set(), 0)


def _not_json(field: str, what: str, path: str) -> InputError:
    where = f" (at {path})" if path else ""
    return InputError(field, f"is not JSON-serialisable: {what}{where}")


def _copy_json(value: Any, field: str, path: str, seen: set[int], depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _not_json(field, f"float {value!r}", path)
        return float(value)
    if isinstance(value, dict | list | tuple):
        if depth >= MAX_DEPTH:
            raise _not_json(field, f"nested deeper than {MAX_DEPTH} levels", path)
        if id(value) in seen:
            raise _not_json(field, "it contains itself", path)
        seen.add(id(value))
        try:
            if isinstance(value, dict):
                out: dict[str, Any] = {}
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise _not_json(field, f"dict key of type {type(key).__name__}", path)
                    out[str(key)] = _copy_json(item, field, f"{path}[{key!r}]", seen, depth + 1)
                return out
            return [
                _copy_json(item, field, f"{path}[{i}]", seen, depth + 1)
                for i, item in enumerate(value)
            ]
        finally:
            seen.discard(id(value))
    raise _not_json(field, type(value).__name__, path)


# --- small validators ----------------------------------------------------------------------


def _text(value: Any, field: str, *, limit: int | None = _MAX_NAME, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InputError(field, f"must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise InputError(field, "must not be empty")
    if limit is not None and len(value) > limit:
        raise InputError(field, f"must be at most {limit} characters")
    return value


def _optional_text(value: Any, field: str) -> str | None:
    return None if value is None else _text(value, field, limit=None, empty=True)


def _variable(name: Any, field: str) -> str:
    if not isinstance(name, str) or not _VARIABLE.fullmatch(name):
        raise InputError(
            field, f"{name!r} is not a variable name (a letter or _, then letters, digits, _)"
        )
    return name


def _mapping(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(field, f"must be an object, got {type(value).__name__}")
    return value


def _sequence(value: Any, field: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise InputError(field, f"must be a list, got {type(value).__name__}")
    return list(value)


def _check_format(data: dict[str, Any], field: str) -> None:
    fmt = data.get("format", STATE_FORMAT)
    if fmt != STATE_FORMAT:
        raise InputError(f"{field}.format", f"must be {STATE_FORMAT}, got {fmt!r}")


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


# --- records -----------------------------------------------------------------------------


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


# --- the state ------------------------------------------------------------------------------


@dataclass
class ConversationState:
    """Everything the agents of one conversation keep between runs (see the module docstring).

    Equal states have equal :meth:`to_json` forms (the order of ``prompts`` aside).
    """

    runs: list[RunRecord] = field(default_factory=list)
    prompts: dict[PromptKey, Prompt] = field(default_factory=dict)
    conv: dict[str, Any] = field(default_factory=dict)
    agent: dict[str, dict[str, Any]] = field(default_factory=dict)
    transcript: list[dict[str, Any]] = field(default_factory=list)

    def run(self, run_id: str) -> RunRecord | None:
        """Return the run ``run_id``, or ``None``."""
        return next((r for r in self.runs if r.run_id == run_id), None)

    def prompt(self, scope: str, name: str, agent: str | None = None) -> Prompt | None:
        """Return the prompt ``(scope, agent, name)``, or ``None`` when it was never used.

        Raises:
            InputError: a malformed key (see :func:`prompt_key`).

        """
        return self.prompts.get(prompt_key(scope, name, agent))

    def copy(self) -> ConversationState:
        """Return a deep copy."""
        return copy.deepcopy(self)

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form (``format`` 1), checked.

        Raises:
            InputError: a value is not JSON (``conv.<name>``, ``agent.<name>``, ...) or a field
                breaks a rule.

        """
        prompts = []
        for key, prompt in self.prompts.items():
            checked = prompt_key(key[0], key[2], key[1])
            label = _prompt_label(checked)
            prompts.append(
                {
                    "scope": checked[0],
                    "agent": checked[1],
                    "name": checked[2],
                    "system": _text(prompt.system, f"{label}.system", limit=None, empty=True),
                    "history": _history(prompt.history, f"{label}.history"),
                }
            )
        return {
            "format": STATE_FORMAT,
            "runs": [run.to_json() for run in self.runs],
            "prompts": prompts,
            "conv": _variables(self.conv, "conv", None),
            "agent": {
                _text(name, "agent"): _variables(values, "agent", name)
                for name, values in self.agent.items()
            },
            "transcript": _messages(self.transcript, "transcript"),
        }

    @classmethod
    def from_json(cls, data: Any, field: str = "state") -> ConversationState:
        """Build a state from its JSON form (as :meth:`to_json` returns it).

        Raises:
            InputError: the document is malformed; ``field`` names where, e.g.
                ``state.runs[2].status``.

        """
        value = _mapping(data, field)
        _check_format(value, field)
        state = cls()
        for i, item in enumerate(_sequence(value.get("runs", []), f"{field}.runs")):
            run = RunRecord.from_json(item, f"{field}.runs[{i}]")
            if state.run(run.run_id) is not None:
                raise InputError(f"{field}.runs[{i}].run_id", f"{run.run_id!r} appears twice")
            state.runs.append(run)
        for i, item in enumerate(_sequence(value.get("prompts", []), f"{field}.prompts")):
            where = f"{field}.prompts[{i}]"
            entry = _mapping(item, where)
            key = prompt_key(
                entry.get("scope", ""), entry.get("name", ""), entry.get("agent"), field=where
            )
            if key in state.prompts:
                raise InputError(f"{where}.name", f"prompt {key!r} appears twice")
            system = _text(entry.get("system", ""), f"{where}.system", limit=None, empty=True)
            state.prompts[key] = Prompt(
                system, _history(entry.get("history", []), f"{where}.history")
            )
        state.conv = _variables(_mapping(value.get("conv", {}), f"{field}.conv"), "conv", None)
        agents = _mapping(value.get("agent", {}), f"{field}.agent")
        state.agent = {
            _text(name, f"{field}.agent"): _variables(
                _mapping(values, f"{field}.agent.{name}"), "agent", name
            )
            for name, values in agents.items()
        }
        state.transcript = _messages(value.get("transcript", []), f"{field}.transcript")
        return state


def _variables(values: Any, kind: str, agent: str | None) -> dict[str, Any]:
    """Check a ``conv.``/``agent.`` variable map; errors name ``<kind>.<name>``."""
    mapping = _mapping(values, kind if agent is None else f"agent[{agent}]")
    out: dict[str, Any] = {}
    for name, value in mapping.items():
        label = f"{kind}.{_variable(name, kind)}"
        try:
            out[name] = check_json(value, label)
        except InputError as exc:
            reason = exc.reason if agent is None else f"{exc.reason} (agent {agent})"
            raise InputError(exc.field, reason) from None
    return out


# --- changes ------------------------------------------------------------------------------


@dataclass
class StateChanges:
    """What one run adds to the state; :func:`apply` folds it in.

    Applied in this order: ``runs`` (each replaces the record with its ``run_id`` or is
    appended; its agent gets an ``agent.`` variable map), ``prompts`` (in order),
    ``conv_delete`` then ``conv_set``, ``agent_delete`` then ``agent_set``. The builder methods
    keep sets and deletes of one name exclusive (the last call wins).

    Attributes:
        runs: new or updated run records.
        prompts: per prompt, the system text set and the history entries appended.
        conv_set, conv_delete: ``conv.`` variables set / deleted.
        agent_set, agent_delete: ``agent.`` variables set / deleted, per agent.
        messages: transcript messages appended (state hooks keeping the whole conversation).

    """

    runs: list[RunRecord] = field(default_factory=list)
    prompts: list[PromptChange] = field(default_factory=list)
    conv_set: dict[str, Any] = field(default_factory=dict)
    conv_delete: list[str] = field(default_factory=list)
    agent_set: dict[str, dict[str, Any]] = field(default_factory=dict)
    agent_delete: dict[str, list[str]] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)

    # Builders for the Agent Engine; none of them checks values (the save does).

    def record_run(self, run: RunRecord) -> None:
        """Add or replace (same ``run_id``) a run record."""
        self.runs = [r for r in self.runs if r.run_id != run.run_id] + [run]

    def append_prompt(
        self,
        scope: str,
        name: str,
        entries: list[dict[str, Any]],
        *,
        agent: str | None = None,
        system: str | None = None,
    ) -> None:
        """Append history ``entries`` to a prompt and/or set its ``system`` text."""
        for change in self.prompts:
            if (change.scope, change.agent, change.name) == (scope, agent, name):
                change.append.extend(entries)
                if system is not None:
                    change.system = system
                return
        self.prompts.append(PromptChange(scope, agent, name, system, list(entries)))

    def set_conv(self, name: str, value: Any) -> None:
        """Set ``conv.<name>``."""
        self.conv_set[name] = value
        self.conv_delete = [n for n in self.conv_delete if n != name]

    def delete_conv(self, name: str) -> None:
        """Delete ``conv.<name>``."""
        self.conv_set.pop(name, None)
        if name not in self.conv_delete:
            self.conv_delete.append(name)

    def set_agent(self, agent: str, name: str, value: Any) -> None:
        """Set ``agent.<name>`` of ``agent``."""
        self.agent_set.setdefault(agent, {})[name] = value
        if agent in self.agent_delete:
            self.agent_delete[agent] = [n for n in self.agent_delete[agent] if n != name]

    def delete_agent(self, agent: str, name: str) -> None:
        """Delete ``agent.<name>`` of ``agent``."""
        self.agent_set.get(agent, {}).pop(name, None)
        names = self.agent_delete.setdefault(agent, [])
        if name not in names:
            names.append(name)

    def add_message(self, message: dict[str, Any]) -> None:
        """Append a message to the transcript (see :class:`ConversationState`)."""
        self.messages.append(message)

    def is_empty(self) -> bool:
        """Whether applying these changes would change nothing."""
        return not (
            self.messages
            or self.runs
            or self.prompts
            or self.conv_set
            or self.conv_delete
            or any(self.agent_set.values())
            or any(self.agent_delete.values())
        )

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form (``format`` 1) with every value checked and copied.

        Raises:
            InputError: e.g. ``conv.<name>`` / ``agent.<name>`` with reason
                ``"is not JSON-serialisable: <type>"``, or a malformed run record or prompt.

        """
        runs = [run.to_json() for run in self.runs]
        if len({r["run_id"] for r in runs}) != len(runs):
            raise InputError("runs", "a run_id appears twice; record each run once per save")
        return {
            "format": STATE_FORMAT,
            "runs": runs,
            "prompts": [change.to_json() for change in self.prompts],
            "conv_set": _variables(self.conv_set, "conv", None),
            "conv_delete": [_variable(n, "conv_delete") for n in self.conv_delete],
            "agent_set": {
                _text(agent, "agent_set"): _variables(values, "agent", agent)
                for agent, values in self.agent_set.items()
            },
            "agent_delete": {
                _text(agent, "agent_delete"): [
                    _variable(n, f"agent_delete.{agent}") for n in _sequence(names, "agent_delete")
                ]
                for agent, names in self.agent_delete.items()
            },
            "messages": _messages(self.messages, "messages"),
        }

    def validate(self) -> None:
        """Check every value now (the same checks as a save).

        Raises:
            InputError: see :meth:`to_json`.

        """
        self.to_json()

    @classmethod
    def from_json(cls, data: Any, field: str = "changes") -> StateChanges:
        """Build changes from their JSON form.

        Raises:
            InputError: the document is malformed (``field`` names where).

        """
        value = _mapping(data, field)
        _check_format(value, field)
        runs = [
            RunRecord.from_json(item, f"{field}.runs[{i}]")
            for i, item in enumerate(_sequence(value.get("runs", []), f"{field}.runs"))
        ]
        prompts = [
            PromptChange.from_json(item, f"{field}.prompts[{i}]")
            for i, item in enumerate(_sequence(value.get("prompts", []), f"{field}.prompts"))
        ]
        agent_set = _mapping(value.get("agent_set", {}), f"{field}.agent_set")
        agent_delete = _mapping(value.get("agent_delete", {}), f"{field}.agent_delete")
        changes = cls(
            runs=runs,
            prompts=prompts,
            conv_set=_variables(
                _mapping(value.get("conv_set", {}), f"{field}.conv_set"), "conv", None
            ),
            conv_delete=[
                _variable(n, f"{field}.conv_delete")
                for n in _sequence(value.get("conv_delete", []), f"{field}.conv_delete")
            ],
            agent_set={
                _text(a, f"{field}.agent_set"): _variables(
                    _mapping(v, f"{field}.agent_set.{a}"), "agent", a
                )
                for a, v in agent_set.items()
            },
            agent_delete={
                _text(a, f"{field}.agent_delete"): [
                    _variable(n, f"{field}.agent_delete.{a}")
                    for n in _sequence(v, f"{field}.agent_delete.{a}")
                ]
                for a, v in agent_delete.items()
            },
            messages=_messages(value.get("messages", []), f"{field}.messages"),
        )
        return changes


def apply(state: ConversationState, changes: StateChanges) -> ConversationState:
    """Return ``state`` with ``changes`` folded in; neither argument is modified.

    The order is described on :class:`StateChanges`. Values are deep-copied, so the result
    shares no mutable object with the arguments.

    Returns:
        The new :class:`ConversationState`.

    """
    return _apply_in_place(copy.deepcopy(state), copy.deepcopy(changes))


def _apply_in_place(state: ConversationState, changes: StateChanges) -> ConversationState:
    """Fold ``changes`` into ``state`` itself (both freshly decoded, owned by the caller)."""
    for run in changes.runs:
        for i, existing in enumerate(state.runs):
            if existing.run_id == run.run_id:
                state.runs[i] = run
                break
        else:
            state.runs.append(run)
        state.agent.setdefault(run.agent, {})
    for change in changes.prompts:
        key = (change.scope, change.agent, change.name)
        prompt = state.prompts.get(key)
        if prompt is None:
            prompt = state.prompts[key] = Prompt()
        if change.system is not None:
            prompt.system = change.system
        prompt.history.extend(change.append)
    for name in changes.conv_delete:
        state.conv.pop(name, None)
    state.conv.update(changes.conv_set)
    for agent, names in changes.agent_delete.items():
        variables = state.agent.get(agent)
        if variables is not None:
            for name in names:
                variables.pop(name, None)
    for agent, values in changes.agent_set.items():
        state.agent.setdefault(agent, {}).update(values)
    state.transcript.extend(changes.messages)
    return state
