"""Conversation content is sealed at rest: canary scans, tampering, moved blobs, key rotation."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, text

from search2o.accounts import Principal, create_user
from search2o.config import Settings
from search2o.crypto.vault import Vault
from search2o.errors import IntegrityCheckError, KeyUnavailableError
from search2o.query.conversations import Conversations
from search2o.query.settings import ModelProfile
from search2o.runtime import Runtime
from search2o.storage.models import ConversationKey, ConversationSummary, Message, RetrievalTrace
from tests.conftest import MemoEmbedder
from tests.providers.test_openai_chat import Scripted, text_stream
from tests.query.doubles import (
    DOCS,
    ScriptedChatModel,
    ingest,
    open_runtime,
    searching,
    use_profile,
)

CANARY = "Zebra-Canary-7Q4-unicorn"


@pytest.fixture
def server() -> Iterator[Scripted]:
    scripted = Scripted(default=lambda body: text_stream("Noted."))
    yield scripted
    scripted.httpd.shutdown()
    scripted.httpd.server_close()


def _raw_files(runtime: Runtime, request: pytest.FixtureRequest) -> dict[str, bytes]:
    """Every byte the database keeps on disk (SQLite file, WAL; PostgreSQL's data folder)."""
    found: dict[str, bytes] = {}
    if runtime.database.backend == "sqlite":
        path = Path(str(runtime.database.url.database))
        for suffix in ("", "-wal", "-shm"):
            candidate = Path(f"{path}{suffix}")
            if candidate.exists():
                found[candidate.name] = candidate.read_bytes()
        return found
    server = request.getfixturevalue("pg_server")
    with runtime.database.engine.connect() as connection:
        connection.execute(text("CHECKPOINT"))
    for folder, _, files in os.walk(server.pgdata):
        for name in files:
            path = Path(folder) / name
            try:
                found[str(path)] = path.read_bytes()
            except OSError:
                continue
    pg_dump = Path(os.path.dirname(__import__("pgserver").__file__)) / "pginstall/bin/pg_dump"
    url = runtime.database.url
    dump = subprocess.run(
        [str(pg_dump), "-d", str(url.database), "-h", str(url.query["host"]), "-U", "postgres"],
        capture_output=True,
        check=True,
        timeout=120,
    )
    assert b"CREATE TABLE public.messages" in dump.stdout  # a real, whole dump
    found["pg_dump"] = dump.stdout
    return found


def test_a_canary_never_reaches_the_database_files_or_a_dump(
    runtime: Runtime, server: Scripted, request: pytest.FixtureRequest
) -> None:
    use_profile(
        runtime,
        ModelProfile(
            provider="openai",
            model="scripted",
            base_url=server.url,
            max_retries=0,
            context_tokens=1024,
            answer_reserve=128,
        ),
        summary_writer="extractive",
    )
    me = runtime.local_principal()
    first = runtime.turns.ask(me, f"My locker code is {CANARY}, remember it.")
    conversation_id = first[0].data["conversation_id"]
    for turn in range(10):  # long enough for the running summary to fold the canary in
        events = runtime.turns.ask(me, f"Question {turn}? " + "filler " * 120, conversation_id)
        assert events[-1].kind == "done", events[-1].data
    runtime.conversations.update(me, conversation_id, title=f"Title {CANARY}")
    # the canary is really there: in the title, the messages and the summary, readable
    assert CANARY in runtime.conversations.get(me, conversation_id).title
    assert CANARY in runtime.conversations.messages(me, conversation_id)[0].text
    with runtime.database.session() as session:
        assert session.get(ConversationSummary, conversation_id) is not None
        sealer = runtime.vault.sealer(session, conversation_id, me.user_id)
        summary = session.get(ConversationSummary, conversation_id)
        assert summary is not None and CANARY in sealer.open("summary", summary.sealed)

    for name, data in _raw_files(runtime, request).items():
        assert CANARY.encode() not in data, name
        assert CANARY.encode("utf-16-le") not in data, name


def test_a_searched_turns_trace_is_sealed_too(settings: Settings, embedder: MemoEmbedder) -> None:
    model = ScriptedChatModel(searching("Bicycles go downstairs [1]."))
    with open_runtime(settings, embedder, model=model) as runtime:
        _searched_trace_is_sealed(runtime)


def _searched_trace_is_sealed(runtime: Runtime) -> None:
    ingest(runtime, DOCS)
    me = runtime.local_principal()
    events = runtime.turns.ask(me, f"Where do bikes go, {CANARY}?")
    answer_id = events[-1].data["message_id"]
    assert CANARY in str(runtime.conversations.trace(me, answer_id)["tool_calls"])
    with runtime.database.session() as session:
        row = session.get(RetrievalTrace, answer_id)
        assert row is not None and CANARY.encode() not in row.sealed


@pytest.fixture
def silent(settings: Settings, embedder: MemoEmbedder) -> Iterator[Runtime]:
    """A runtime whose chat model answers nothing (turns store empty answers)."""
    with open_runtime(settings, embedder, model=ScriptedChatModel(lambda m, t: [])) as rt:
        yield rt


def _two_conversations(runtime: Runtime) -> tuple[Principal, str, str]:
    me = runtime.local_principal()
    a = runtime.turns.ask(me, "first conversation")[0].data["conversation_id"]
    b = runtime.turns.ask(me, "second conversation")[0].data["conversation_id"]
    return me, a, b


def _first_message(runtime: Runtime, conversation_id: str) -> Message:
    with runtime.database.session() as session:
        row = session.scalars(
            select(Message).where(Message.conversation_id == conversation_id, Message.seq == 1)
        ).one()
        session.expunge(row)
        return row


def _set_body(runtime: Runtime, message_id: str, body: bytes) -> None:
    with runtime.database.session() as session:
        row = session.get(Message, message_id)
        assert row is not None
        row.body = body


def test_a_tampered_message_fails_its_integrity_check(silent: Runtime) -> None:
    runtime = silent
    me, a, _ = _two_conversations(runtime)
    message = _first_message(runtime, a)
    tampered = bytearray(message.body)
    tampered[20] ^= 0x01
    _set_body(runtime, message.id, bytes(tampered))
    with pytest.raises(IntegrityCheckError, match=f"message {message.id} failed its integrity"):
        runtime.conversations.messages(me, a)
    _set_body(runtime, message.id, message.body[:10])
    with pytest.raises(IntegrityCheckError, match="not a sealed record"):
        runtime.conversations.messages(me, a)


def test_a_blob_moved_to_another_conversation_or_user_does_not_open(silent: Runtime) -> None:
    runtime = silent
    me, a, b = _two_conversations(runtime)
    from_a, in_b = _first_message(runtime, a), _first_message(runtime, b)
    _set_body(runtime, in_b.id, from_a.body)
    with pytest.raises(IntegrityCheckError, match="does not belong here"):
        runtime.conversations.messages(me, b)
    _set_body(runtime, in_b.id, in_b.body)
    assert runtime.conversations.messages(me, b)[0].text == "second conversation"

    # the same conversation handed to another user (data key and all) still does not open
    with runtime.database.session() as session:
        other = create_user(session, "mallory@example.com")
        session.flush()
        session.execute(
            text("UPDATE conversations SET user_id = :u WHERE id = :c"), {"u": other.id, "c": a}
        )
        mallory = Principal.of(other)
    runtime.vault.forget(a)
    with pytest.raises(IntegrityCheckError):
        runtime.conversations.messages(mallory, a)


def _read_everything(runtime: Runtime, me: Principal) -> list[tuple[str, list[str]]]:
    """Every conversation's title and message texts, read by a fresh vault (no cached keys)."""
    vault = Vault(runtime.database, runtime.key_provider, cache_size=0)
    conversations = Conversations(runtime.database, vault)
    return sorted(
        (c.title, [m.text for m in conversations.messages(me, c.id)])
        for c in conversations.list_conversations(me)
    )


def test_rotate_then_retire_keeps_every_conversation_readable(silent: Runtime) -> None:
    runtime = silent
    me, _, _ = _two_conversations(runtime)
    before = _read_everything(runtime, me)
    assert sorted(title for title, _ in before) == ["first conversation", "second conversation"]
    assert runtime.vault.versions_in_use() == {(runtime.key_provider.key_id, 1): 2}

    provider = runtime.key_provider
    assert provider.add_version() == 2
    report = runtime.vault.rewrap_all()
    assert (report.version, report.rewrapped, report.unchanged) == (2, 2, 0)
    with runtime.database.session() as session:
        assert {row.kek_version for row in session.scalars(select(ConversationKey))} == {2}
    assert _read_everything(runtime, me) == before
    assert runtime.vault.rewrap_all().rewrapped == 0  # idempotent

    provider.retire(1)
    assert _read_everything(runtime, me) == before
    # a data key still wrapped with the retired version can no longer be opened
    with runtime.database.session() as session:
        row = session.scalars(select(ConversationKey)).first()
        assert row is not None
        session.execute(
            text("UPDATE conversation_keys SET kek_version = 1 WHERE conversation_id = :c"),
            {"c": row.conversation_id},
        )
    with pytest.raises(KeyUnavailableError, match="version 1 is retired"):
        _read_everything(runtime, me)
