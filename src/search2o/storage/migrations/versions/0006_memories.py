"""Long-term memories and per-user data keys.

``user_keys`` holds each user's data key wrapped by the KEK; ``memories`` holds one sealed
memory per (user, agent, label) with its embedding (see :mod:`search2o.storage.memory_models`).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

from search2o.storage.models import EmbeddingVector

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def _user_fk() -> sa.ForeignKey:
    return sa.ForeignKey("users.id", ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "user_keys",
        sa.Column("user_id", sa.Integer, _user_fk(), primary_key=True),
        sa.Column("kek_id", sa.String(200), nullable=False),
        sa.Column("kek_version", sa.Integer, nullable=False),
        sa.Column("wrapped", sa.LargeBinary, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_index("ix_user_keys_kek", "user_keys", ["kek_id", "kek_version"])
    op.create_table(
        "memories",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("user_id", sa.Integer, _user_fk(), nullable=False),
        sa.Column("agent", sa.String(100), nullable=False),
        sa.Column("label", sa.String(64), nullable=False),
        sa.Column("sealed", sa.LargeBinary, nullable=False),
        sa.Column("model_id", sa.String(200), nullable=False),
        sa.Column("embedding", EmbeddingVector(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("last_retrieved_at", TZ),
        sa.UniqueConstraint("user_id", "agent", "label", name="uq_memories_user_agent_label"),
    )
    op.create_index("ix_memories_user_id", "memories", ["user_id"])
    op.create_index("ix_memories_agent", "memories", ["agent"])


def downgrade() -> None:
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT COUNT(*) FROM memories")).scalar():
        raise RuntimeError(
            "cannot downgrade below 0006 while memories are stored: the older schema has no "
            "place for them (users can delete theirs with `search2o memory delete`)"
        )
    op.drop_index("ix_memories_agent", "memories")
    op.drop_index("ix_memories_user_id", "memories")
    op.drop_table("memories")
    op.drop_index("ix_user_keys_kek", "user_keys")
    op.drop_table("user_keys")
