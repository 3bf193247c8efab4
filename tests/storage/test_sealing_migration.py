"""Revision 0005 seals conversations stored in plain text by earlier revisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text

from search2o.accounts import Principal
from search2o.crypto.local_keyring import LocalKeyring
from search2o.crypto.vault import Vault
from search2o.errors import StorageError
from search2o.query.conversations import Conversations
from search2o.storage.db import Database

SECRET = "plaintext-before-0005"


def _legacy_rows(database_url: str) -> None:
    """A database at 0004 holding one conversation, written the way 0004 stored it."""
    db = Database(database_url, migrate=False)
    db.upgrade("0004")
    with db.engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO users (id, email, display_name, groups, plan, is_admin, created_at) "
                "VALUES (1, 'ann@example.com', '', '[]', 'paid', false, CURRENT_TIMESTAMP)"
            )
        )
        c.execute(
            text(
                "INSERT INTO conversations (id, user_id, title, pinned, message_count, "
                "created_at, last_used_at) VALUES (:id, 1, :t, false, 2, CURRENT_TIMESTAMP, "
                "CURRENT_TIMESTAMP)"
            ),
            {"id": "a" * 32, "t": f"title {SECRET}"},
        )
        for seq, role, body in ((1, "user", f"question {SECRET}"), (2, "assistant", "answer")):
            c.execute(
                text(
                    "INSERT INTO messages (id, conversation_id, seq, role, text, citations, "
                    "status, searched, created_at) VALUES (:id, :c, :s, :r, :x, :ci, "
                    "'complete', false, CURRENT_TIMESTAMP)"
                ),
                {
                    "id": str(seq) * 32,
                    "c": "a" * 32,
                    "s": seq,
                    "r": role,
                    "x": body,
                    "ci": json.dumps([{"number": 1}] if role == "assistant" else []),
                },
            )
        c.execute(
            text("INSERT INTO retrieval_traces (message_id, trace) VALUES (:m, :t)"),
            {"m": "2" * 32, "t": json.dumps({"query": SECRET})},
        )
    db.close()


def test_plaintext_conversations_are_sealed_on_upgrade(database_url: str, tmp_path: Path) -> None:
    _legacy_rows(database_url)
    with pytest.raises(StorageError, match="must be sealed"):
        Database(database_url)  # no key provider handed over: refused, nothing changed
    keyring = LocalKeyring(tmp_path / "keyring.json")
    db = Database(database_url, key_provider=keyring)
    try:
        assert db.current_revision() == "0010"
        ann = Principal(1, "ann@example.com", (), plan="paid")
        conversations = Conversations(db, Vault(db, keyring))
        assert conversations.get(ann, "a" * 32).title == f"title {SECRET}"
        messages = conversations.messages(ann, "a" * 32)
        assert [(m.role, m.text, m.citations) for m in messages] == [
            ("user", f"question {SECRET}", []),
            ("assistant", "answer", [{"number": 1}]),
        ]
        assert conversations.trace(ann, "2" * 32) == {"query": SECRET}
        with db.engine.connect() as c:
            for table in ("conversations", "messages", "retrieval_traces"):
                for row in c.execute(text(f"SELECT * FROM {table}")):
                    assert SECRET not in repr(row), table
    finally:
        db.close()
