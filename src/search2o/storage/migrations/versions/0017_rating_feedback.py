"""Reasons and a comment with a thumbs-down (:class:`search2o.storage.models.Message`).

``messages.rating_reasons`` (JSON list of reason codes) and ``messages.rating_comment`` (the
user's comment, sealed with the conversation's data key like the message body). Both are null
for every existing rating; going down drops them and keeps the ratings.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("rating_reasons", sa.JSON, nullable=True))
        batch.add_column(sa.Column("rating_comment", sa.LargeBinary, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("rating_comment")
        batch.drop_column("rating_reasons")
