"""Sources and sync: the ``sources`` table, documents tagged with their source, chunk hashes.

* ``sources``: one configured connector (name, kind, settings, sealed credentials, schedule)
  with its sync state (status, cursor, checkpoint, progress, last success and error, the lease
  of the sync running now) (:class:`search2o.storage.source_models.Source`).
* ``documents.source_id`` / ``source_key`` / ``version`` / ``url``: the source a document came
  from, its key and cheap version there, and the address that opens it; one document per
  (source, key). Null for documents ingested by hand.
* ``chunks.text_hash``: SHA-256 of the text a chunk's vector was made from, so a vector is
  reused instead of embedded again when the same text comes back (an unchanged paragraph of an
  edited document). Null for chunks written before: those are embedded again once.

Going down drops all of it; documents stay, untagged.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

from search2o.storage.models import UTCDateTime

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sources",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("credentials", sa.LargeBinary, nullable=True),
        sa.Column("kek_id", sa.String(200), nullable=True),
        sa.Column("kek_version", sa.Integer, nullable=True),
        sa.Column("wrapped", sa.LargeBinary, nullable=True),
        sa.Column("schedule_s", sa.Integer, nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("cursor", sa.Text, nullable=True),
        sa.Column("checkpoint", sa.JSON, nullable=True),
        sa.Column("progress", sa.JSON, nullable=True),
        sa.Column("last_counts", sa.JSON, nullable=True),
        sa.Column("last_started_at", UTCDateTime(), nullable=True),
        sa.Column("last_success_at", UTCDateTime(), nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_error_at", UTCDateTime(), nullable=True),
        sa.Column("auth_failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("lease_holder", sa.String(200), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("next_sync_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("source_id", sa.Integer, nullable=True))
        batch.add_column(sa.Column("source_key", sa.String(1000), nullable=True))
        batch.add_column(sa.Column("version", sa.String(500), nullable=True))
        batch.add_column(sa.Column("url", sa.String(2000), nullable=True))
        batch.create_foreign_key(
            "fk_documents_source_id", "sources", ["source_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index("ix_documents_source_key", ["source_id", "source_key"], unique=True)
    with op.batch_alter_table("chunks") as batch:
        batch.add_column(sa.Column("text_hash", sa.String(64), nullable=True))
        batch.create_index("ix_chunks_text_hash", ["text_hash"])


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.drop_index("ix_chunks_text_hash")
        batch.drop_column("text_hash")
    with op.batch_alter_table("documents") as batch:
        batch.drop_index("ix_documents_source_key")
        batch.drop_constraint("fk_documents_source_id", type_="foreignkey")
        batch.drop_column("url")
        batch.drop_column("version")
        batch.drop_column("source_key")
        batch.drop_column("source_id")
    op.drop_table("sources")
