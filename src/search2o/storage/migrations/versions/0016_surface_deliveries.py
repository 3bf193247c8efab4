"""Surfaces: shared delivery records and ingress cursors (:mod:`search2o.storage.delivery_models`).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "surface_deliveries",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("surface", sa.String(32), nullable=False),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("channel", sa.String(200), nullable=False),
        sa.Column("channel_type", sa.String(16), nullable=False),
        sa.Column("message_key", sa.String(64), nullable=False),
        sa.Column("event_key", sa.String(64), nullable=False),
        sa.Column("thread_key", sa.String(64), nullable=False),
        sa.Column("user", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reply_key", sa.String(200), nullable=True),
        sa.Column("answer_message_id", sa.String(64), nullable=True),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("act_as", sa.String(320), nullable=True),
        sa.Column("kek_id", sa.String(200), nullable=True),
        sa.Column("kek_version", sa.Integer, nullable=True),
        sa.Column("wrapped_key", sa.LargeBinary, nullable=True),
        sa.Column("sealed_text", sa.LargeBinary, nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.UniqueConstraint("surface", "event_key", name="uq_surface_deliveries_event"),
        sa.UniqueConstraint(
            "surface", "workspace", "channel", "message_key", name="uq_surface_deliveries_message"
        ),
    )
    op.create_index(
        "ix_surface_deliveries_thread",
        "surface_deliveries",
        ["surface", "workspace", "channel", "thread_key"],
    )
    op.create_table(
        "surface_cursors",
        sa.Column("surface", sa.String(32), primary_key=True),
        sa.Column("workspace", sa.String(100), primary_key=True),
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("value", sa.String(64), nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("surface_cursors")
    op.drop_index("ix_surface_deliveries_thread", table_name="surface_deliveries")
    op.drop_table("surface_deliveries")
