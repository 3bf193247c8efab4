"""Fixtures of the state tests: a runtime on each backend (no embedding model needed), users,
conversations made the way the product makes them, and the loopback reference hook."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from sqlalchemy import delete, func, select

from search2o import accounts
from search2o.accounts import Principal
from search2o.config import Settings
from search2o.query.conversations import create_conversation
from search2o.runtime import Runtime
from search2o.state.store import DatabaseStateStore
from search2o.storage.models import Conversation, StateChange
from search2o.storage.models import ConversationState as StateHead
from tests.state.hook_server import HookServer, serve_hook


@pytest.fixture
def state_runtime(settings: Settings) -> Iterator[Runtime]:
    """A runtime on each backend; state work needs no embedding model, so none is loaded."""
    runtime = Runtime(settings)
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def store(state_runtime: Runtime) -> Iterator[DatabaseStateStore]:
    """Our store with background compaction off (tests that want it make their own)."""
    with DatabaseStateStore(state_runtime.database, state_runtime.vault, compact_every=0) as s:
        yield s


@pytest.fixture
def hook_server() -> Iterator[HookServer]:
    """The reference hook on a loopback port."""
    with serve_hook() as server:
        yield server


def add_user(runtime: Runtime, email: str | None = None) -> Principal:
    """Create a user (a fresh email unless given)."""
    address = email or f"user-{secrets.token_hex(4)}@example.com"
    with runtime.database.session() as session:
        return Principal.of(accounts.create_user(session, address))


def new_conversation(runtime: Runtime, owner: Principal) -> str:
    """Create a conversation with its data key, as the product does for a first message."""
    with runtime.database.session() as session:
        conversation, _ = create_conversation(session, runtime.vault, owner, "")
        return conversation.id


def delete_conversation(
    runtime: Runtime, store: DatabaseStateStore, owner: Principal, conversation: str
) -> None:
    """Delete a conversation the way the product does: its state, then the row, one transaction."""
    with runtime.database.session() as session:
        store.delete(conversation, owner, session=session)
        session.execute(delete(Conversation).where(Conversation.id == conversation))
    runtime.vault.forget(conversation)


def state_rows(runtime: Runtime, conversation: str) -> tuple[int, int]:
    """How many head rows and change rows the conversation has."""
    with runtime.database.session() as session:
        heads = session.scalar(
            select(func.count())
            .select_from(StateHead)
            .where(StateHead.conversation_id == conversation)
        )
        changes = session.scalar(
            select(func.count())
            .select_from(StateChange)
            .where(StateChange.conversation_id == conversation)
        )
        return int(heads or 0), int(changes or 0)
