"""Users, API tokens, documents with access lists, chunks, embeddings, lexical indexes.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from search2o.storage.models import EmbeddingVector

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "users",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("email", sa.String(320), nullable=False, unique=True),
        sa.Column("display_name", sa.String(200), nullable=False),
        sa.Column("groups", sa.JSON, nullable=False),
        sa.Column("plan", sa.String(16), nullable=False),
        sa.Column("is_admin", sa.Boolean, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "user_id", sa.Integer, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("last_used_at", TZ),
        sa.Column("revoked_at", TZ),
    )
    op.create_index("ix_api_tokens_user_id", "api_tokens", ["user_id"])
    op.create_table(
        "documents",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("source", sa.String(2000), nullable=False, unique=True),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("media_type", sa.String(100), nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("size_bytes", sa.Integer, nullable=False),
        sa.Column("chunk_count", sa.Integer, nullable=False),
        sa.Column("is_public", sa.Boolean, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )
    op.create_index("ix_documents_is_public", "documents", ["is_public"])
    op.create_table(
        "document_access",
        sa.Column(
            "document_id",
            sa.Integer,
            sa.ForeignKey("documents.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("principal", sa.String(400), primary_key=True),
    )
    op.create_index("ix_document_access_principal", "document_access", ["principal"])
    op.create_table(
        "chunks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "document_id",
            sa.Integer,
            sa.ForeignKey("documents.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("ordinal", sa.Integer, nullable=False),
        sa.Column("heading", sa.Text, nullable=False),
        sa.Column("heading_path", sa.JSON, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("token_count", sa.Integer, nullable=False),
    )
    op.create_index("ix_chunks_document_ordinal", "chunks", ["document_id", "ordinal"])
    op.create_table(
        "chunk_embeddings",
        sa.Column(
            "chunk_id",
            sa.Integer,
            sa.ForeignKey("chunks.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("model_id", sa.String(200), nullable=False),
        sa.Column("embedding", EmbeddingVector(), nullable=False),
    )
    op.create_index("ix_chunk_embeddings_model_id", "chunk_embeddings", ["model_id"])
    op.create_table(
        "vector_spaces",
        sa.Column("model_id", sa.String(200), primary_key=True),
        sa.Column("dimension", sa.Integer, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "counters",
        sa.Column("name", sa.String(50), primary_key=True),
        sa.Column("value", sa.Integer, nullable=False),
    )

    if bind.dialect.name == "postgresql":
        # Lexical search: a stored tsvector over heading + text with a GIN index
        # (PostgreSQL manual, 12.2.2 "Creating Indexes").
        op.execute(
            "ALTER TABLE chunks ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
            "(to_tsvector('english', heading || ' ' || text)) STORED"
        )
        op.execute("CREATE INDEX ix_chunks_search_vector ON chunks USING gin (search_vector)")
    else:
        # Lexical search: an FTS5 external-content table kept in step by triggers
        # (SQLite FTS5 documentation, 4.4.3 "External Content Tables").
        op.execute(
            "CREATE VIRTUAL TABLE chunks_fts USING fts5("
            "heading, text, content='chunks', content_rowid='id', tokenize='porter unicode61')"
        )
        op.execute(
            "CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN "
            "INSERT INTO chunks_fts(rowid, heading, text) VALUES (new.id, new.heading, new.text); "
            "END"
        )
        op.execute(
            "CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN "
            "INSERT INTO chunks_fts(chunks_fts, rowid, heading, text) "
            "VALUES ('delete', old.id, old.heading, old.text); END"
        )
        op.execute(
            "CREATE TRIGGER chunks_fts_update AFTER UPDATE ON chunks BEGIN "
            "INSERT INTO chunks_fts(chunks_fts, rowid, heading, text) "
            "VALUES ('delete', old.id, old.heading, old.text); "
            "INSERT INTO chunks_fts(rowid, heading, text) VALUES (new.id, new.heading, new.text); "
            "END"
        )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        for trigger in ("chunks_fts_insert", "chunks_fts_delete", "chunks_fts_update"):
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute("DROP TABLE IF EXISTS chunks_fts")
    for table in (
        "counters",
        "vector_spaces",
        "chunk_embeddings",
        "chunks",
        "document_access",
        "documents",
        "api_tokens",
        "users",
    ):
        op.drop_table(table)
