"""Migrations: a blank database reaches head on both backends, with the expected objects."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sqlalchemy import Connection, inspect, text
from sqlalchemy.exc import IntegrityError

from search2o import accounts
from search2o.errors import AuthenticationError, ConfigError
from search2o.storage.db import Database

HEAD = "0019"


def test_blank_database_migrates_to_head_with_expected_columns(database_url: str) -> None:
    db = Database(database_url, migrate=False)
    try:
        assert db.current_revision() is None
        db.upgrade()
        assert db.current_revision() == HEAD
        inspector = inspect(db.engine)
        tables = set(inspector.get_table_names())
        assert {
            "users",
            "api_tokens",
            "documents",
            "document_access",
            "chunks",
            "chunk_embeddings",
            "vector_spaces",
            "counters",
            "conversations",
            "messages",
            "retrieval_traces",
        } <= tables
        chunk_columns = {c["name"] for c in inspector.get_columns("chunks")}
        assert {
            "id",
            "document_id",
            "ordinal",
            "heading",
            "heading_path",
            "text",
            "token_count",
        } <= chunk_columns
        token_columns = {c["name"] for c in inspector.get_columns("api_tokens")}
        assert "token_hash" in token_columns and "token" not in token_columns
        assert "local_only" in token_columns
        assert {"runs", "run_events"} <= tables
        assert {
            "surface_identities",
            "link_codes",
            "surface_shared_principals",
            "surface_threads",
            "surface_deliveries",
            "surface_cursors",
        } <= tables
        assert "slack_deliveries" not in tables  # Slack shares surface_deliveries
        delivery_nullable = {
            c["name"]: c["nullable"] for c in inspector.get_columns("surface_deliveries")
        }
        # a retried answer follows its run instead of asking again
        assert delivery_nullable["run_id"] and delivery_nullable["reply_key"]
        token_nullable = {c["name"]: c["nullable"] for c in inspector.get_columns("api_tokens")}
        assert token_nullable["surface"] and token_nullable["user_id"]  # a user or a surface
        identity_columns = {c["name"] for c in inspector.get_columns("surface_identities")}
        assert {
            "surface",
            "workspace",
            "external_user_id",
            "user_id",
            "linked_by",
            "created_at",
        } <= identity_columns
        code_columns = {c["name"] for c in inspector.get_columns("link_codes")}
        assert {"code_hash", "user_id", "surface", "expires_at", "used_at"} <= code_columns
        assert "code" not in code_columns
        thread_columns = {c["name"] for c in inspector.get_columns("surface_threads")}
        assert {
            "surface",
            "workspace",
            "channel",
            "thread",
            "conversation_id",
            "user_id",
        } <= thread_columns
        run_columns = {c["name"] for c in inspector.get_columns("runs")}
        assert {"user_id", "conversation_id", "status", "heartbeat_at", "last_seq"} <= run_columns
        message_columns = {c["name"] for c in inspector.get_columns("messages")}
        assert {"rating", "rating_reasons", "rating_comment"} <= message_columns
        conversation_columns = {c["name"] for c in inspector.get_columns("conversations")}
        assert "kept_by_hooks" in conversation_columns
        assert {"jobs", "upload_parts"} <= tables
        session_columns = {c["name"] for c in inspector.get_columns("web_sessions")}
        assert {"token_hash", "user_id", "expires_at", "last_seen_at", "revoked_at"} <= (
            session_columns
        )
        grant_columns = {c["name"] for c in inspector.get_columns("signin_grants")}
        assert {"value_hash", "kind", "user_id", "nonce", "code_verifier", "used_at"} <= (
            grant_columns
        )
        assert "token" not in session_columns and "value" not in grant_columns  # hashes only
        with db.engine.connect() as conn:
            if db.backend == "sqlite":
                assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
                assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
                assert "chunks_fts" in tables
            else:
                assert "search_vector" in chunk_columns
                version = conn.execute(
                    text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                ).scalar()
                assert version is not None
        db.upgrade()  # idempotent
        assert db.current_revision() == HEAD
    finally:
        db.close()


def test_a_database_at_0001_upgrades_and_keeps_its_rows(database_url: str) -> None:
    db = Database(database_url, migrate=False)
    try:
        db.upgrade("0001")
        with db.engine.begin() as conn:
            conn.execute(text("INSERT INTO counters (name, value) VALUES ('knowledge', 7)"))
        db.upgrade()
        assert db.current_revision() == HEAD
        with db.engine.connect() as conn:
            assert conn.execute(text("SELECT value FROM counters")).scalar() == 7
            if db.backend == "sqlite":
                assert conn.execute(text("SELECT count(*) FROM chunks_fts_vocab")).scalar() == 0
    finally:
        db.close()


def test_0015_down_drops_the_sign_in_tables_and_keeps_users(database: Database) -> None:
    with database.session() as session:
        accounts.create_user(session, "ann@example.com")
    database.downgrade("0014")
    tables = set(inspect(database.engine).get_table_names())
    assert not {"web_sessions", "signin_grants", "surface_deliveries"} & tables
    assert "surface_threads" in tables
    database.upgrade()
    assert database.current_revision() == HEAD
    with database.session() as session:
        assert [u.email for u in accounts.list_users(session)] == ["ann@example.com"]


def test_0017_down_drops_the_reasons_and_comment_and_keeps_the_ratings(
    database_url: str,
) -> None:
    db = Database(database_url, migrate=False)
    try:
        db.upgrade("0016")
        with db.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO users (email, display_name, groups, plan, is_admin, created_at) "
                    "VALUES ('ann@example.com', 'ann', '[]', 'free', false, CURRENT_TIMESTAMP)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO conversations (id, user_id, title_sealed, pinned, message_count,"
                    " kept_by_hooks, created_at, last_used_at) SELECT 'c1', id, :t, false, 1,"
                    " false, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM users"
                ),
                {"t": b"x"},
            )
            conn.execute(
                text(
                    "INSERT INTO messages (id, conversation_id, seq, role, body, status, searched,"
                    " rating, rated_at, created_at) VALUES ('m1', 'c1', 0, 'assistant', :b,"
                    " 'complete', false, 'down', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"b": b"x"},
            )
        db.upgrade()
        with db.engine.connect() as conn:
            row = conn.execute(
                text("SELECT rating, rating_reasons, rating_comment FROM messages")
            ).one()
        assert tuple(row) == ("down", None, None)  # an old rating has no reasons or comment
        with db.engine.begin() as conn:
            conn.execute(
                text("UPDATE messages SET rating_reasons = :r, rating_comment = :c"),
                {"r": '["outdated"]', "c": b"sealed"},
            )
        db.downgrade("0016")
        columns = {c["name"] for c in inspect(db.engine).get_columns("messages")}
        assert "rating" in columns and not {"rating_reasons", "rating_comment"} & columns
        with db.engine.connect() as conn:
            assert conn.execute(text("SELECT rating FROM messages")).scalar_one() == "down"
        db.upgrade()
        assert db.current_revision() == HEAD
    finally:
        db.close()


def test_downgrade_then_upgrade_round_trips(database: Database) -> None:
    database.downgrade("base")
    assert database.current_revision() is None
    assert "chunks" not in inspect(database.engine).get_table_names()
    database.upgrade()
    assert database.current_revision() == HEAD


@pytest.mark.parametrize(
    ("url", "needle"),
    [("mysql://u@h/db", "mysql"), ("not a url", "not a valid")],
)
def test_unsupported_or_malformed_url_is_a_config_error(url: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        Database(url)


def test_a_new_sqlite_database_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    db = Database(f"sqlite:///{folder / 'search2o.db'}")
    try:
        with db.session() as session:
            session.execute(text("SELECT 1"))
        for path in (folder, *folder.iterdir()):
            assert path.stat().st_mode & 0o077 == 0, path
    finally:
        db.close()


def _insert_token(conn: Connection, user_id: int, name: str, digest: str) -> None:
    conn.execute(
        text(
            "INSERT INTO api_tokens (user_id, name, prefix, token_hash, created_at) "
            "VALUES (:u, :n, :p, :h, CURRENT_TIMESTAMP)"
        ),
        {"u": user_id, "n": name, "p": digest[:12], "h": digest},
    )


def test_0009_scopes_the_tokens_earlier_local_mode_starts_printed(database_url: str) -> None:
    """Tokens named ``serve`` were printed by local-mode starts: they become local-only."""
    db = Database(database_url, migrate=False)
    try:
        db.upgrade("0008")
        with db.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO users (email, display_name, groups, plan, is_admin, created_at) "
                    "VALUES ('local@localhost', 'local', '[]', 'paid', true, CURRENT_TIMESTAMP)"
                )
            )
            user_id = conn.execute(text("SELECT id FROM users")).scalar_one()
            _insert_token(conn, user_id, "serve", hashlib.sha256(b"s2o_serve").hexdigest())
            _insert_token(conn, user_id, "laptop", hashlib.sha256(b"s2o_laptop").hexdigest())
        db.upgrade()
        assert db.current_revision() == HEAD
        with db.session() as session, pytest.raises(AuthenticationError):
            accounts.authenticate(session, "s2o_serve", auth_mode="token")
        with db.session() as session:
            assert accounts.authenticate(session, "s2o_serve", auth_mode="local").is_admin
            assert accounts.authenticate(session, "s2o_laptop", auth_mode="token").is_admin
            scopes = {t.name: t.local_only for t in accounts.list_tokens(session)}
        assert scopes == {"serve": True, "laptop": False}
        # Below 0009 nothing tells the scope apart: the local-only token is revoked.
        db.downgrade("0008")
        with db.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT name, revoked_at IS NOT NULL FROM api_tokens ORDER BY name")
            ).all()
        assert [tuple(r) for r in rows] == [("laptop", False), ("serve", True)]
        assert "local_only" not in {c["name"] for c in inspect(db.engine).get_columns("api_tokens")}
    finally:
        db.close()


def test_0014_keeps_user_tokens_and_drops_surface_tokens_on_the_way_down(
    database_url: str,
) -> None:
    """Surface tokens need a nullable owner; below 0014 they cannot exist."""
    db = Database(database_url, migrate=False)
    try:
        db.upgrade("0013")
        with db.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO users (email, display_name, groups, plan, is_admin, created_at) "
                    "VALUES ('ann@example.com', 'ann', '[]', 'free', false, CURRENT_TIMESTAMP)"
                )
            )
            user_id = conn.execute(text("SELECT id FROM users")).scalar_one()
            _insert_token(conn, user_id, "laptop", hashlib.sha256(b"s2o_laptop").hexdigest())
        db.upgrade()
        with db.session() as session:
            assert accounts.authenticate(session, "s2o_laptop").email == "ann@example.com"
            surface = accounts.issue_surface_token(session, "slack")
        with db.session() as session:
            assert accounts.resolve_token(session, surface) == accounts.SurfaceCaller("slack")
        # the rebuilt table still refuses a second token with the same hash, and a token
        # with neither a user nor a surface
        digest = hashlib.sha256(b"s2o_laptop").hexdigest()
        with pytest.raises(IntegrityError), db.engine.begin() as conn:
            _insert_token(conn, user_id, "copy", digest)
        with pytest.raises(IntegrityError), db.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO api_tokens (name, prefix, token_hash, created_at, local_only) "
                    "VALUES ('orphan', 'x', 'y', CURRENT_TIMESTAMP, false)"
                )
            )
        db.downgrade("0013")
        with db.engine.connect() as conn:
            names = conn.execute(text("SELECT name FROM api_tokens")).scalars().all()
        assert names == ["laptop"]
        columns = {c["name"]: c["nullable"] for c in inspect(db.engine).get_columns("api_tokens")}
        assert "surface" not in columns and columns["user_id"] is False
        assert "surface_identities" not in inspect(db.engine).get_table_names()
        db.upgrade()
        assert db.current_revision() == HEAD
    finally:
        db.close()


def _pg_row_storage(conn: Connection) -> tuple[dict[str, list[str] | None], int | None]:
    """Return each table's storage options and the lexeme statistics target of chunks."""
    options = {
        table: conn.execute(
            text("SELECT reloptions FROM pg_class WHERE oid = CAST(:t AS regclass)"), {"t": table}
        ).scalar_one()
        for table in ("chunks", "memories")
    }
    target = conn.execute(
        text(
            "SELECT attstattarget FROM pg_attribute WHERE attrelid = 'chunks'::regclass "
            "AND attname = 'search_vector'"
        )
    ).scalar_one()
    return options, target


