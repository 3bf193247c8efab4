"""The per-process cache of memory vectors: used when nothing changed, never stale, bounded.

Two stores on one database stand for two server processes: each has its own cache, and what
one writes the other must see on its next search, on both backends.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError
from sqlalchemy import delete, select, update

import search2o.memory.store as store_module
from search2o.memory import MemoryChanges, MemoryStore
from search2o.memory.cache import VectorCache, user_counter
from search2o.memory.ranking import Vectors
from search2o.memory.settings import MemorySettings
from search2o.runtime import Runtime
from search2o.storage.db import bump_counter, read_counter
from search2o.storage.memory_models import Memory
from search2o.storage.models import Counter, User
from tests.memory.conftest import AIRLINE, BOOKS, COFFEE, DOG, add_user, labels, store_with

pytestmark = pytest.mark.slow

AIRLINE_QUESTION = "which airline do they like?"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the reads of a whole scope of memories the store makes (calls pass through).

    A spy, not a stand-in: PostgreSQL's reads go through psycopg's binary cursor, which
    SQLAlchemy's statement events do not see.
    """
    seen: list[str] = []
    for name in ("vectors", "candidates", "refreshed"):
        real = getattr(store_module, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            seen.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(store_module, name, spy)
    return seen


def test_a_repeated_search_reads_one_short_row_instead_of_the_memories(
    runtime: Runtime, memory: MemoryStore, reads: list[str]
) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE, "coffee_order": COFFEE})
    found = labels(memory.search(me, AIRLINE_QUESTION))
    assert reads == ["vectors"]
    again = labels(memory.search(me, AIRLINE_QUESTION))
    assert found == again == [("travel", "preferred_airline")]
    assert reads == ["vectors"]
    assert len(memory.cache) == 1 and memory.cache.nbytes > 0


def test_what_another_process_writes_is_seen_on_the_next_search(runtime: Runtime) -> None:
    reader = store_with(runtime)
    writer = store_with(runtime)
    me = add_user(runtime)
    writer.store(me, "travel", {"preferred_airline": AIRLINE})
    assert labels(reader.search(me, AIRLINE_QUESTION)) == [("travel", "preferred_airline")]

    writer.store(me, "pets", {"pet": DOG})  # a new label
    assert labels(reader.search(me, "what is the name of their dog?")) == [("pets", "pet")]

    writer.store(me, "travel", {"preferred_airline": "The user only flies Lufthansa"})
    [hit] = reader.search(me, AIRLINE_QUESTION)
    assert hit.text == "The user only flies Lufthansa"  # replaced: the new vector, new text

    writer.delete(me, "pets", "pet")
    assert reader.search(me, "what is the name of their dog?") == []
    # the best of what is left, not an empty answer from a slot the deleted memory still held
    assert labels(reader.search(me, "their dog", limit=1, min_score=-1.0)) == [
        ("travel", "preferred_airline")
    ]

    changes = MemoryChanges(max_text_chars=4000)
    changes.record("travel", delete=["preferred_airline"])
    with runtime.database.session() as session:
        writer.apply(session, me, changes)
    assert reader.search(me, AIRLINE_QUESTION) == []


def test_an_agents_memories_deleted_for_everyone_are_gone_from_every_cache(
    runtime: Runtime,
) -> None:
    reader = store_with(runtime)
    writer = store_with(runtime)
    ann, bob = add_user(runtime), add_user(runtime)
    for user in (ann, bob):
        writer.store(user, "librarian", {"favourite_author": BOOKS})
        writer.store(user, "barista", {"coffee_order": COFFEE})
        assert labels(reader.search(user, "who is their favourite author?", limit=1)) == [
            ("librarian", "favourite_author")
        ]
    assert writer.delete_agent("librarian") == 2
    for user in (ann, bob):
        assert reader.search(user, "who is their favourite author?") == []
        assert labels(reader.search(user, "author", limit=1, min_score=-1.0)) == [
            ("barista", "coffee_order")
        ]


