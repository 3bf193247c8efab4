"""Stored agent definitions.

``agents`` holds one definition per agent name: its description and the JSON document as the
admin gave it, in plain text (admin configuration, not user content; see
:mod:`search2o.storage.agent_models`).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-10
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("definition", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column(
            "updated_by",
            sa.Integer,
            sa.ForeignKey("users.id", ondelete="SET NULL"),
            nullable=True,
        ),
    )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT COUNT(*) FROM agents")).scalar():
        raise RuntimeError(
            "cannot downgrade below 0008 while agents are defined: the older schema has no "
            "place for them (save each with `search2o agents show NAME`, then delete it with "
            "`search2o agents delete NAME`)"
        )
    op.drop_table("agents")
