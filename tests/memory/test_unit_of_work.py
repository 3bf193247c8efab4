"""Stores and deletes apply only when a run completes, in the transaction of its state save."""

from __future__ import annotations

import pytest

from search2o.memory import MemoryStore
from search2o.runtime import Runtime
from search2o.state import DatabaseStateStore, StateChanges
from tests.memory.conftest import AIRLINE, COFFEE, add_user, labels
from tests.state.conftest import new_conversation

pytestmark = pytest.mark.slow


class RunFailedError(Exception):
    """Raised by a test run after it saved, so its transaction rolls back."""


def test_a_failing_run_stores_and_deletes_nothing(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"coffee_order": COFFEE})
    conversation = new_conversation(runtime, me)
    state = DatabaseStateStore(runtime.database, runtime.vault, compact_every=0)

    changes = memory.new_changes()
    changes.record("travel", store={"preferred_airline": AIRLINE}, delete=["coffee_order"])
    memory.prepare(changes)
    run_state = StateChanges()
    run_state.set_conv("airline", "KLM")
    # the query during the run sees nothing of the pending store
    assert memory.search(me, "which airline do they like?") == []
    with pytest.raises(RunFailedError), runtime.database.session() as session:
        state.save(conversation, me, run_state, 0, session=session)
        memory.apply(session, me, changes)
        raise RunFailedError("a command failed after the save")
    assert state.restore(conversation, me) is None
    assert labels(memory.list(me)) == [("travel", "coffee_order")]
    assert memory.search(me, "which airline do they like?") == []

    # the same run completing commits both, together
    with runtime.database.session() as session:
        version = state.save(conversation, me, run_state, 0, session=session)
        outcome = memory.apply(session, me, changes)
    assert outcome.stored == (("travel", "preferred_airline"),)
    assert outcome.deleted == (("travel", "coffee_order"),)
    restored = state.restore(conversation, me)
    assert restored is not None and restored[1] == version and restored[0].conv["airline"] == "KLM"
    assert labels(memory.search(me, "which airline do they like?")) == [
        ("travel", "preferred_airline")
    ]
    state.close()


def test_a_conflicting_state_save_rolls_back_the_memories(
    runtime: Runtime, memory: MemoryStore
) -> None:
    from search2o.errors import ConflictError

    me = add_user(runtime)
    conversation = new_conversation(runtime, me)
    state = DatabaseStateStore(runtime.database, runtime.vault, compact_every=0)
    with runtime.database.session() as session:
        state.save(conversation, me, StateChanges(), 0, session=session)
    changes = memory.new_changes()
    changes.record("travel", store={"preferred_airline": AIRLINE})
    with pytest.raises(ConflictError), runtime.database.session() as session:
        memory.apply(session, me, changes)
        state.save(conversation, me, StateChanges(), 0, session=session)  # stale version
    assert memory.count(me) == 0
    state.close()


def test_a_validation_run_never_stores(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"coffee_order": COFFEE})
    changes = memory.new_changes(validation=True)
    rejected = changes.record(
        "travel", store={"preferred_airline": AIRLINE, "huge": "x" * 5000}, delete=["coffee_order"]
    )
    assert [r.label for r in rejected] == ["huge"]  # checked like a real run
    with runtime.database.session() as session:
        outcome = memory.apply(session, me, changes)
    assert not outcome.applied and outcome.stored == () and outcome.deleted == ()
    assert labels(memory.list(me)) == [("travel", "coffee_order")]


def test_apply_embeds_what_prepare_did_not(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    changes = memory.new_changes()
    changes.record("travel", store={"preferred_airline": AIRLINE})
    with runtime.database.session() as session:
        memory.apply(session, me, changes)
    assert labels(memory.search(me, "which airline do they like?")) == [
        ("travel", "preferred_airline")
    ]


def test_nothing_to_apply_touches_nothing(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    changes = memory.new_changes()
    changes.record("travel", store={"x": ""})
    with runtime.database.session() as session:
        outcome = memory.apply(session, me, changes)
    assert outcome.applied and outcome.stored == () and len(outcome.rejected) == 1
    assert runtime.vault.versions_in_use() == {}  # no data key made for nothing


def test_a_runs_retrievals_are_written_with_its_changes(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE, "coffee_order": COFFEE})
    changes = memory.new_changes()
    hits = memory.search(me, "which airline do they like?", changes=changes)
    assert [h.label for h in hits] == ["preferred_airline"]

    def retrieved() -> dict[str, bool]:
        return {r.label: r.last_retrieved_at is not None for r in memory.list(me)}

    assert retrieved() == {"coffee_order": False, "preferred_airline": False}  # a search reads
    assert len(changes.retrieved) == 1 and not changes  # nothing to store or delete
    with runtime.database.session() as session:
        outcome = memory.apply(session, me, changes)
    assert outcome.applied and outcome.stored == ()
    assert retrieved() == {"coffee_order": False, "preferred_airline": True}


def test_a_validation_runs_retrievals_are_not_recorded(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    changes = memory.new_changes(validation=True)
    assert memory.search(me, "which airline do they like?", changes=changes)
    assert changes.retrieved == set()
    with runtime.database.session() as session:
        memory.apply(session, me, changes)
    assert [r.last_retrieved_at for r in memory.list(me)] == [None]