def test_a_write_that_rolls_back_leaves_the_cache_right(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    assert labels(memory.search(me, AIRLINE_QUESTION))
    counter = user_counter(me.user_id)
    with runtime.database.session() as session:
        before = read_counter(session, counter)
    changes = MemoryChanges(max_text_chars=4000)
    changes.record("travel", delete=["preferred_airline"])
    with pytest.raises(RuntimeError), runtime.database.session() as session:
        memory.apply(session, me, changes)
        assert memory.search(me, AIRLINE_QUESTION, session=session) == []  # its own write
        raise RuntimeError("the run failed")
    with runtime.database.session() as session:
        assert read_counter(session, counter) == before
    assert labels(memory.search(me, AIRLINE_QUESTION)) == [("travel", "preferred_airline")]


def test_a_search_in_the_callers_transaction_neither_uses_nor_fills_the_cache(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    with runtime.database.session() as session:
        assert labels(memory.search(me, AIRLINE_QUESTION, session=session))
    assert len(memory.cache) == 0


def test_a_reused_user_id_never_gets_the_earlier_users_memories(runtime: Runtime) -> None:
    memory = store_with(runtime)
    gone = add_user(runtime)
    memory.store(gone, "travel", {"preferred_airline": AIRLINE})
    assert labels(memory.search(gone, AIRLINE_QUESTION))
    with runtime.database.session() as session:
        session.execute(delete(User).where(User.id == gone.user_id))  # cascades to memories
    with runtime.database.session() as session:
        session.add(User(id=gone.user_id, email="reused@example.com", plan="free"))
    assert memory.search(gone, AIRLINE_QUESTION) == []  # no data key yet: nothing
    memory.store(gone, "pets", {"pet": DOG})
    assert memory.search(gone, AIRLINE_QUESTION) == []
    assert labels(memory.search(gone, "what is the name of their dog?")) == [("pets", "pet")]


def test_a_search_that_re_embeds_stale_memories_moves_the_counter(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    with runtime.database.session() as session:
        session.execute(
            update(Memory)
            .where(Memory.user_id == me.user_id)
            .values(model_id="old/model", embedding=np.ones(8, dtype=np.float32))
        )
        bump_counter(session, user_counter(me.user_id))  # what a migration by hand must do
        before = read_counter(session, user_counter(me.user_id))
    assert labels(memory.search(me, AIRLINE_QUESTION)) == [("travel", "preferred_airline")]
    assert len(memory.cache) == 0  # stale rows are never cached
    with runtime.database.session() as session:
        assert read_counter(session, user_counter(me.user_id)) == before + 1
        assert set(session.scalars(select(Memory.model_id).where(Memory.user_id == me.user_id)))
    assert labels(memory.search(me, AIRLINE_QUESTION)) == [("travel", "preferred_airline")]
    assert len(memory.cache) == 1


def test_cache_off_reads_every_time_and_finds_the_same(runtime: Runtime, reads: list[str]) -> None:
    cached, uncached = store_with(runtime), store_with(runtime, cache_mb=0)
    assert not uncached.cache.enabled
    me = add_user(runtime)
    cached.store(me, "pets", {"pet": DOG, "pet_food": "Pixel the dog eats grain-free kibble"})
    question = "what does their dog eat?"
    for _ in range(2):
        plain = uncached.search(me, question, min_score=-1.0)
        fast = cached.search(me, question, min_score=-1.0)
        assert labels(fast) == labels(plain)
        assert [h.score for h in fast] == pytest.approx([h.score for h in plain], abs=1e-5)
    assert len(uncached.cache) == 0
    assert reads == ["candidates", "vectors", "candidates"]  # the cached store read once


@pytest.mark.parametrize("value", [-1, 65537, "lots", "nan", float("inf")])
def test_a_bad_cache_bound_names_the_field(value: object) -> None:
    with pytest.raises(ValidationError, match="cache_mb"):
        MemorySettings(cache_mb=value)


def vectors_of(n: int, dimensions: int = 4) -> Vectors:
    """``n`` memories of ``dimensions`` float32s and 8 bytes of term hashes each."""
    return Vectors(
        np.arange(n, dtype=np.int64),
        np.ones((n, dimensions), np.float32),
        [b"\0" * 8] * n,
        [],
    )


def test_the_cache_is_bounded_in_bytes_least_recently_used_first() -> None:
    one = vectors_of(2)  # 16 + 32 + 16 bytes
    assert one.nbytes == 64
    cache = VectorCache(max_bytes=3 * 64)
    for user in (1, 2, 3):
        cache.put(user, "v1", one)
    assert cache.get(1, "v1") is one  # 1 is now the most recently used
    cache.put(4, "v1", one)
    assert cache.get(2, "v1") is None and len(cache) == 3 and cache.nbytes == 3 * 64
    assert cache.get(1, "v1") is one and cache.get(3, "v1") is one
    assert cache.get(3, "v2") is None  # another stamp: not returned
    assert cache.latest(3) is one  # but kept as the base of an incremental update
    cache.put(5, "v1", vectors_of(100))  # larger than the whole bound: not kept
    assert cache.get(5, "v1") is None and cache.nbytes == 3 * 64
    cache.put(1, "v2", vectors_of(1))  # replacing an entry counts its new size
    assert cache.nbytes == 2 * 64 + 32 and cache.get(1, "v1") is None
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
    assert not VectorCache(0).enabled


def test_an_empty_scope_is_cached_and_returns_nothing(
    runtime: Runtime, memory: MemoryStore, reads: list[str]
) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    assert memory.search(me, AIRLINE_QUESTION, agent="librarian") == []
    assert memory.search(me, AIRLINE_QUESTION, agent="librarian") == []
    assert reads == ["vectors"]


def test_concurrent_writes_and_searches_leave_no_cache_stale(runtime: Runtime) -> None:
    first, second = store_with(runtime), store_with(runtime)
    truth = store_with(runtime, cache_mb=0)
    me = add_user(runtime)
    facts = {f"fact_{i}": f"The user's fact number {i} is about topic {i * 7}" for i in range(8)}
    questions = [f"What is fact number {i} about?" for i in range(8)]
    first.store(me, "notes", {label: facts[label] for label in ("fact_0", "fact_1", "fact_2")})
    for store in (first, second):  # both caches filled before the writes
        assert store.search(me, questions[0], min_score=-1.0)
    start = threading.Barrier(12)

    def write(i: int) -> None:
        start.wait()
        if i < 2:
            second.delete(me, "notes", f"fact_{i}")
        elif i == 2:
            first.store(me, "notes", {"fact_2": "The user's fact number 2 changed to gardening"})
        else:
            (first if i % 2 else second).store(me, "notes", {f"fact_{i}": facts[f"fact_{i}"]})

    def read(i: int) -> None:
        start.wait()
        (first if i % 2 else second).search(me, questions[i], min_score=-1.0)

    with ThreadPoolExecutor(max_workers=12) as pool:
        futures = [pool.submit(write, i) for i in range(6)]
        futures += [pool.submit(read, i) for i in range(6)]
        assert [f.exception() for f in futures] == [None] * 12
    for question in questions:
        expected = truth.search(me, question, min_score=-1.0)
        assert {h.label for h in expected} == {"fact_2", "fact_3", "fact_4", "fact_5"}
        for store in (first, second):
            found = store.search(me, question, min_score=-1.0)
            assert [(h.label, h.text) for h in found] == [(h.label, h.text) for h in expected]


def test_after_a_write_postgresql_reads_only_the_rows_written_since(
    runtime: Runtime, reads: list[str]
) -> None:
    memory, truth = store_with(runtime), store_with(runtime, cache_mb=0)
    me = add_user(runtime)
    facts = {f"fact_{i}": f"The user's fact number {i} is about topic {i * 7}" for i in range(10)}
    memory.store(me, "notes", facts)
    question = "What is fact number 3 about?"
    # touch=False: recording a retrieval rewrites the hits' rows, and so their versions too
    assert memory.search(me, question, min_score=-1.0, touch=False)
    memory.store(me, "notes", {"fact_3": "The user's fact number 3 is now about sailing"})
    memory.delete(me, "notes", "fact_5")
    reads.clear()
    found = memory.search(me, question, min_score=-1.0, touch=False)
    assert reads[0] == "refreshed"
    if runtime.database.backend == "postgresql":
        assert reads == ["refreshed"]  # two short statements, not the whole scope
    else:
        assert reads == ["refreshed", "vectors"]  # SQLite reads the scope again
    expected = truth.search(me, question, min_score=-1.0)
    assert [(h.label, h.text) for h in found] == [(h.label, h.text) for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-5)
    assert found[0].text == "The user's fact number 3 is now about sailing"
    assert "fact_5" not in {h.label for h in found}


def test_a_counter_value_that_comes_back_after_a_restore_is_a_new_stamp(
    runtime: Runtime,
) -> None:
    if runtime.database.backend != "postgresql":
        pytest.skip("SQLite is restored by replacing its file: restart the servers (docs)")
    reader, writer = store_with(runtime), store_with(runtime)
    me = add_user(runtime)
    writer.store(me, "travel", {"preferred_airline": AIRLINE})
    counter = user_counter(me.user_id)
    with runtime.database.session() as session:
        backup = read_counter(session, counter)
    writer.store(me, "pets", {"pet": DOG})
    writer.store(me, "barista", {"coffee_order": COFFEE})
    assert labels(reader.search(me, "what is the name of their dog?")) == [("pets", "pet")]
    # what a restore of the backup does: the rows and the counter as they were
    with runtime.database.session() as session:
        session.execute(delete(Memory).where(Memory.agent.in_(["pets", "barista"])))
        session.execute(update(Counter).where(Counter.name == counter).values(value=backup))
    writer.store(me, "librarian", {"favourite_author": BOOKS})
    writer.store(me, "pets", {"pet": "The user has a cat called Tom"})
    with runtime.database.session() as session:
        assert read_counter(session, counter) == backup + 2  # the value the reader cached
    found = reader.search(me, "what pet do they have?", min_score=-1.0)
    assert ("pets", "pet", "The user has a cat called Tom") in [
        (h.agent, h.label, h.text) for h in found
    ]
    assert [h.agent for h in found if h.agent == "barista"] == []  # gone in the restore
    assert labels(reader.search(me, "who is their favourite author?")) == [
        ("librarian", "favourite_author")
    ]
