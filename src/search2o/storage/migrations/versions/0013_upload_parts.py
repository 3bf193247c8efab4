"""Uploaded files waiting for their ingestion job (``upload_parts``).

See :mod:`search2o.storage.upload_models`.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "upload_parts",
        sa.Column("upload_id", sa.String(32), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("filename", sa.String(2000), nullable=False),
        sa.Column("source", sa.String(2000), nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_upload_parts_created_at", "upload_parts", ["created_at"])


def downgrade() -> None:
    # Uploads still waiting would be lost; their jobs then fail, which says so.
    op.drop_table("upload_parts")
