"""Surfaces: identities, link codes, shared-channel principals, threads, surface tokens.

See :mod:`search2o.storage.surface_models`. ``api_tokens`` gains ``surface``: a surface's
service token has a surface and no user (``user_id`` becomes nullable, and a check constraint
keeps exactly one of the two). Downgrading deletes the surface tokens (the older schema has no
way to hold a token without a user) and the four tables.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-20
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)
OWNER_CHECK = (
    "(user_id IS NULL AND surface IS NOT NULL) OR (user_id IS NOT NULL AND surface IS NULL)"
)


def _user_fk(*, unique: bool = False) -> sa.Column[int]:
    return sa.Column(
        "user_id",
        sa.Integer,
        sa.ForeignKey("users.id", ondelete="CASCADE"),
        nullable=False,
        unique=unique,
    )


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("surface", sa.String(32), nullable=True))
        batch.alter_column("user_id", existing_type=sa.Integer, nullable=True)
        batch.create_check_constraint("ck_api_tokens_owner", OWNER_CHECK)

    op.create_table(
        "surface_identities",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("surface", sa.String(32), nullable=False),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("external_user_id", sa.String(200), nullable=False),
        _user_fk(),
        sa.Column("linked_by", sa.String(8), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.UniqueConstraint(
            "surface", "workspace", "external_user_id", name="uq_surface_identities_account"
        ),
    )
    op.create_index("ix_surface_identities_user_id", "surface_identities", ["user_id"])

    op.create_table(
        "link_codes",
        sa.Column("code_hash", sa.String(64), primary_key=True),
        _user_fk(),
        sa.Column("surface", sa.String(32), nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("expires_at", TZ, nullable=False),
        sa.Column("used_at", TZ, nullable=True),
    )
    op.create_index("ix_link_codes_user_id", "link_codes", ["user_id"])

    op.create_table(
        "surface_shared_principals",
        sa.Column("surface", sa.String(32), primary_key=True),
        sa.Column("workspace", sa.String(100), primary_key=True),
        _user_fk(unique=True),
        sa.Column("created_at", TZ, nullable=False),
    )

    op.create_table(
        "surface_threads",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("surface", sa.String(32), nullable=False),
        sa.Column("workspace", sa.String(100), nullable=False),
        sa.Column("channel", sa.String(200), nullable=False),
        sa.Column("thread", sa.String(200), nullable=False),
        sa.Column(
            "conversation_id",
            sa.String(32),
            sa.ForeignKey("conversations.id", ondelete="CASCADE"),
            nullable=False,
        ),
        _user_fk(),
        sa.Column("created_at", TZ, nullable=False),
        sa.UniqueConstraint(
            "surface", "workspace", "channel", "thread", name="uq_surface_threads_thread"
        ),
    )
    op.create_index("ix_surface_threads_conversation_id", "surface_threads", ["conversation_id"])
    op.create_index("ix_surface_threads_user_id", "surface_threads", ["user_id"])


def downgrade() -> None:
    op.drop_table("surface_threads")
    op.drop_table("surface_shared_principals")
    op.drop_table("link_codes")
    op.drop_table("surface_identities")
    # Below 0012 every token has a user: the surface tokens cannot be kept.
    op.execute("DELETE FROM api_tokens WHERE surface IS NOT NULL")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_constraint("ck_api_tokens_owner", type_="check")
        batch.alter_column("user_id", existing_type=sa.Integer, nullable=False)
        batch.drop_column("surface")
