"""Thread → conversation mapping on both backends: owners, first mapping wins, cascades."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from search2o import accounts
from search2o.accounts import Principal
from search2o.errors import ConflictError, InputError, NotFoundError
from search2o.query.settings import RetentionSettings
from search2o.storage.db import Database
from search2o.storage.models import Conversation, utcnow
from search2o.storage.surface_models import SurfaceThread
from search2o.surfaces import identity
from search2o.surfaces.threads import conversation_for_thread, remember_thread


def user(database: Database, email: str) -> Principal:
    with database.session() as session:
        return Principal.of(accounts.create_user(session, email))


def conversation(database: Database, owner: Principal) -> str:
    with database.session() as session:
        row = Conversation(user_id=owner.user_id, title_sealed=b"")
        session.add(row)
        session.flush()
        return row.id


def lookup(database: Database, who: Principal, thread: str = "1700.1") -> str | None:
    with database.session() as session:
        return conversation_for_thread(session, "slack", "T1", "C1", thread, who)


def remember(database: Database, who: Principal, conversation_id: str, **kw: Any) -> Any:
    with database.session() as session:
        return remember_thread(
            session,
            "slack",
            "T1",
            kw.pop("channel", "C1"),
            kw.pop("thread", "1700.1"),
            conversation_id,
            who,
            **kw,
        )


def mapped(database: Database) -> int:
    with database.session() as session:
        return int(session.scalar(select(func.count()).select_from(SurfaceThread)) or 0)


def test_a_thread_continues_the_conversation_its_first_message_started(
    database: Database,
) -> None:
    ann = user(database, "ann@example.com")
    assert lookup(database, ann) is None
    first = conversation(database, ann)
    link = remember(database, ann, first)
    where = (link.surface, link.workspace, link.channel, link.thread)
    assert where == ("slack", "T1", "C1", "1700.1")
    assert (link.conversation_id, link.created) == (first, True)
    assert lookup(database, ann) == first
    assert lookup(database, ann, thread="1700.2") is None
    # remembering again, or a racing second first message, keeps the first mapping
    second = conversation(database, ann)
    again = remember(database, ann, second)
    assert (again.conversation_id, again.created) == (first, False)
    assert lookup(database, ann) == first and mapped(database) == 1


def test_a_thread_is_never_handed_to_another_principal(database: Database) -> None:
    ann = user(database, "ann@example.com")
    bob = user(database, "bob@example.com")
    with database.session() as session:
        channel = identity.shared_principal(session, "slack", "T1")
    theirs = conversation(database, channel)
    remember(database, channel, theirs)
    assert lookup(database, ann) is None  # like an unmapped thread
    mine = conversation(database, ann)
    with pytest.raises(ConflictError, match="another principal's conversation"):
        remember(database, ann, mine)
    # nor may anyone map a thread to a conversation that is not theirs (404, like missing)
    with pytest.raises(NotFoundError) as foreign:
        remember(database, bob, mine, thread="1700.9")
    with pytest.raises(NotFoundError) as missing:
        remember(database, bob, "0" * 32, thread="1700.9")
    assert foreign.value.message == missing.value.message.replace("0" * 32, mine)
    assert lookup(database, channel) == theirs and mapped(database) == 1


def test_a_mapping_goes_with_its_conversation_and_an_expired_one_counts_as_missing(
    database: Database,
) -> None:
    ann = user(database, "ann@example.com")
    first = conversation(database, ann)
    remember(database, ann, first)
    with database.session() as session:
        session.delete(session.get(Conversation, first))
    assert lookup(database, ann) is None and mapped(database) == 0
    old = conversation(database, ann)
    with database.session() as session:
        session.execute(
            update(Conversation)
            .where(Conversation.id == old)
            .values(last_used_at=utcnow() - timedelta(days=30))
        )
    with pytest.raises(NotFoundError):
        remember(database, ann, old, retention=RetentionSettings())
    assert mapped(database) == 0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"channel": "C 1"}, "channel"),
        ({"thread": ""}, "thread"),
        ({"thread": "t/1"}, "thread"),
        ({"conversation_id": "x" * 65}, "conversation_id"),
        ({"conversation_id": "ab\x00"}, "conversation_id"),
    ],
)
def test_bad_names_are_refused_naming_the_field_and_map_nothing(
    database: Database, kwargs: dict[str, Any], field: str
) -> None:
    ann = user(database, "ann@example.com")
    kwargs = dict(kwargs)  # the parameters are shared by both backends' runs
    conversation_id = kwargs.pop("conversation_id", None) or conversation(database, ann)
    with pytest.raises(InputError) as info:
        remember(database, ann, conversation_id, **kwargs)
    assert info.value.field == field
    assert mapped(database) == 0


def test_two_first_messages_at_once_map_the_thread_once(database: Database) -> None:
    ann = user(database, "ann@example.com")
    ids = [conversation(database, ann) for _ in range(4)]
    start = threading.Barrier(4)
    got: list[tuple[str, bool]] = []

    def first_message(conversation_id: str) -> None:
        start.wait()
        link = remember(database, ann, conversation_id)
        got.append((link.conversation_id, link.created))

    workers = [threading.Thread(target=first_message, args=(i,)) for i in ids]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    winners = {c for c, _ in got}
    assert len(got) == 4 and len(winners) == 1
    assert sum(created for _, created in got) == 1
    assert lookup(database, ann) in ids and mapped(database) == 1
