"""Retention: expiry by plan after the last use (read or turn), pinning, the sweeper."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from search2o.accounts import Principal, create_user
from search2o.config import Settings
from search2o.errors import ConfigError, NotFoundError
from search2o.query.retention import sweep
from search2o.query.settings import RetentionSettings
from search2o.runtime import Runtime
from search2o.storage.models import Conversation, ConversationKey, Message, utcnow
from tests.conftest import MemoEmbedder
from tests.query.doubles import ScriptedChatModel, answering, open_runtime
from tests.test_cli import Cli, out


def _user(runtime: Runtime, email: str, plan: str) -> Principal:
    with runtime.database.session() as session:
        user = create_user(session, email, plan=plan)
        session.flush()
        return Principal.of(user)


@pytest.fixture
def runtime(settings: Settings, embedder: MemoEmbedder) -> Iterator[Runtime]:
    """A runtime whose chat model answers "Noted." to everything."""
    with open_runtime(settings, embedder, model=ScriptedChatModel(answering("Noted."))) as rt:
        yield rt


def _start(runtime: Runtime, who: Principal, text: str) -> str:
    return str(runtime.turns.ask(who, text)[0].data["conversation_id"])


def _age(runtime: Runtime, conversation_id: str, days: float) -> None:
    """Pretend the conversation was last used ``days`` ago."""
    with runtime.database.session() as session:
        session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(last_used_at=utcnow() - timedelta(days=days))
        )


def _rows(runtime: Runtime, conversation_id: str) -> tuple[int, int, int]:
    with runtime.database.session() as session:
        return tuple(  # type: ignore[return-value]
            int(session.scalar(select(func.count()).select_from(t).where(c == conversation_id)))
            for t, c in (
                (Conversation, Conversation.id),
                (Message, Message.conversation_id),
                (ConversationKey, ConversationKey.conversation_id),
            )
        )


def test_an_expired_conversation_is_missing_on_every_path(runtime: Runtime) -> None:
    ann = _user(runtime, "ann@example.com", "free")
    old = _start(runtime, ann, "old question")
    fresh = _start(runtime, ann, "fresh question")
    answer_id = runtime.conversations.messages(ann, old)[1].id
    _age(runtime, old, 7.01)
    conversations = runtime.conversations
    assert [c.id for c in conversations.list_conversations(ann)] == [fresh]
    assert conversations.count(ann) == 1
    assert conversations.latest(ann) is not None and conversations.latest(ann).id == fresh  # type: ignore[union-attr]
    missing = f"conversation {old!r} not found"
    for call in (
        lambda: conversations.get(ann, old),
        lambda: conversations.messages(ann, old),
        lambda: conversations.update(ann, old, pinned=True),
        lambda: conversations.delete(ann, old),
        lambda: runtime.turns.prepare(ann, "follow-up", old),
    ):
        with pytest.raises(NotFoundError) as info:
            call()
        assert str(info.value) == missing
    with pytest.raises(NotFoundError):
        conversations.rate(ann, answer_id, "up")
    assert _rows(runtime, old) == (1, 2, 1)  # filtered at read time; the sweeper removes it


def test_reading_counts_as_a_use_and_pinned_or_paid_never_expire(runtime: Runtime) -> None:
    ann = _user(runtime, "ann@example.com", "free")
    pat = _user(runtime, "pat@example.com", "paid")
    read = _start(runtime, ann, "read me")
    pinned = _start(runtime, ann, "pin me")
    paid = _start(runtime, pat, "paid forever")
    runtime.conversations.update(ann, pinned, pinned=True)
    _age(runtime, read, 6.9)
    runtime.conversations.messages(ann, read)  # opening it is a use ...
    _age(runtime, pinned, 400)
    _age(runtime, paid, 400)
    with runtime.database.session() as session:
        row = session.get(Conversation, read)
        assert row is not None and utcnow() - row.last_used_at < timedelta(minutes=1)
    assert {c.id for c in runtime.conversations.list_conversations(ann)} == {read, pinned}
    assert runtime.conversations.get(pat, paid).title == "paid forever"


def test_the_sweeper_deletes_expired_conversations_with_everything_under_them(
    runtime: Runtime,
) -> None:
    ann = _user(runtime, "ann@example.com", "free")
    pat = _user(runtime, "pat@example.com", "paid")
    expired = [_start(runtime, ann, f"old {i}") for i in range(3)]
    kept = [_start(runtime, ann, "new"), _start(runtime, ann, "pinned"), _start(runtime, pat, "p")]
    runtime.conversations.update(ann, kept[1], pinned=True)
    for conversation_id in [*expired, kept[1], kept[2]]:
        _age(runtime, conversation_id, 30)
    report = sweep(runtime.database, runtime.vault, runtime.settings.retention)
    assert (report.deleted, report.by_plan) == (3, {"free": 3})
    for conversation_id in expired:
        assert _rows(runtime, conversation_id) == (0, 0, 0)
    for conversation_id in kept:
        assert _rows(runtime, conversation_id) == (1, 2, 1)
    assert sweep(runtime.database, runtime.vault, runtime.settings.retention).deleted == 0

    # a shorter paid retention reaches the paid conversation too
    paid_days = RetentionSettings(days={"free": 7, "paid": 10})
    assert sweep(runtime.database, runtime.vault, paid_days).by_plan == {"free": 0, "paid": 1}


def test_retention_sweep_from_the_command_line(tmp_path: Path, database_url: str) -> None:
    cli = Cli(tmp_path / "data", database_url)
    result = out(cli.ok("retention", "sweep", "--json"))
    assert json.loads(result) == {"deleted": 0, "by_plan": {"free": 0}, "sessions": 0, "grants": 0}
    assert "deleted 0 expired conversations" in out(cli.ok("retention", "sweep"))


def test_bad_retention_settings_name_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from search2o.config import load_settings

    monkeypatch.setenv("SEARCH2O_RETENTION__DAYS", '{"free": 0}')
    with pytest.raises(ConfigError, match=r"retention\.days"):
        load_settings()


def test_unpinning_an_old_conversation_counts_as_a_use(runtime: Runtime) -> None:
    ann = _user(runtime, "ann@example.com", "free")
    conversation_id = _start(runtime, ann, "pinned long ago")
    runtime.conversations.update(ann, conversation_id, pinned=True)
    _age(runtime, conversation_id, 30)
    unpinned = runtime.conversations.update(ann, conversation_id, pinned=False)
    assert utcnow() - unpinned.last_used_at < timedelta(minutes=1)
    assert sweep(runtime.database, runtime.vault, runtime.settings.retention).deleted == 0


def test_the_local_user_is_on_the_paid_plan(runtime: Runtime) -> None:
    assert runtime.local_principal().plan == "paid"


def test_retention_plans_are_checked_and_defaults_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from search2o.config import load_settings

    monkeypatch.setenv("SEARCH2O_RETENTION__DAYS", '{"enterprise": 3}')
    with pytest.raises(ConfigError, match="unknown plan 'enterprise'"):
        load_settings()
    monkeypatch.setenv("SEARCH2O_RETENTION__DAYS", '{"free": 30}')
    assert load_settings().retention.days == {"free": 30, "paid": None}


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def test_the_sweep_deletes_ended_sessions_and_spent_sign_in_grants(runtime: Runtime) -> None:
    from search2o import signin
    from search2o.storage.signin_models import SigninGrant, WebSession

    settings = runtime.settings.web
    with runtime.database.session() as session:
        user = create_user(session, "ann@example.com")
        live, expired, signed_out = (
            signin.start_session(session, user, "link", settings) for _ in range(3)
        )
        signin.end_session(session, signed_out)
        signin.begin_oidc(session)  # first: starting one clears spent grants itself
        used = signin.issue_login_link(session, "ann@example.com", 5).value
        signin.redeem_login_link(session, used)
        stale = signin.issue_login_link(session, "ann@example.com", 5).value
        waiting = signin.issue_login_link(session, "ann@example.com", 5).value
        past = utcnow() - timedelta(minutes=1)
        for table, column, value in (
            (WebSession, WebSession.token_hash, expired),
            (SigninGrant, SigninGrant.value_hash, stale),
        ):
            session.execute(update(table).where(column == _sha256(value)).values(expires_at=past))
        session.execute(
            update(SigninGrant).where(SigninGrant.kind == "oidc").values(expires_at=past)
        )
    report = sweep(runtime.database, runtime.vault, runtime.settings.retention)
    assert (report.sessions, report.grants) == (2, 3)
    with runtime.database.session() as session:
        hashes = set(session.scalars(select(WebSession.token_hash)))
        assert hashes == {_sha256(live)}
        assert signin.peek_login_link(session, waiting)[0] == "ann@example.com"
        assert session.scalar(select(func.count()).select_from(SigninGrant)) == 1
        assert signin.resolve_session(session, live, settings).email == "ann@example.com"
    again = sweep(runtime.database, runtime.vault, runtime.settings.retention)
    assert (again.sessions, again.grants) == (0, 0)
