"""Conversations whose whole transcript is kept by the enterprise's state hooks.

``conversations.kept_by_hooks``: with ``state.hooks`` set, a conversation an agent run starts
keeps its messages, citations and traces inside the state handed to the hook; our database
keeps only its entry (sealed title, last use, owner). Existing conversations keep their
messages with us (false).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(
            sa.Column("kept_by_hooks", sa.Boolean, nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    bind = op.get_bind()
    kept = bind.execute(
        sa.text("SELECT COUNT(*) FROM conversations WHERE kept_by_hooks = :yes").bindparams(
            yes=True
        )
    ).scalar()
    if kept:
        raise RuntimeError(
            "cannot downgrade below 0011 while conversations are kept by state hooks: the older "
            "schema would show them empty (delete them first, or keep this version)"
        )
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("kept_by_hooks")
