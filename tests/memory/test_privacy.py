"""Memory text is sealed at rest; query text is never stored or logged."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import select, text, update

from search2o.errors import IntegrityCheckError
from search2o.logs import JsonFormatter
from search2o.memory import MemoryStore
from search2o.memory.lexical import terms
from search2o.memory.ranking import embedding_text
from search2o.runtime import Runtime
from search2o.storage.memory_models import Memory
from tests.memory.conftest import AIRLINE, add_user
from tests.query.test_sealed import _raw_files

pytestmark = pytest.mark.slow

CANARY = "Zebra-Memory-Canary-9K2-narwhal"
QUERY_CANARY = "Okapi-Query-Canary-3F8-quokka"


def test_no_plaintext_of_a_memory_or_a_query_reaches_the_database_files(
    runtime: Runtime, memory: MemoryStore, request: pytest.FixtureRequest
) -> None:
    me = add_user(runtime)
    memory.store(me, "vault", {"locker_code": f"The user's locker code is {CANARY}"})
    memory.store(me, "vault", {"locker_code": f"The user's new locker code is {CANARY}!"})
    hits = memory.search(me, f"What is the locker code? {QUERY_CANARY}")
    assert hits and CANARY in hits[0].text  # really stored, and readable by its owner
    for name, data in _raw_files(runtime, request).items():
        for needle in (CANARY, QUERY_CANARY):
            assert needle.encode() not in data, (name, needle)
            assert needle.encode("utf-16-le") not in data, (name, needle)


@contextmanager
def _every_log_record() -> Iterator[list[str]]:
    """Capture every log record of every logger at DEBUG, formatted (SQL parameters too)."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(JsonFormatter().format(record))
            lines.append(str(record.args))

    handler = Collect(level=logging.DEBUG)
    names = ["", "search2o", "sqlalchemy.engine", "sqlalchemy.pool", "httpx", "urllib3"]
    saved = {
        name: (logging.getLogger(name).level, logging.getLogger(name).handlers[:]) for name in names
    }
    for name in names:
        logging.getLogger(name).setLevel(logging.DEBUG)
        logging.getLogger(name).addHandler(handler)
    try:
        yield lines
    finally:
        for name, (level, handlers) in saved.items():
            logging.getLogger(name).setLevel(level)
            logging.getLogger(name).handlers[:] = handlers


def test_the_query_text_is_never_logged(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE})
    with _every_log_record() as lines:
        hits = memory.search(me, f"which airline do they like? {QUERY_CANARY}")
        memory.search(me, f"quantum chromodynamics {QUERY_CANARY}")
    assert [h.label for h in hits] == ["preferred_airline"]
    assert any("memories" in line for line in lines)  # the capture saw the SQL
    assert not [line for line in lines if QUERY_CANARY in line]


def test_a_sealed_memory_moved_to_another_label_or_user_does_not_open(
    runtime: Runtime, memory: MemoryStore
) -> None:
    me, other = add_user(runtime), add_user(runtime)
    memory.store(me, "travel", {"preferred_airline": AIRLINE, "seat": "Aisle seats"})
    memory.store(other, "travel", {"seat": "Window seats"})
    with runtime.database.session() as session:
        rows = {(m.user_id, m.label): m.sealed for m in session.scalars(select(Memory))}
        session.execute(
            update(Memory)
            .where(Memory.user_id == me.user_id, Memory.label == "seat")
            .values(sealed=rows[(me.user_id, "preferred_airline")])
        )
    with pytest.raises(IntegrityCheckError, match="does not belong here"):
        memory.list(me)
    with runtime.database.session() as session:
        session.execute(
            update(Memory)
            .where(Memory.user_id == me.user_id, Memory.label == "seat")
            .values(sealed=rows[(other.user_id, "seat")])
        )
    with pytest.raises(IntegrityCheckError, match="does not belong here"):
        memory.list(me)


def test_the_text_column_holds_no_plaintext(runtime: Runtime, memory: MemoryStore) -> None:
    me = add_user(runtime)
    memory.store(me, "vault", {"locker_code": CANARY})
    with runtime.database.session() as session:
        blob = session.scalar(text("SELECT sealed FROM memories"))
    assert blob is not None and CANARY.encode() not in bytes(blob)


def test_term_hashes_are_keyed_per_user(runtime: Runtime, memory: MemoryStore) -> None:
    ann, bob = add_user(runtime), add_user(runtime)
    text_ = f"The user's locker code is {CANARY}"
    for owner in (ann, bob):
        memory.store(owner, "vault", {"locker_code": text_})
    with runtime.database.session() as session:
        rows = dict(session.execute(select(Memory.user_id, Memory.terms)).all())
    ours, theirs = bytes(rows[ann.user_id]), bytes(rows[bob.user_id])
    words = terms(embedding_text("locker_code", text_))
    assert "zebra" in words and len(ours) == len(theirs) == 8 * len(words)  # 8 bytes a term
    assert ours != theirs  # the same words hash differently for another user
    unkeyed = hashlib.blake2b(b"zebra", digest_size=8).digest()
    assert unkeyed not in ours and b"zebra" not in ours.lower()
