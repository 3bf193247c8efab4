"""The tables of search2o (SQLAlchemy 2 typed declarative models).

Schema changes go through Alembic migrations in :mod:`search2o.storage.migrations`; these models
describe the current head. Backend-specific objects (FTS5 table and triggers on SQLite, the
``tsvector`` column and GIN index on PostgreSQL, per-model HNSW indexes) are created by the
migrations and :mod:`search2o.storage.vectors`, not here.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeEngine

__all__ = [
    "ApiToken",
    "Base",
    "Chunk",
    "ChunkEmbedding",
    "Conversation",
    "ConversationKey",
    "ConversationState",
    "ConversationSummary",
    "Counter",
    "Document",
    "DocumentAccess",
    "EmbeddingVector",
    "Message",
    "RetrievalTrace",
    "StateChange",
    "StateSnapshot",
    "UTCDateTime",
    "User",
    "VectorSpace",
    "new_id",
    "utcnow",
]


def utcnow() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


class EmbeddingVector(TypeDecorator[np.ndarray]):
    """A float32 vector: pgvector's ``vector`` on PostgreSQL, a raw float32 BLOB elsewhere.

    The column has no fixed dimension so several embedding models can coexist during a reindex;
    HNSW indexes are built per model on ``embedding::vector(d)`` (pgvector README, "Can I store
    vectors with different dimensions in the same column?").
    """

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """Use pgvector's type on PostgreSQL, ``BLOB`` elsewhere."""
        if dialect.name == "postgresql":
            from pgvector.sqlalchemy import VECTOR

            return dialect.type_descriptor(VECTOR())
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        """Turn a 1-D array into the backend's wire value."""
        if value is None:
            return None
        array = np.asarray(value, dtype=np.float32)
        if dialect.name == "postgresql":
            return array
        return array.tobytes()

    def process_result_value(self, value: Any, dialect: Dialect) -> np.ndarray | None:
        """Turn the stored value back into a float32 array of shape ``(d,)``."""
        if value is None:
            return None
        if isinstance(value, bytes | memoryview):
            return np.frombuffer(bytes(value), dtype=np.float32)
        return np.asarray(value, dtype=np.float32)


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC timestamp on every backend.

    PostgreSQL keeps ``timestamptz``; SQLite has no time zone type and hands back naive
    values, which are UTC here because every write uses :func:`utcnow`. Reading attaches UTC,
    so the API always sends ``...+00:00``.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Store aware values as UTC."""
        if value is not None and value.tzinfo is not None:
            return value.astimezone(UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach UTC to naive values read back from SQLite."""
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    """Declarative base of every table."""

    type_annotation_map = {dict[str, Any]: JSON, list[str]: JSON, list[dict[str, Any]]: JSON}


class User(Base):
    """An authenticated person: email, groups, plan and admin flag."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(320), unique=True)
    display_name: Mapped[str] = mapped_column(String(200), default="")
    groups: Mapped[list[str]] = mapped_column(JSON, default=list)
    plan: Mapped[str] = mapped_column(String(16), default="free")
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    tokens: Mapped[list[ApiToken]] = relationship(
        back_populates="user", cascade="all, delete-orphan", passive_deletes=True
    )


class ApiToken(Base):
    """An API token, stored only as its SHA-256 hash; ``prefix`` identifies it to people.

    ``local_only`` marks a token printed by a local-mode ``search2o serve``: it authenticates
    only on a server in ``auth_mode=local`` (migration 0009). A token has a user *or* a
    ``surface`` (migration 0012): a surface's service token is no user and acts only for users
    linked on its surface (:mod:`search2o.surfaces.identity`).
    """

    __tablename__ = "api_tokens"
    __table_args__ = (
        CheckConstraint(
            "(user_id IS NULL AND surface IS NOT NULL) "
            "OR (user_id IS NOT NULL AND surface IS NULL)",
            name="ck_api_tokens_owner",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100), default="")
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    local_only: Mapped[bool] = mapped_column(Boolean, default=False)
    surface: Mapped[str | None] = mapped_column(String(32))

    user: Mapped[User | None] = relationship(back_populates="tokens")


class Document(Base):
    """One ingested file, identified by its ``source`` (absolute path or upload name).

    ``is_public`` is true when the access list is empty (everyone may read it).
    """

    __tablename__ = "documents"

    __table_args__ = (Index("ix_documents_source_key", "source_id", "source_key", unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    source: Mapped[str] = mapped_column(String(2000), unique=True)
    # The configured source it came from (null: ingested by hand), its key and cheap version
    # there, and the address that opens it (search2o.storage.source_models, migration 0019).
    source_id: Mapped[int | None] = mapped_column(
        ForeignKey("sources.id", ondelete="SET NULL", name="fk_documents_source_id"),
        nullable=True,
    )
    source_key: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    version: Mapped[str | None] = mapped_column(String(500), nullable=True)
    url: Mapped[str | None] = mapped_column(String(2000), nullable=True)
    title: Mapped[str] = mapped_column(String(500))
    media_type: Mapped[str] = mapped_column(String(100))
    content_hash: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(Integer)
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    is_public: Mapped[bool] = mapped_column(Boolean, default=True, index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    access: Mapped[list[DocumentAccess]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, lazy="selectin"
    )
    chunks: Mapped[list[Chunk]] = relationship(cascade="all, delete-orphan", passive_deletes=True)


class Source(Base):
    """A configured connector: where documents come from, and the state of keeping them in sync.

    ``settings`` holds the connector's settings (never a secret); ``credentials`` is a JSON
    object sealed with a data key of its own, wrapped by the KEK (``kek_id``, ``kek_version``,
    ``wrapped``, as in the other key tables, so ``search2o keys rotate`` re-wraps it).
    ``status`` is ``idle``, ``running``, ``blocked`` (a sync stopped before a mass delete) or
    ``stopped`` (credentials rejected).
    ``lease_holder``/``lease_until`` name the one sync running now (``host:pid:nonce``).
    """

    __tablename__ = "sources"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    credentials: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    kek_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    kek_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    wrapped: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    schedule_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    status: Mapped[str] = mapped_column(String(20), default="idle")
    cursor: Mapped[str | None] = mapped_column(Text, nullable=True)
    checkpoint: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    last_counts: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    last_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    auth_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    lease_holder: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    next_sync_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class DocumentAccess(Base):
    """One entry of a document's access list: ``group:<name>`` or ``user:<email>``."""

    __tablename__ = "document_access"

    document_id: Mapped[int] = mapped_column(
        ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True
    )
    principal: Mapped[str] = mapped_column(String(400), primary_key=True, index=True)


class Chunk(Base):
    """A piece of a document's text under one heading path, sized in embedding tokens."""

    __tablename__ = "chunks"
    __table_args__ = (Index("ix_chunks_document_ordinal", "document_id", "ordinal"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"))
    ordinal: Mapped[int] = mapped_column(Integer)
    heading: Mapped[str] = mapped_column(Text, default="")
    heading_path: Mapped[list[str]] = mapped_column(JSON, default=list)
    text: Mapped[str] = mapped_column(Text)
    token_count: Mapped[int] = mapped_column(Integer)
    # SHA-256 of the text its vector was made from (search2o.knowledge.reuse); null before 0019.
    text_hash: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)


class ChunkEmbedding(Base):
    """The vector of one chunk, tagged with the embedding model that made it."""

    __tablename__ = "chunk_embeddings"

    chunk_id: Mapped[int] = mapped_column(
        ForeignKey("chunks.id", ondelete="CASCADE"), primary_key=True
    )
    model_id: Mapped[str] = mapped_column(String(200), index=True)
    embedding: Mapped[np.ndarray] = mapped_column(EmbeddingVector)


class VectorSpace(Base):
    """An embedding model whose vectors are stored, with their dimension."""

    __tablename__ = "vector_spaces"

    model_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    dimension: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class Counter(Base):
    """A named counter; ``knowledge`` is bumped by every change of chunks or vectors."""

    __tablename__ = "counters"

    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    value: Mapped[int] = mapped_column(Integer, default=0)


def new_id() -> str:
    """Return a random 128-bit id as 32 hex digits (conversation and message ids)."""
    return uuid.uuid4().hex


class Conversation(Base):
    """A durable thread owned by one user, created by its first message."""

    __tablename__ = "conversations"
    __table_args__ = (Index("ix_conversations_user_last_used", "user_id", "last_used_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    title_sealed: Mapped[bytes] = mapped_column(LargeBinary)
    pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    # With state hooks, an agent conversation's transcript lives in the hook's state (0011).
    kept_by_hooks: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    last_used_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    messages: Mapped[list[Message]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="Message.seq"
    )


class Message(Base):
    """One user turn or assistant answer; ``body`` seals ``{"text", "citations"}``.

    A user message sent with a page (``POST /v1/chat`` ``page``) also seals ``"page"``
    (``{"url", "title", "text"}``) in ``body``: the page's text is kept nowhere else.

    ``status`` is ``complete``, ``interrupted`` (the client left; the partial answer is kept)
    or ``failed`` (a model or tool error; the text is what was produced before it).
    ``citations`` is a list of :meth:`search2o.query.citations.Citation.to_dict` values.

    A ``down`` rating may carry ``rating_reasons`` (a list of
    :data:`search2o.query.feedback.REASONS`) and a comment, sealed (kind ``rating_comment``)
    like the body because it is the user's own text (migration 0017).
    """

    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_conversation_seq", "conversation_id", "seq", unique=True),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    conversation_id: Mapped[str] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    body: Mapped[bytes] = mapped_column(LargeBinary)
    agent: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="complete")
    searched: Mapped[bool] = mapped_column(Boolean, default=False)
    rating: Mapped[str | None] = mapped_column(String(8))
    rated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    rating_reasons: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True))
    rating_comment: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)

    trace: Mapped[RetrievalTrace | None] = relationship(
        cascade="all, delete-orphan", passive_deletes=True
    )


