"""Conversations, messages (with citations and ratings) and retrieval traces.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("pinned", sa.Boolean, nullable=False),
        sa.Column("message_count", sa.Integer, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("last_used_at", TZ, nullable=False),
    )
    op.create_index("ix_conversations_user_last_used", "conversations", ["user_id", "last_used_at"])
    op.create_table(
        "messages",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("citations", sa.JSON, nullable=False),
        sa.Column("agent", sa.String(200)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("searched", sa.Boolean, nullable=False),
        sa.Column("rating", sa.String(8)),
        sa.Column("rated_at", TZ),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_index(
        "ix_messages_conversation_seq", "messages", ["conversation_id", "seq"], unique=True
    )
    op.create_table(
        "retrieval_traces",
        sa.Column(
            "message_id",
            sa.String(32),
            sa.ForeignKey("messages.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("trace", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("retrieval_traces")
    op.drop_index("ix_messages_conversation_seq", "messages")
    op.drop_table("messages")
    op.drop_index("ix_conversations_user_last_used", "conversations")
    op.drop_table("conversations")
