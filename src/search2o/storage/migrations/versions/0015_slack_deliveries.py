"""Slack: one delivery record per question (see :mod:`search2o.storage.slack_models`).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "slack_deliveries",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("event_id", sa.String(64), nullable=False, unique=True),
        sa.Column("team", sa.String(100), nullable=False),
        sa.Column("channel", sa.String(200), nullable=False),
        sa.Column("channel_type", sa.String(16), nullable=False),
        sa.Column("message_ts", sa.String(32), nullable=False),
        sa.Column("thread_ts", sa.String(32), nullable=False),
        sa.Column("user", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reply_ts", sa.String(32), nullable=True),
        sa.Column("answer_message_id", sa.String(64), nullable=True),
        sa.Column("act_as", sa.String(320), nullable=True),
        sa.Column("kek_id", sa.String(200), nullable=True),
        sa.Column("kek_version", sa.Integer, nullable=True),
        sa.Column("wrapped_key", sa.LargeBinary, nullable=True),
        sa.Column("sealed_text", sa.LargeBinary, nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.UniqueConstraint("team", "channel", "message_ts", name="uq_slack_deliveries_message"),
    )


def downgrade() -> None:
    op.drop_table("slack_deliveries")
