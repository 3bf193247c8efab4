"""The scope of an API token: ``api_tokens.local_only``.

A token printed by a local-mode ``search2o serve`` is the local admin's; it must never open a
token-mode server that shares the database. ``local_only`` tokens authenticate only in
``auth_mode=local`` (:func:`search2o.accounts.authenticate`).

Before this revision such tokens were the ones named ``serve`` (``serve`` issues them with
``replace_token(..., "serve")``); they are marked local-only here. A token an admin issued by
hand with ``search2o tokens issue --name serve`` is marked too and must be issued again under
another name. Downgrading revokes every local-only token, since the older schema would let it
authenticate anywhere.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-17
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(
            sa.Column("local_only", sa.Boolean, nullable=False, server_default=sa.false())
        )
    op.execute(
        sa.text("UPDATE api_tokens SET local_only = :yes WHERE name = 'serve'").bindparams(yes=True)
    )


def downgrade() -> None:
    op.execute(
        sa.text(
            "UPDATE api_tokens SET revoked_at = CURRENT_TIMESTAMP "
            "WHERE local_only = :yes AND revoked_at IS NULL"
        ).bindparams(yes=True)
    )
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("local_only")
