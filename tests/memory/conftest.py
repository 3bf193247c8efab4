"""Fixtures of the memory tests: the runtime's memory store on each backend, users, helpers.

Everything is real: the parametrised database (SQLite file, pgserver PostgreSQL), the
built-in embedding model, the local keyring.
"""

from __future__ import annotations

import secrets

import pytest

from search2o import accounts
from search2o.accounts import Principal
from search2o.memory import MemoryStore
from search2o.memory.settings import MemorySettings
from search2o.runtime import Runtime

AIRLINE = "The user prefers to fly KLM"
COFFEE = "The user drinks their coffee black, without sugar"
BOOKS = "The user's favourite author is Haruki Murakami"
DOG = "The user has a border collie called Pixel"


@pytest.fixture
def memory(runtime: Runtime) -> MemoryStore:
    """The runtime's memory store (default settings)."""
    return runtime.memory


def add_user(runtime: Runtime, email: str | None = None, plan: str = "free") -> Principal:
    """Create a user (a fresh email unless given)."""
    address = email or f"user-{secrets.token_hex(4)}@example.com"
    with runtime.database.session() as session:
        return Principal.of(accounts.create_user(session, address, plan=plan))


def store_with(runtime: Runtime, **settings: object) -> MemoryStore:
    """A memory store on the runtime's database with other settings (e.g. small bounds)."""
    return MemoryStore(
        runtime.database, runtime.vault, runtime.embedder, MemorySettings(**settings)
    )


def labels(hits: list[object]) -> list[tuple[str, str]]:
    """``(agent, label)`` of hits or listed memories, in order."""
    return [(h.agent, h.label) for h in hits]  # type: ignore[attr-defined]
