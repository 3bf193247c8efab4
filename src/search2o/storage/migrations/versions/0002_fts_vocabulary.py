"""FTS5 vocabulary table: per-term document frequencies for common-term pruning (SQLite).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        # SQLite FTS5 documentation, 7 "The fts5vocab Virtual Table Module": 'row' gives, per
        # term, the number of rows (chunks) that contain it.
        op.execute("CREATE VIRTUAL TABLE chunks_fts_vocab USING fts5vocab(chunks_fts, 'row')")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS chunks_fts_vocab")
