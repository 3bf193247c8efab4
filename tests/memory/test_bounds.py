"""Per-plan bounds: eviction of the least recently retrieved, never on a replace."""

from __future__ import annotations

import pytest

from search2o.runtime import Runtime
from tests.memory.conftest import AIRLINE, BOOKS, COFFEE, DOG, add_user, labels, store_with

pytestmark = pytest.mark.slow

SEAT = "The user always books an aisle seat"
PASSPORT = "The user's passport expires in March 2027"


def test_the_least_recently_retrieved_are_evicted_first(runtime: Runtime) -> None:
    memory = store_with(runtime, limits={"free": 3, "paid": 5})
    me = add_user(runtime)
    for label, text in (("airline", AIRLINE), ("coffee", COFFEE), ("books", BOOKS)):
        assert memory.store(me, "profile", {label: text}).evicted == ()
    # "airline" is retrieved: it now counts from its retrieval, later than the others' creation
    assert labels(memory.search(me, "which airline do they like?")) == [("profile", "airline")]
    assert memory.store(me, "profile", {"dog": DOG}).evicted == (("profile", "coffee"),)
    assert memory.store(me, "profile", {"seat": SEAT}).evicted == (("profile", "books"),)
    # never retrieved since: "airline" is now the least recent (its retrieval came before "dog")
    assert memory.store(me, "profile", {"passport": PASSPORT}).evicted == (("profile", "airline"),)
    assert labels(memory.list(me)) == [
        ("profile", "dog"),
        ("profile", "passport"),
        ("profile", "seat"),
    ]


def test_a_replace_at_the_bound_does_not_evict(runtime: Runtime) -> None:
    memory = store_with(runtime, limits={"free": 2})
    me = add_user(runtime)
    memory.store(me, "profile", {"airline": AIRLINE, "coffee": COFFEE})
    outcome = memory.store(me, "profile", {"airline": "The user now prefers Lufthansa"})
    assert outcome.replaced == (("profile", "airline"),) and outcome.evicted == ()
    assert memory.count(me) == 2
    # a replace refreshes the memory: it is now younger than "coffee"
    assert memory.store(me, "profile", {"dog": DOG}).evicted == (("profile", "coffee"),)


def test_a_command_beyond_the_bound_keeps_what_it_just_stored(runtime: Runtime) -> None:
    memory = store_with(runtime, limits={"free": 2})
    me = add_user(runtime)
    memory.store(me, "profile", {"airline": AIRLINE})
    outcome = memory.store(me, "profile", {"coffee": COFFEE, "dog": DOG})
    assert outcome.evicted == (("profile", "airline"),)
    assert labels(memory.list(me)) == [("profile", "coffee"), ("profile", "dog")]
    outcome = memory.store(me, "profile", {"books": BOOKS, "seat": SEAT, "passport": PASSPORT})
    assert len(outcome.evicted) == 3 and memory.count(me) == 2


def test_the_bound_follows_the_plan_and_counts_every_agent(runtime: Runtime) -> None:
    memory = store_with(runtime, limits={"free": 2, "paid": 4})
    free, paid = add_user(runtime), add_user(runtime, plan="paid")
    facts = {"airline": AIRLINE, "coffee": COFFEE, "books": BOOKS, "dog": DOG, "seat": SEAT}
    for owner in (free, paid):
        for label, text in facts.items():
            memory.store(owner, "travel" if label in ("airline", "seat") else "home", {label: text})
    assert memory.count(free) == 2 and memory.count(paid) == 4
    assert labels(memory.list(free)) == [("home", "dog"), ("travel", "seat")]


def test_default_bounds_are_100_free_and_500_paid(runtime: Runtime) -> None:
    limits = runtime.memory.settings.limits
    assert limits == {"free": 100, "paid": 500}
    assert runtime.memory.settings.limit_for("enterprise") == 100


def test_bad_memory_settings_name_the_setting() -> None:
    from pydantic import ValidationError

    from search2o.config import load_settings
    from search2o.errors import ConfigError
    from search2o.memory.settings import MemorySettings

    with pytest.raises(ValidationError, match="at least 1"):
        MemorySettings(limits={"free": 0})
    with pytest.raises(ValidationError, match="unknown plan 'gold'"):
        MemorySettings(limits={"gold": 5})
    assert MemorySettings(limits={"paid": 5}).limits == {"free": 100, "paid": 5}
    with pytest.raises(ConfigError, match=r"setting memory\.min_score"):
        load_settings(memory={"min_score": 3})
    with pytest.raises(ConfigError, match=r"setting memory\.lexical_weight"):
        load_settings(memory={"lexical_weight": -0.5})