class RetrievalTrace(Base):
    """What one answer did: tool calls, queries, hits, what was packed, timings (sealed JSON)."""

    __tablename__ = "retrieval_traces"

    message_id: Mapped[str] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    sealed: Mapped[bytes] = mapped_column(LargeBinary)


class ConversationSummary(Base):
    """The running summary (sealed text) of a conversation's older messages, to ``through_seq``."""

    __tablename__ = "conversation_summaries"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    sealed: Mapped[bytes] = mapped_column(LargeBinary)
    through_seq: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ConversationKey(Base):
    """A conversation's data key, wrapped by version ``kek_version`` of the KEK ``kek_id``."""

    __tablename__ = "conversation_keys"
    __table_args__ = (Index("ix_conversation_keys_kek", "kek_id", "kek_version"),)

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    kek_id: Mapped[str] = mapped_column(String(200))
    kek_version: Mapped[int] = mapped_column(Integer)
    wrapped: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class ConversationState(Base):
    """The head of a conversation's agent state: its version and its snapshot's version.

    The state as of ``snapshot_version`` (0 = none yet) is the :class:`StateSnapshot` row; the
    changes after it are rows of :class:`StateChange`. The head is a few small columns, so the
    compare-and-swap update of every save never rewrites the snapshot (SQLite rewrites a whole
    row on any update).
    """

    __tablename__ = "conversation_states"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, default=0)
    snapshot_version: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class StateSnapshot(Base):
    """The sealed, compacted state of a conversation as of version ``version``."""

    __tablename__ = "state_snapshots"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer)
    sealed: Mapped[bytes] = mapped_column(LargeBinary)


class StateChange(Base):
    """The sealed changes one save appended, as version ``version`` of a conversation's state."""

    __tablename__ = "state_changes"

    conversation_id: Mapped[str] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    sealed: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
