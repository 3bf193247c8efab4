"""The agent registry on both backends: put, get, list, delete (with the agent's memories)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import inspect, select

import search2o.agents
from search2o.agents import AgentDefinition, AgentRegistry, DefinitionError
from search2o.errors import ConflictError, NotFoundError, PermissionDeniedError, StorageError
from search2o.runtime import Runtime
from search2o.storage.agent_models import Agent
from search2o.storage.db import Database
from tests.agents.registry_samples import (
    BROKEN,
    BROKEN_PATHS,
    TRAVEL,
    TRAVEL_YAML,
    add_user,
    travel,
)


def _row(runtime: Runtime, name: str) -> Agent:
    with runtime.database.session() as session:
        row = session.scalars(select(Agent).where(Agent.name == name)).one()
        session.expunge(row)
        return row


def test_the_public_names_are_sorted_and_importable() -> None:
    names = search2o.agents.__all__
    assert names == sorted(names)
    for name in names:
        assert getattr(search2o.agents, name) is not None
    assert {"AgentRegistry", "AgentDefinition", "DefinitionError", "parse_definition"} <= set(names)


def test_the_table_and_its_keys(database: Database) -> None:
    inspector = inspect(database.engine)
    columns = {c["name"]: c for c in inspector.get_columns("agents")}
    assert set(columns) == {
        "name",
        "description",
        "definition",
        "created_at",
        "updated_at",
        "updated_by",
    }
    assert inspector.get_pk_constraint("agents")["constrained_columns"] == ["name"]
    assert columns["updated_by"]["nullable"] and not columns["definition"]["nullable"]
    foreign = inspector.get_foreign_keys("agents")
    assert [(f["referred_table"], f["options"].get("ondelete")) for f in foreign] == [
        ("users", "SET NULL")
    ]


def test_put_get_list_and_replace(runtime: Runtime) -> None:
    admin = runtime.local_principal()
    registry = runtime.agents
    assert registry.list() == []

    definition, created = registry.put(TRAVEL, admin=admin)
    assert created is True
    assert isinstance(definition, AgentDefinition)
    assert (definition.name, definition.memory_labels, list(definition.functions)) == (
        "travel",
        ("last_question",),
        ["main"],
    )
    first = _row(runtime, "travel")
    assert first.created_at == first.updated_at and first.updated_by == admin.user_id
    # stored as given: plain JSON text, key order kept
    assert first.definition == json.dumps(TRAVEL, ensure_ascii=False)
    assert registry.source("travel") == TRAVEL
    assert list(registry.source("travel")["functions"]["main"]) == list(TRAVEL["functions"]["main"])
    got = registry.get("travel")
    assert got.to_json() == TRAVEL and got.memory_labels == ("last_question",)

    kitchen = travel(name="kitchen", description="Knows how you take your coffee")
    assert registry.put(json.dumps(kitchen), name="kitchen", admin=admin)[1] is True
    listed = registry.list()
    assert [(a.name, a.description) for a in listed] == [
        ("kitchen", "Knows how you take your coffee"),
        ("travel", "Remembers the airline you like"),
    ]
    assert listed[1].updated_at == first.updated_at

    replaced, created = registry.put(
        travel(description="Remembers airlines and seats"), name="travel", admin=admin
    )
    assert created is False and replaced.description == "Remembers airlines and seats"
    second = _row(runtime, "travel")
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    assert registry.get("travel").description == "Remembers airlines and seats"
    assert [a.name for a in registry.list()] == ["kitchen", "travel"]


def test_yaml_text_is_stored_as_json_as_given(runtime: Runtime) -> None:
    registry = runtime.agents
    definition, created = registry.put(TRAVEL_YAML, fmt="yaml", admin=runtime.local_principal())
    assert created and definition.description.startswith("Se souvient de la compagnie aérienne")
    stored = _row(runtime, "travel").definition
    assert "aérienne" in stored  # ensure_ascii=False: readable in the database
    assert list(json.loads(stored)) == ["name", "description", "prompts", "functions"]
    assert registry.get("travel").memory_labels == ("last_question",)


def test_bad_definitions_and_callers_change_nothing(runtime: Runtime) -> None:
    admin = runtime.local_principal()
    registry = runtime.agents
    registry.put(TRAVEL, admin=admin)
    before = _row(runtime, "travel")

    with pytest.raises(DefinitionError) as caught:
        registry.put(BROKEN, admin=admin)
    assert [p.path for p in caught.value.problems] == BROKEN_PATHS
    assert caught.value.field == "definition"

    with pytest.raises(ConflictError) as mismatch:
        registry.put(travel(description="other"), name="flights", admin=admin)
    assert "'travel'" in str(mismatch.value) and "'flights'" in str(mismatch.value)

    with pytest.raises(DefinitionError) as malformed:
        registry.put('{"name": "travel",', admin=admin)
    assert [p.path for p in malformed.value.problems] == ["$"]
    assert "line 1" in malformed.value.problems[0].reason

    someone, _ = add_user(runtime, "someone@example.com")
    with pytest.raises(PermissionDeniedError):
        registry.put(travel(description="hijacked"), admin=someone)

    after = _row(runtime, "travel")
    assert (after.definition, after.updated_at) == (before.definition, before.updated_at)
    assert [a.name for a in registry.list()] == ["travel"]


def test_get_checks_the_stored_definition_against_the_current_profiles(
    runtime: Runtime,
) -> None:
    offered = ["default", "fast"]
    registry = AgentRegistry(runtime.database, runtime.memory, lambda: offered)
    fast = travel()
    fast["functions"] = {"main": {"llm": {"profile": "fast"}, "end": {"output": "{ result }"}}}
    registry.put(fast, admin=runtime.local_principal())
    assert registry.get("travel").functions["main"][0].get("profile") == "fast"

    offered.remove("fast")  # the settings no longer offer it
    with pytest.raises(DefinitionError) as caught:
        registry.get("travel")
    assert [p.path for p in caught.value.problems] == ["$.functions.main.llm.profile"]
    assert registry.source("travel") == fast  # an admin can still read it to fix it
    assert AgentRegistry(runtime.database, runtime.memory, ["default"]).profiles() == ("default",)


def test_an_unknown_agent_is_not_found(runtime: Runtime) -> None:
    registry = runtime.agents
    for call in (registry.get, registry.source, registry.delete):
        with pytest.raises(NotFoundError, match="agent 'nobody' not found"):
            call("nobody")


@pytest.mark.slow
def test_delete_removes_the_agents_memories_of_every_user_and_only_its(
    runtime: Runtime,
) -> None:
    admin = runtime.local_principal()
    ann, _ = add_user(runtime, "ann@example.com")
    ben, _ = add_user(runtime, "ben@example.com")
    registry = runtime.agents
    registry.put(TRAVEL, admin=admin)
    registry.put(travel(name="kitchen", description="Knows your coffee"), admin=admin)
    memory = runtime.memory
    memory.store(ann, "travel", {"preferred_airline": "Ann flies KLM", "seat": "aisle"})
    memory.store(ben, "travel", {"preferred_airline": "Ben flies Delta"})
    memory.store(ann, "kitchen", {"coffee": "Ann drinks it black"})
    memory.store(ben, "flights", {"preferred_airline": "an agent never defined keeps its own"})

    assert registry.delete("travel") == 3
    assert [a.name for a in registry.list()] == ["kitchen"]
    assert [(m.agent, m.label) for m in memory.list(ann)] == [("kitchen", "coffee")]
    assert [(m.agent, m.label) for m in memory.list(ben)] == [("flights", "preferred_airline")]
    with pytest.raises(NotFoundError):
        registry.delete("travel")
    assert registry.delete("kitchen") == 1
    assert registry.list() == []


def test_a_downgrade_is_refused_while_agents_are_defined(runtime: Runtime) -> None:
    runtime.agents.put(TRAVEL, admin=runtime.local_principal())
    with pytest.raises(StorageError, match="while agents are defined"):
        runtime.database.downgrade("0007")
    assert runtime.database.current_revision() == Database.head_revision()
    assert [a.name for a in runtime.agents.list()] == ["travel"]
    runtime.agents.delete("travel")
    runtime.database.downgrade("0007")
    assert "agents" not in inspect(runtime.database.engine).get_table_names()
    runtime.database.upgrade()
    assert runtime.database.current_revision() == Database.head_revision()
