"""Keyed term hashes of memories, for the lexical half of memory search.

``memories.terms`` holds the keyed hashes of a memory's terms (:mod:`search2o.memory.lexical`).
Rows stored before this revision keep ``NULL``: a search that meets them re-embeds them with the
current recipe (label words only when the label has words) and hashes their terms, since the
hash key derives from the user's data key, which a migration does not hold.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.add_column(sa.Column("terms", sa.LargeBinary, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("terms")
