"""The state model: JSON forms, applying changes, and the JSON-only rule for values."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

import search2o.state as state_pkg
from search2o.errors import InputError
from search2o.state import (
    ConversationState,
    Pause,
    RunRecord,
    StateChanges,
    apply,
    check_json,
    prompt_key,
)
from search2o.state.conformance import sample_changes


def test_public_namespace_is_sorted_and_importable() -> None:
    assert state_pkg.__all__ == sorted(state_pkg.__all__)
    for name in state_pkg.__all__:
        assert getattr(state_pkg, name) is not None


def test_apply_folds_runs_prompts_and_variables_without_touching_its_arguments() -> None:
    base = apply(ConversationState(), sample_changes("1"))
    before = json.dumps(base.to_json(), sort_keys=True)
    changes = StateChanges()
    changes.record_run(
        RunRecord("run-1", "triage", "completed", {"ticket": 1}, output={"team": "billing"})
    )
    changes.record_run(RunRecord("run-2", "writer", "completed"))
    changes.append_prompt("conversation", "chat", [{"role": "user", "content": "again"}])
    changes.append_prompt("agent", "notes", [], agent="writer", system="Write tersely.")
    changes.delete_conv("nested")
    changes.set_conv("counter", 2)
    changes.set_agent("triage", "seen", ["1", "2"])
    changes.delete_agent("triage", "missing")  # deleting what is not there is fine

    after = apply(base, changes)

    assert json.dumps(base.to_json(), sort_keys=True) == before
    assert [(r.run_id, r.status) for r in after.runs] == [
        ("run-1", "completed"),
        ("run-2", "completed"),
    ]
    run = after.run("run-1")
    assert run is not None and run.output == {"team": "billing"} and run.pause is None
    chat = after.prompt("conversation", "chat")
    assert chat is not None and chat.system == "You are helpful."
    assert [e["content"] for e in chat.history][-2:] == ["result", "again"]
    notes = after.prompt("agent", "notes", agent="writer")
    assert notes is not None and notes.system == "Write tersely." and notes.history == []
    assert after.conv == {"counter": 2}
    assert after.agent == {"triage": {"seen": ["1", "2"]}, "writer": {}}
    # The result shares nothing mutable with the changes.
    changes.set_agent("triage", "seen", ["changed"])
    changes.prompts[0].append.append({"role": "user", "content": "late"})
    assert after.agent["triage"]["seen"] == ["1", "2"]
    assert chat.history[-1]["content"] == "again"


def test_set_and_delete_of_one_name_keep_only_the_last() -> None:
    changes = StateChanges()
    changes.set_conv("x", 1)
    changes.delete_conv("x")
    changes.set_agent("a", "y", 1)
    changes.delete_agent("a", "y")
    changes.set_agent("a", "y", 2)
    assert changes.conv_set == {} and changes.conv_delete == ["x"]
    assert changes.agent_set == {"a": {"y": 2}} and changes.agent_delete == {"a": []}
    state = apply(ConversationState(conv={"x": 0}), changes)
    assert state.conv == {} and state.agent == {"a": {"y": 2}}


def test_json_forms_round_trip() -> None:
    state = apply(ConversationState(), sample_changes("1"))
    data = json.loads(json.dumps(state.to_json()))
    assert ConversationState.from_json(data) == state
    changes = sample_changes("2", 7)
    assert StateChanges.from_json(json.loads(json.dumps(changes.to_json()))) == changes
    assert data["format"] == 1
    assert data["prompts"][0] == {
        "scope": "conversation",
        "agent": None,
        "name": "chat",
        "system": "You are helpful.",
        "history": state.prompts[("conversation", None, "chat")].history,
    }


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({1, 2}, "is not JSON-serialisable: set"),
        (float("nan"), "is not JSON-serialisable: float nan"),
        (float("inf"), "is not JSON-serialisable: float inf"),
        (Decimal("1.5"), "is not JSON-serialisable: Decimal"),
        (b"bytes", "is not JSON-serialisable: bytes"),
        (
            {"ok": [1, {"deep": object()}]},
            "is not JSON-serialisable: object (at ['ok'][1]['deep'])",
        ),
        ({1: "int key"}, "is not JSON-serialisable: dict key of type int"),
    ],
)
def test_a_variable_that_is_not_json_fails_naming_it(value: Any, reason: str) -> None:
    changes = StateChanges()
    changes.set_conv("total", value)
    with pytest.raises(InputError) as caught:
        changes.validate()
    assert caught.value.field == "conv.total"
    assert caught.value.reason == reason

    changes = StateChanges()
    changes.set_agent("triage", "total", value)
    with pytest.raises(InputError) as caught:
        changes.to_json()
    assert caught.value.field == "agent.total"
    assert caught.value.reason == f"{reason} (agent triage)"


def test_values_that_contain_themselves_or_nest_too_deep_are_refused() -> None:
    looped: list[Any] = [1]
    looped.append(looped)
    with pytest.raises(InputError, match="contains itself"):
        check_json(looped, "conv.loop")
    deep: Any = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(InputError, match="nested deeper than 200"):
        check_json(deep, "conv.deep")
    shared = [1, 2]
    assert check_json({"a": shared, "b": shared}, "conv.ok") == {"a": [1, 2], "b": [1, 2]}


def test_values_are_copied_in_plain_json_types() -> None:
    value = {"t": (1, 2), "n": True, "f": 1.5, "none": None}
    copied = check_json(value, "conv.v")
    assert copied == {"t": [1, 2], "n": True, "f": 1.5, "none": None}
    assert copied["t"] is not value["t"]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"format": 2}, "state.format"),
        ({"runs": "x"}, "state.runs"),
        ({"runs": [{"run_id": "r", "agent": "a", "status": "odd"}]}, "state.runs[0].status"),
        ({"runs": [{"run_id": "r", "agent": "a", "status": "paused"}]}, "state.runs[0].pause"),
        ({"runs": [{"run_id": "", "agent": "a", "status": "completed"}]}, "state.runs[0].run_id"),
        (
            {
                "runs": [
                    {
                        "run_id": "r",
                        "agent": "a",
                        "status": "paused",
                        "pause": {"function": "main", "position": [-1], "question": "?"},
                    }
                ]
            },
            "state.runs[0].pause.position[0]",
        ),
        ({"prompts": [{"scope": "team", "name": "p"}]}, "state.prompts[0].scope"),
        ({"prompts": [{"scope": "agent", "name": "p"}]}, "state.prompts[0].agent"),
        (
            {"prompts": [{"scope": "conversation", "name": "p", "history": [{"role": "x"}]}]},
            "state.prompts[0].history[0].role",
        ),
        ({"conv": {"1bad": 1}}, "conv"),
        ({"conv": {"ok": float("nan")}}, "conv.ok"),
        ({"agent": {"a": "not an object"}}, "state.agent.a"),
    ],
)
def test_malformed_documents_name_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        ConversationState.from_json(data)
    assert caught.value.field == field


def test_run_records_and_pauses_keep_their_rules() -> None:
    paused = RunRecord(
        "r1", "triage", "paused", pause=Pause("main", [2, "then", 0], "Which team?", {"into": "t"})
    )
    assert RunRecord.from_json(paused.to_json()) == paused
    with pytest.raises(InputError) as caught:
        RunRecord("r2", "triage", "completed", pause=paused.pause).to_json()
    assert caught.value.field == "runs[r2].pause"
    with pytest.raises(InputError) as caught:
        RunRecord("r3", "triage", "completed", inputs={"when": object()}).to_json()
    assert caught.value.field == "runs[r3].inputs"
    duplicate = StateChanges(runs=[RunRecord("r", "a", "completed")] * 2)
    with pytest.raises(InputError, match="appears twice"):
        duplicate.validate()


def test_prompt_keys() -> None:
    assert prompt_key("conversation", "chat") == ("conversation", None, "chat")
    assert prompt_key("agent", "notes", "triage") == ("agent", "triage", "notes")
    with pytest.raises(InputError):
        prompt_key("conversation", "chat", "triage")
    with pytest.raises(InputError):
        prompt_key("agent", "notes")
    with pytest.raises(InputError):
        prompt_key("conversation", "")


def test_empty_changes() -> None:
    assert StateChanges().is_empty()
    changes = StateChanges()
    changes.set_agent("a", "x", 1)
    assert not changes.is_empty()
