"""The changes one run adds to a conversation's state (:class:`StateChanges`), and how they apply.

A run does not send a new copy of the state: it records new or updated run records, appended
prompt entries and system texts, variables set and deleted, messages; :func:`apply` folds them
into a :class:`~search2o.state.model.ConversationState`. The JSON form (``changes``) is in
:mod:`search2o.state.model`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from search2o.errors import InputError
from search2o.state.model import ConversationState, _variables
from search2o.state.records import Prompt, PromptChange, RunRecord, _messages
from search2o.state.values import STATE_FORMAT, _check_format, _mapping, _sequence, _text, _variable

__all__ = ["StateChanges", "apply"]


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
