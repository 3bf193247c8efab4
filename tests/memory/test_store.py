"""Keying, replacing, deleting and searching memories, on both backends."""

# ruff: noqa: RUF001 - Chinese and Japanese text uses full-width punctuation

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from search2o.errors import InputError, NotFoundError
from search2o.memory import (
    MAX_STORES_PER_COMMAND,
    MemoryChanges,
    MemoryStore,
    check_definition_labels,
)
from search2o.runtime import Runtime
from tests.memory.conftest import AIRLINE, BOOKS, COFFEE, DOG, add_user, labels

pytestmark = pytest.mark.slow


def test_semantic_match_and_the_command_result_shape(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    before = datetime.now(UTC)
    memory.store(me, "travel", {"preferred_airline": AIRLINE, "coffee_order": COFFEE})
    hits = memory.search(me, "which airline do they like?")
    assert labels(hits) == [("travel", "preferred_airline")]
    item = hits[0].to_dict()
    assert set(item) == {"agentName", "label", "text", "createdAt"}
    assert item["agentName"] == "travel" and item["text"] == AIRLINE
    assert datetime.fromisoformat(item["createdAt"]) >= before.replace(microsecond=0)
    assert hits[0].score >= memory.settings.min_score


def test_an_unrelated_query_returns_nothing(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    memory.store(me, "barista", {"coffee_order": COFFEE, "tea": "The user never drinks tea"})
    memory.store(me, "librarian", {"favourite_author": BOOKS, "current_book": "Dune"})
    assert memory.search(me, "quantum chromodynamics") == []
    assert memory.search(me, "How do I reset my VPN password?") == []


def test_a_new_users_query_returns_nothing(runtime: Runtime, memory: MemoryStore) -> None:
    someone = add_user(runtime)
    memory.store(someone, "travel", {"preferred_airline": AIRLINE})
    newcomer = add_user(runtime)
    assert memory.search(newcomer, "which airline do they like?") == []
    assert memory.list(newcomer) == []


def test_best_match_first_and_at_most_limit(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    memory.store(
        me,
        "pets",
        {
            "pet": DOG,
            "pet_food": "Pixel the dog eats grain-free kibble",
            "vet": "Pixel's vet is Dr. Jansen in Delft",
        },
    )
    hits = memory.search(me, "What is the name of the user's dog?", limit=10)
    assert hits[0].label == "pet"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(memory.search(me, "What is the name of the user's dog?", limit=1)) == 1


def test_storing_under_a_label_replaces_it(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    first = memory.store(me, "travel", {"preferred_airline": AIRLINE})
    assert first.stored == (("travel", "preferred_airline"),) and first.replaced == ()
    again = memory.store(me, "travel", {"preferred_airline": "The user now prefers Lufthansa"})
    assert again.replaced == (("travel", "preferred_airline"),) and again.stored == ()
    assert [m.text for m in memory.list(me)] == ["The user now prefers Lufthansa"]
    hits = memory.search(me, "which airline do they like?")
    assert [h.text for h in hits] == ["The user now prefers Lufthansa"]


def test_the_same_label_and_text_twice_leaves_one_memory(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    assert memory.count(me) == 1
    assert labels(memory.search(me, "which airline do they like?")) == [
        ("travel", "preferred_airline")
    ]


def test_a_label_is_per_agent(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"notes": AIRLINE})
    memory.store(me, "kitchen", {"notes": COFFEE})
    assert labels(memory.list(me)) == [("kitchen", "notes"), ("travel", "notes")]
    assert labels(memory.search(me, "which airline do they like?", agent="kitchen")) == []
    assert labels(memory.search(me, "which airline do they like?", agent="travel")) == [
        ("travel", "notes")
    ]
    assert labels(memory.list(me, agent="kitchen")) == [("kitchen", "notes")]


def test_filters_by_label(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE, "seat": "The user wants aisle seats"})
    hits = memory.search(me, "flights", label="seat", min_score=-1)
    assert labels(hits) == [("travel", "seat")]


def test_a_deleted_label_is_never_returned_again(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE, "coffee_order": COFFEE})
    memory.delete(me, "travel", "preferred_airline")
    assert memory.search(me, "which airline do they like?") == []
    assert memory.search(me, "which airline do they like?", min_score=-1, limit=100) != []
    assert all(h.label != "preferred_airline" for h in memory.search(me, "KLM", min_score=-1))
    assert labels(memory.list(me)) == [("travel", "coffee_order")]
    with pytest.raises(NotFoundError):
        memory.delete(me, "travel", "preferred_airline")
    # deleted through a run's command too
    outcome = memory.store(me, "travel", {}, delete=["coffee_order", "never_stored"])
    assert outcome.deleted == (("travel", "coffee_order"),)
    assert memory.search(me, "How does the user take their coffee?", min_score=-1) == []


def test_cjk_and_emoji_come_back_byte_identical_and_are_found(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    texts = {
        "drinks": "用户喜欢喝绿茶，不加糖。🍵",
        "morning_routine": "ユーザーは毎朝ジョギングをします。🏃‍♀️",
        "pets": "사용자는 고양이 두 마리를 키운다. 🐈🐈",
        "favourite_food": "The user loves 🍣 sushi and 🍜 ramen 👩🏽‍🍳",
    }
    memory.store(me, "profile", texts)
    listed = {m.label: m.text for m in memory.list(me)}
    assert {k: v.encode() for k, v in listed.items()} == {k: v.encode() for k, v in texts.items()}
    for query, label in [
        ("用户喜欢喝什么茶？", "drinks"),
        ("ユーザーは毎朝何をしますか？", "morning_routine"),
        ("사용자는 고양이를 키우나요?", "pets"),
        ("Does the user like sushi?", "favourite_food"),
    ]:
        hits = memory.search(me, query)
        assert hits and hits[0].label == label, (query, labels(hits))
        assert hits[0].text.encode() == texts[label].encode()


def test_a_40000_character_text_is_rejected_and_the_other_stores_apply(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    outcome = memory.store(
        me, "notes", {"transcript": "word " * 8000, "preferred_airline": AIRLINE, "empty": "  "}
    )
    assert outcome.stored == (("notes", "preferred_airline"),)
    reasons = {r.label: r.reason for r in outcome.rejected}
    assert reasons["transcript"] == "is 40000 characters; at most 4000 (memory.max_text_chars)"
    assert reasons["empty"] == "must not be empty"
    assert labels(memory.list(me)) == [("notes", "preferred_airline")]


def test_a_command_stores_at_most_25_labels(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    too_many = {f"fact_{i}": f"fact number {i}" for i in range(MAX_STORES_PER_COMMAND + 1)}
    with pytest.raises(InputError) as info:
        memory.store(me, "notes", too_many)
    assert info.value.field == "store" and "at most 25" in info.value.reason
    assert memory.count(me) == 0
    exactly = dict(list(too_many.items())[:MAX_STORES_PER_COMMAND])
    assert len(memory.store(me, "notes", exactly).stored) == MAX_STORES_PER_COMMAND


@pytest.mark.parametrize(
    ("agent", "store", "delete", "field"),
    [
        ("bad agent", {"x": "y"}, None, "agentName"),
        ("", {"x": "y"}, None, "agentName"),
        ("a" * 101, {"x": "y"}, None, "agentName"),
        ("travel", {"has space": "y"}, None, "store"),
        ("travel", {"l" * 65: "y"}, None, "store"),
        ("travel", {"x": 3}, None, "store.x"),
        ("travel", ["x"], None, "store"),
        ("travel", None, "x", "delete"),
        ("travel", None, ["a/b"], "delete"),
    ],
)
def test_malformed_commands_name_the_field(
    agent: str, store: object, delete: object, field: str
) -> None:
    changes = MemoryChanges()
    with pytest.raises(InputError) as info:
        changes.record(agent, store=store, delete=delete)  # type: ignore[arg-type]
    assert info.value.field == field
    assert not changes


def test_search_input_is_checked_without_quoting_the_query(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    secret = "Zebra-Query-Canary " * 200
    with pytest.raises(InputError) as info:
        memory.search(me, secret)
    assert info.value.field == "query" and "Zebra" not in str(info.value)
    for kwargs, field in [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": True}, "limit"),
        ({"agent": "no spaces allowed"}, "agent"),
        ({"label": "x/y"}, "label"),
    ]:
        with pytest.raises(InputError) as info:
            memory.search(me, "anything", **kwargs)  # type: ignore[arg-type]
        assert info.value.field == field
    with pytest.raises(InputError, match="query: must not be empty"):
        memory.search(me, "   ")


def test_labels_of_a_definition_are_at_most_10_distinct() -> None:
    ten = [f"label_{i}" for i in range(10)]
    assert check_definition_labels([*ten, *ten]) == ten
    with pytest.raises(InputError) as info:
        check_definition_labels([*ten, "eleventh"])
    assert info.value.field == "memory" and "at most 10 distinct" in info.value.reason
    with pytest.raises(InputError):
        check_definition_labels(["not a label"])


def test_last_command_wins_and_deletes_come_before_stores_in_one_command() -> None:
    changes = MemoryChanges()
    changes.record("travel", store={"a": "first", "b": "kept"})
    changes.record("travel", store={"a": "second"}, delete=["b"])
    changes.record("travel", store={"c": "stored"}, delete=["c"])
    assert changes.pending == {
        ("travel", "a"): "second",
        ("travel", "b"): None,
        ("travel", "c"): "stored",
    }


def test_memories_of_another_embedding_model_are_re_embedded_when_met(
    runtime: Runtime, memory: MemoryStore
) -> None:
    import numpy as np
    from sqlalchemy import select, update

    from search2o.storage.memory_models import Memory

    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE, "coffee_order": COFFEE})
    with runtime.database.session() as session:
        session.execute(
            update(Memory).values(model_id="old/model", embedding=np.ones(8, dtype=np.float32))
        )
    assert labels(memory.search(me, "which airline do they like?", touch=False)) == [
        ("travel", "preferred_airline")
    ]
    with runtime.database.session() as session:
        assert set(session.scalars(select(Memory.model_id))) == {"old/model"}  # read-only
    assert labels(memory.search(me, "which airline do they like?")) == [
        ("travel", "preferred_airline")
    ]
    with runtime.database.session() as session:
        models = {r[0]: r[1] for r in session.execute(select(Memory.label, Memory.model_id))}
    # every memory met is re-embedded and hashed once, hit or not
    assert models == {
        "preferred_airline": runtime.embedder.model_id,
        "coffee_order": models["preferred_airline"],
    }
    with runtime.database.session() as session:
        assert all(session.scalars(select(Memory.terms)))
    assert labels(memory.search(me, "which airline do they like?")) == [
        ("travel", "preferred_airline")
    ]


def test_the_public_namespace_is_sorted_and_importable(runtime: Runtime) -> None:
    import search2o.memory as package

    assert package.__all__ == sorted(package.__all__)
    assert all(getattr(package, name) is not None for name in package.__all__)
    assert runtime.memory is runtime.memory


def test_a_when_question_prefers_the_memory_that_says_when(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    memory.store(
        me,
        "diary",
        {
            "D1-3": "Caroline: we had a support group meeting yesterday",
            "D1-4": "Caroline: the support group meeting was powerful and moving",
        },
    )
    when = memory.search(me, "When did Caroline go to the support group?", min_score=-1)
    what = memory.search(me, "Was the support group meeting powerful?", min_score=-1)
    assert [h.label for h in when] == ["D1-3", "D1-4"]  # without the time bonus: D1-4 first
    assert [h.label for h in what] == ["D1-4", "D1-3"]  # no time asked: no bonus
