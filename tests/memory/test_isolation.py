"""Each user sees only their own memories; deleting an agent deletes only its memories."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import delete

from search2o.errors import InputError, NotFoundError
from search2o.memory import MemoryStore
from search2o.memory.ranking import embedding_text
from search2o.runtime import Runtime
from search2o.storage.models import User
from tests.memory.conftest import AIRLINE, COFFEE, add_user, labels

pytestmark = pytest.mark.slow

ALICE_FACTS = {
    "colleague": "Alice Chen is the user's closest colleague in the data team",
    "colleague_birthday": "Alice Chen's birthday is on 3 May",
    "colleague_coffee": "Alice Chen drinks oat-milk cappuccinos",
}
BOB_FACTS = {
    "colleague": "Alice Chen mentors the user on the frontend rewrite",
    "colleague_birthday": "Alice Chen celebrates her birthday with a team lunch",
    "colleague_coffee": "Alice Chen prefers green tea to coffee",
}


def test_two_users_storing_about_the_same_person_never_see_each_other(
    runtime: Runtime, memory: MemoryStore
) -> None:
    alice_owner, bob_owner = add_user(runtime), add_user(runtime)
    memory.store(alice_owner, "people", ALICE_FACTS)
    memory.store(bob_owner, "people", BOB_FACTS)
    for owner, facts in ((alice_owner, ALICE_FACTS), (bob_owner, BOB_FACTS)):
        assert {m.text for m in memory.list(owner)} == set(facts.values())
        for query in ("Who is Alice Chen?", "When is Alice's birthday?", "What does Alice drink?"):
            hits = memory.search(owner, query, min_score=-1, limit=100)
            assert hits and {h.text for h in hits} <= set(facts.values()), query


def test_concurrent_writers_about_the_same_person_stay_apart(
    runtime: Runtime, memory: MemoryStore
) -> None:
    owners = [add_user(runtime) for _ in range(4)]
    facts = [ALICE_FACTS if i % 2 == 0 else BOB_FACTS for i in range(4)]
    runtime.embedder.embed(
        [embedding_text(k, v) for f in facts for k, v in f.items()] + ["Who is Alice Chen?"]
    )
    start = threading.Barrier(8)

    def write(i: int) -> None:
        start.wait()
        for label, text in facts[i].items():
            memory.store(owners[i], "people", {label: f"{text} (owner {i})"})

    def read(i: int) -> list[str]:
        start.wait()
        found: list[str] = []
        for _ in range(3):
            found += [h.text for h in memory.search(owners[i], "Who is Alice Chen?", min_score=-1)]
        return found

    with ThreadPoolExecutor(max_workers=8) as pool:
        writers = [pool.submit(write, i) for i in range(4)]
        readers = [pool.submit(read, i) for i in range(4)]
        for future in writers:
            future.result()
        seen = [future.result() for future in readers]
    for i, owner in enumerate(owners):
        assert all(text.endswith(f"(owner {i})") for text in seen[i])
        listed = memory.list(owner)
        assert len(listed) == 3 and all(m.text.endswith(f"(owner {i})") for m in listed)


def test_deleting_every_label_of_one_user_leaves_another_users_untouched(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me, other = add_user(runtime), add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE, "coffee_order": COFFEE})
    memory.store(other, "travel", {"preferred_airline": AIRLINE, "coffee_order": COFFEE})
    before = [(m.agent, m.label, m.text, m.created_at) for m in memory.list(other)]
    for item in memory.list(me):
        memory.delete(me, item.agent, item.label)
    assert memory.list(me) == [] and memory.search(me, "which airline do they like?") == []
    assert [(m.agent, m.label, m.text, m.created_at) for m in memory.list(other)] == before
    assert labels(memory.search(other, "which airline do they like?")) == [
        ("travel", "preferred_airline")
    ]


def test_another_users_memory_cannot_be_deleted(runtime: Runtime, memory: MemoryStore) -> None:
    me, other = add_user(runtime), add_user(runtime)
    memory.store(other, "travel", {"preferred_airline": AIRLINE})
    with pytest.raises(NotFoundError, match="memory travel/preferred_airline not found"):
        memory.delete(me, "travel", "preferred_airline")
    with pytest.raises(NotFoundError, match="not found"):
        memory.delete(me, "not an agent", "x")
    assert memory.count(other) == 1


def test_deleting_an_agent_deletes_its_memories_for_every_user_and_only_its(
    runtime: Runtime, memory: MemoryStore
) -> None:
    users = [add_user(runtime) for _ in range(3)]
    for user in users:
        memory.store(user, "travel", {"preferred_airline": AIRLINE, "seat": "Aisle seats"})
        memory.store(user, "kitchen", {"coffee_order": COFFEE})
        memory.store(user, "travel-2", {"preferred_airline": AIRLINE})
    assert memory.delete_agent("travel") == 6
    for user in users:
        assert labels(memory.list(user)) == [
            ("kitchen", "coffee_order"),
            ("travel-2", "preferred_airline"),
        ]
        assert labels(memory.search(user, "which airline do they like?")) == [
            ("travel-2", "preferred_airline")
        ]
    assert memory.delete_agent("travel") == 0
    with pytest.raises(InputError):
        memory.delete_agent("not an agent")


def test_deleting_a_user_deletes_their_memories_and_key(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me, other = add_user(runtime), add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    memory.store(other, "travel", {"preferred_airline": AIRLINE})
    with runtime.database.session() as session:
        session.execute(delete(User).where(User.id == me.user_id))
    assert memory.count(me) == 0 and memory.count(other) == 1
    assert sum(runtime.vault.versions_in_use().values()) == 1
    with pytest.raises(NotFoundError, match="not found"):
        memory.store(me, "travel", {"preferred_airline": AIRLINE})
