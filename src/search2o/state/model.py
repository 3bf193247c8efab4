"""The conversation state of the Agent Engine, the changes one run adds, and how they apply.

The state itself is :class:`ConversationState` here; its records (runs, prompts, messages) are
in :mod:`search2o.state.records`, its values' rules in :mod:`search2o.state.values`, the
changes of a run and :func:`~search2o.state.changes.apply` in :mod:`search2o.state.changes`.

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
variables set and deleted — and :func:`apply` folds it into the state. Stores keep these changes
(so storage grows with what runs add) and fold them into snapshots now and then.

Every value must be JSON: ``None``, ``bool``, ``int``, finite ``float``, ``str``, lists (tuples
are stored as lists) and dicts with string keys. Anything else fails the save with an
:class:`~search2o.errors.InputError` naming the variable (``conv.<name>``, ``agent.<name>``),
never a silent ``None`` (RFC 8259 has no NaN or Infinity; ``json.dumps(allow_nan=False)``
refuses them the same way). Saved values are deep copies, so later changes to the objects a run
holds do not reach the store.

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
from dataclasses import dataclass, field
from typing import Any

from search2o.errors import InputError
from search2o.state.records import (
    Prompt,
    PromptKey,
    RunRecord,
    _history,
    _messages,
    _prompt_label,
    prompt_key,
)
from search2o.state.values import (
    STATE_FORMAT,
    _check_format,
    _mapping,
    _sequence,
    _text,
    _variable,
    check_json,
)

__all__ = [
    "STATE_FORMAT",
    "ConversationState",
    "Prompt",
    "PromptKey",
    "RunRecord",
    "check_json",
    "prompt_key",
]


# --- JSON values -------------------------------------------------------------------------


# --- small validators ----------------------------------------------------------------------


# --- records -----------------------------------------------------------------------------


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
