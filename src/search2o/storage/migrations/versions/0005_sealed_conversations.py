"""Sealed conversation content, data keys, and agent conversation state.

Titles, message bodies (text and citations), summaries and retrieval traces move to sealed
columns (AES-256-GCM under a per-conversation data key; see :mod:`search2o.crypto`). Rows stored
before this revision are sealed here, with data keys wrapped by the key provider the runtime
hands over in ``config.attributes["key_provider"]``; their plaintext columns are then dropped.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from typing import Any

import sqlalchemy as sa
from alembic import context, op

from search2o.crypto.envelope import associated_data, new_data_key, seal_json

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def _conversation_fk() -> sa.ForeignKey:
    return sa.ForeignKey("conversations.id", ondelete="CASCADE")


def upgrade() -> None:
    # Refuse before any change (SQLite's driver commits DDL as it goes).
    provider = _key_provider_if_needed()
    op.create_table(
        "conversation_keys",
        sa.Column("conversation_id", sa.String(32), _conversation_fk(), primary_key=True),
        sa.Column("kek_id", sa.String(200), nullable=False),
        sa.Column("kek_version", sa.Integer, nullable=False),
        sa.Column("wrapped", sa.LargeBinary, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_index("ix_conversation_keys_kek", "conversation_keys", ["kek_id", "kek_version"])
    op.create_table(
        "conversation_states",
        sa.Column("conversation_id", sa.String(32), _conversation_fk(), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("snapshot_version", sa.Integer, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )
    op.create_table(
        "state_snapshots",
        sa.Column("conversation_id", sa.String(32), _conversation_fk(), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("sealed", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "state_changes",
        sa.Column("conversation_id", sa.String(32), _conversation_fk(), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("sealed", sa.LargeBinary, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("title_sealed", sa.LargeBinary))
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("body", sa.LargeBinary))
    with op.batch_alter_table("conversation_summaries") as batch:
        batch.add_column(sa.Column("sealed", sa.LargeBinary))
    with op.batch_alter_table("retrieval_traces") as batch:
        batch.add_column(sa.Column("sealed", sa.LargeBinary))
    if provider is not None:
        _seal_existing_rows(provider)
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("title")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("text")
        batch.drop_column("citations")
    with op.batch_alter_table("conversation_summaries") as batch:
        batch.drop_column("text")
    with op.batch_alter_table("retrieval_traces") as batch:
        batch.drop_column("trace")


def _key_provider_if_needed() -> Any:
    """The runtime's key provider when there are rows to seal, else ``None``."""
    if not op.get_bind().execute(sa.text("SELECT COUNT(*) FROM conversations")).scalar():
        return None
    provider = context.config.attributes.get("key_provider")
    if provider is None:
        raise RuntimeError(
            "conversations stored before encryption must be sealed: upgrade through the "
            "runtime (`search2o db upgrade`, `search2o serve` or any command that opens it)"
        )
    return provider


def _seal_existing_rows(provider: Any) -> None:
    bind = op.get_bind()
    conversations = list(bind.execute(sa.text("SELECT id, user_id, title FROM conversations")))
    for conversation_id, owner, title in conversations:
        key = new_data_key()
        wrapped = provider.wrap(key)
        bind.execute(
            sa.text(
                "INSERT INTO conversation_keys (conversation_id, kek_id, kek_version, wrapped, "
                "created_at) VALUES (:c, :k, :v, :w, CURRENT_TIMESTAMP)"
            ),
            {"c": conversation_id, "k": wrapped.key_id, "v": wrapped.version, "w": wrapped.blob},
        )

        def seal(
            kind: str, value: Any, key: bytes = key, cid: str = conversation_id, uid: int = owner
        ) -> bytes:
            return seal_json(key, value, associated_data(kind, cid, uid))

        bind.execute(
            sa.text("UPDATE conversations SET title_sealed = :s WHERE id = :c"),
            {"s": seal("title", title), "c": conversation_id},
        )
        messages = bind.execute(
            sa.text("SELECT id, text, citations FROM messages WHERE conversation_id = :c"),
            {"c": conversation_id},
        )
        for message_id, text, citations in list(messages):
            body = {"text": text, "citations": _json(citations)}
            bind.execute(
                sa.text("UPDATE messages SET body = :s WHERE id = :m"),
                {"s": seal("message", body), "m": message_id},
            )
            for (trace,) in list(
                bind.execute(
                    sa.text("SELECT trace FROM retrieval_traces WHERE message_id = :m"),
                    {"m": message_id},
                )
            ):
                bind.execute(
                    sa.text("UPDATE retrieval_traces SET sealed = :s WHERE message_id = :m"),
                    {"s": seal("trace", _json(trace)), "m": message_id},
                )
        for (summary,) in list(
            bind.execute(
                sa.text("SELECT text FROM conversation_summaries WHERE conversation_id = :c"),
                {"c": conversation_id},
            )
        ):
            bind.execute(
                sa.text("UPDATE conversation_summaries SET sealed = :s WHERE conversation_id = :c"),
                {"s": seal("summary", summary), "c": conversation_id},
            )


def _json(value: Any) -> Any:
    import json

    return json.loads(value) if isinstance(value, str) else value


def downgrade() -> None:
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT COUNT(*) FROM conversations")).scalar():
        raise RuntimeError(
            "cannot downgrade below 0005 while conversations are stored: their content is "
            "sealed and the older schema keeps it in plain text"
        )
    with op.batch_alter_table("retrieval_traces") as batch:
        batch.drop_column("sealed")
        batch.add_column(sa.Column("trace", sa.JSON, nullable=False))
    with op.batch_alter_table("conversation_summaries") as batch:
        batch.drop_column("sealed")
        batch.add_column(sa.Column("text", sa.Text, nullable=False))
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("body")
        batch.add_column(sa.Column("text", sa.Text, nullable=False))
        batch.add_column(sa.Column("citations", sa.JSON, nullable=False))
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("title_sealed")
        batch.add_column(sa.Column("title", sa.Text, nullable=False))
    op.drop_table("state_changes")
    op.drop_table("state_snapshots")
    op.drop_table("conversation_states")
    op.drop_index("ix_conversation_keys_kek", "conversation_keys")
    op.drop_table("conversation_keys")
