"""Migrations 0006-0007: the memory tables, their keys, term hashes, a refused downgrade."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from search2o.errors import StorageError
from search2o.memory import MemoryStore
from search2o.runtime import Runtime
from search2o.storage.db import Database
from tests.memory.conftest import AIRLINE, add_user


def test_the_tables_and_their_keys(database: Database) -> None:
    inspector = inspect(database.engine)
    columns = {c["name"] for c in inspector.get_columns("memories")}
    assert columns == {
        "id",
        "user_id",
        "agent",
        "label",
        "sealed",
        "model_id",
        "embedding",
        "terms",
        "created_at",
        "last_retrieved_at",
    }
    assert "text" not in columns  # only the sealed text is kept
    unique = {tuple(u["column_names"]) for u in inspector.get_unique_constraints("memories")}
    assert ("user_id", "agent", "label") in unique
    indexes = {tuple(i["column_names"]) for i in inspector.get_indexes("memories")}
    assert ("user_id",) in indexes and ("agent",) in indexes
    foreign = inspector.get_foreign_keys("memories")
    assert [(f["referred_table"], f["options"].get("ondelete")) for f in foreign] == [
        ("users", "CASCADE")
    ]
    assert {c["name"] for c in inspector.get_columns("user_keys")} == {
        "user_id",
        "kek_id",
        "kek_version",
        "wrapped",
        "created_at",
    }
    database.downgrade("0005")
    assert "memories" not in inspect(database.engine).get_table_names()
    database.upgrade()
    assert database.current_revision() == "0010"


@pytest.mark.slow
def test_a_downgrade_is_refused_while_memories_are_stored(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    with pytest.raises(StorageError, match="while memories are stored"):
        runtime.database.downgrade("0005")
    assert runtime.database.current_revision() == "0010"
    assert memory.count(me) == 1
