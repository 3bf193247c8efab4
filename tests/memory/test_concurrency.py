"""Concurrent stores and queries of one user: no error ("database is locked" included)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from search2o.memory import MemoryStore
from search2o.memory.ranking import embedding_text
from search2o.runtime import Runtime
from tests.memory.conftest import add_user, store_with

pytestmark = pytest.mark.slow

QUERIES = [
    "Which city does the user live in?",
    "What is the user's favourite colour?",
    "Which sport does the user play?",
    "What does the user eat for breakfast?",
    "Which instrument does the user play?",
]


def _facts(n: int) -> list[tuple[str, str, str]]:
    """``n`` distinct (agent, label, text), at most 10 labels per agent."""
    return [
        (f"agent-{i // 5}", f"fact_{i}", f"The user's fact number {i} is about topic {i * 7}")
        for i in range(n)
    ]


def test_20_concurrent_store_and_query_calls_for_one_user(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    facts = _facts(10)
    runtime.embedder.embed([embedding_text(label, text) for _, label, text in facts] + QUERIES)
    start = threading.Barrier(20)

    def store(i: int) -> None:
        agent, label, text = facts[i]
        start.wait()
        memory.store(me, agent, {label: text})

    def query(i: int) -> None:
        start.wait()
        memory.search(me, QUERIES[i % len(QUERIES)], min_score=-1)

    with ThreadPoolExecutor(max_workers=20) as pool:
        futures = [pool.submit(store, i) for i in range(10)]
        futures += [pool.submit(query, i) for i in range(10)]
        errors = [f.exception() for f in futures]
    assert errors == [None] * 20
    assert memory.count(me) == 10
    assert {m.label for m in memory.list(me)} == {label for _, label, _ in facts}


def test_concurrent_stores_at_the_bound_keep_it_exactly(runtime: Runtime) -> None:
    memory = store_with(runtime, limits={"free": 5})
    me = add_user(runtime)
    facts = _facts(12)
    runtime.embedder.embed([embedding_text(label, text) for _, label, text in facts])
    start = threading.Barrier(12)

    def store(i: int) -> None:
        agent, label, text = facts[i]
        start.wait()
        memory.store(me, agent, {label: text})

    with ThreadPoolExecutor(max_workers=12) as pool:
        errors = [f.exception() for f in [pool.submit(store, i) for i in range(12)]]
    assert errors == [None] * 12
    assert memory.count(me) == 5
