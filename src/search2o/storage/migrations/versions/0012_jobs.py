"""The job ledger.

``jobs`` holds one row per background job: kind, unique dedupe key, state, attempts, lease,
progress, result or error, a payload of ids and names (plain JSON, never user content) and the
owner (see :mod:`search2o.storage.job_models`). The transport's own tables (Huey's ``SqliteHuey``
file, ``PostgresHuey`` tables, Redis keys) are made by the transport when the queue opens.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-12
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(100), nullable=False),
        sa.Column("dedupe_key", sa.String(255), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("run_after", TZ, nullable=False),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        sa.Column("lease_expires_at", TZ, nullable=True),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("progress", sa.JSON, nullable=True),
        sa.Column("result", sa.JSON, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column(
            "owner_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=True
        ),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("started_at", TZ, nullable=True),
        sa.Column("finished_at", TZ, nullable=True),
        sa.UniqueConstraint("dedupe_key", name="uq_jobs_dedupe_key"),
    )
    op.create_index("ix_jobs_state_run_after", "jobs", ["state", "run_after"])
    op.create_index("ix_jobs_state_lease", "jobs", ["state", "lease_expires_at"])
    op.create_index("ix_jobs_owner_created", "jobs", ["owner_id", "created_at"])
    op.create_index("ix_jobs_kind_created", "jobs", ["kind", "created_at"])


def downgrade() -> None:
    bind = op.get_bind()
    waiting = bind.execute(
        sa.text("SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'running')")
    ).scalar()
    if waiting:
        raise RuntimeError(
            f"cannot downgrade below 0010 while {waiting} job(s) are queued or running: the "
            "older schema has no place for them (let the workers finish them: "
            "`search2o jobs list --state queued`)"
        )
    op.drop_table("jobs")
