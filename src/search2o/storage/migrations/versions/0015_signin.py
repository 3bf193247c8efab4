"""Browser sign-in: sessions and one-time sign-in grants.

See :mod:`search2o.storage.signin_models`. Downgrading drops both tables, which signs every
browser out and voids links not yet used.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def _user_fk(*, nullable: bool) -> sa.Column[int]:
    return sa.Column(
        "user_id",
        sa.Integer,
        sa.ForeignKey("users.id", ondelete="CASCADE"),
        nullable=nullable,
    )


def upgrade() -> None:
    op.create_table(
        "web_sessions",
        sa.Column("id", sa.Integer, primary_key=True),
        _user_fk(nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("method", sa.String(16), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("last_seen_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("revoked_at", TZ, nullable=True),
    )
    op.create_index("ix_web_sessions_user_id", "web_sessions", ["user_id"])
    op.create_index("ix_web_sessions_expires_at", "web_sessions", ["expires_at"])
    op.create_table(
        "signin_grants",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("value_hash", sa.String(64), nullable=False, unique=True),
        _user_fk(nullable=True),
        sa.Column("nonce", sa.String(128), nullable=True),
        sa.Column("code_verifier", sa.String(128), nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("used_at", TZ, nullable=True),
    )
    op.create_index("ix_signin_grants_expires_at", "signin_grants", ["expires_at"])


def downgrade() -> None:
    op.drop_table("signin_grants")
    op.drop_table("web_sessions")