def test_0018_keeps_postgresql_rows_inline_and_goes_back_to_the_defaults(
    database: Database,
) -> None:
    if database.engine.dialect.name != "postgresql":
        database.downgrade("0017")  # SQLite: nothing to change, both ways
        database.upgrade()
        assert database.current_revision() == HEAD
        return
    with database.engine.connect() as conn:
        options, target = _pg_row_storage(conn)
    inline = ["toast_tuple_target=8160"]
    assert options == {"chunks": inline, "memories": inline}
    assert target == 1000
    database.downgrade("0017")
    with database.engine.connect() as conn:
        options, target = _pg_row_storage(conn)
    assert options == {"chunks": None, "memories": None}
    assert target in (None, -1)  # PostgreSQL 17 shows the default as NULL, earlier ones as -1
    database.upgrade()
    assert database.current_revision() == HEAD


def test_0019_adds_sources_and_tags_and_goes_down_keeping_the_documents(
    database: Database,
) -> None:
    inspector = inspect(database.engine)
    assert {"name", "kind", "settings", "credentials", "lease_holder", "checkpoint"} <= {
        c["name"] for c in inspector.get_columns("sources")
    }
    assert {"source_id", "source_key", "version", "url"} <= {
        c["name"] for c in inspector.get_columns("documents")
    }
    assert "text_hash" in {c["name"] for c in inspector.get_columns("chunks")}
    with database.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO sources (name, kind, settings, status, auth_failures, created_at,"
                " updated_at) VALUES ('wiki', 'folder', '{}', 'idle', 0, CURRENT_TIMESTAMP,"
                " CURRENT_TIMESTAMP)"
            )
        )
        source_id = conn.execute(text("SELECT id FROM sources")).scalar_one()
        for key in ("a.md", "b.md"):
            conn.execute(
                text(
                    "INSERT INTO documents (source, title, media_type, content_hash, size_bytes,"
                    " chunk_count, is_public, created_at, updated_at, source_id, source_key)"
                    " VALUES (:s, 't', 'text/markdown', 'h', 1, 0, true, CURRENT_TIMESTAMP,"
                    " CURRENT_TIMESTAMP, :id, :key)"
                ),
                {"s": f"wiki:{key}", "id": source_id, "key": key},
            )
    with pytest.raises(IntegrityError), database.engine.begin() as conn:  # one per (source, key)
        conn.execute(
            text(
                "INSERT INTO documents (source, title, media_type, content_hash, size_bytes,"
                " chunk_count, is_public, created_at, updated_at, source_id, source_key)"
                " VALUES ('other', 't', 'text/markdown', 'h', 1, 0, true, CURRENT_TIMESTAMP,"
                " CURRENT_TIMESTAMP, :id, 'a.md')"
            ),
            {"id": source_id},
        )
    database.downgrade("0018")
    inspector = inspect(database.engine)
    assert "sources" not in inspector.get_table_names()
    assert "source_id" not in {c["name"] for c in inspector.get_columns("documents")}
    with database.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM documents")).scalar_one() == 2
    database.upgrade()
    assert database.current_revision() == HEAD
