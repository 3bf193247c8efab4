"""Answers in flight: runs and their sealed events, for replay after a reconnect.

See :mod:`search2o.storage.run_models`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column(
            "user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=True,
        ),
        sa.Column("agent", sa.String(100), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stop_requested", sa.Boolean, nullable=False),
        sa.Column("last_seq", sa.Integer, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("heartbeat_at", TZ, nullable=False),
        sa.Column("finished_at", TZ, nullable=True),
    )
    op.create_index("ix_runs_user_id", "runs", ["user_id"])
    op.create_index("ix_runs_conversation_id", "runs", ["conversation_id"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_table(
        "run_events",
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("runs.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("first_seq", sa.Integer, primary_key=True),
        sa.Column("last_seq", sa.Integer, nullable=False),
        sa.Column("sealed", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    # Runs are transient (an answer in flight, kept minutes after): nothing to keep.
    op.drop_table("run_events")
    op.drop_table("runs")
