"""A user's delete reaches the state store (and an enterprise hook); expiry never calls it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import update

from search2o.accounts import Principal
from search2o.config import Settings
from search2o.errors import HookError, NotFoundError
from search2o.query.retention import sweep
from search2o.runtime import Runtime
from search2o.state import StateChanges
from search2o.state.settings import StateSettings
from search2o.storage.models import Conversation, utcnow
from tests.query.doubles import ScriptedChatModel, answering
from tests.state.conftest import add_user, state_rows
from tests.state.hook_server import HookServer


@contextmanager
def _runtime(settings: Settings, hook: HookServer | None = None) -> Iterator[Runtime]:
    if hook is not None:
        state = StateSettings(hooks=hook.url, hook_secret=hook.secret, hook_timeout_s=2)
        settings = settings.model_copy(update={"state": state})
    runtime = Runtime(settings, chat_model=ScriptedChatModel(answering("Noted.")))
    try:
        yield runtime
    finally:
        runtime.close()


def _conversation_with_state(runtime: Runtime, me: Principal | None = None) -> str:
    me = me or runtime.local_principal()
    conversation_id = str(runtime.turns.ask(me, "remember this")[0].data["conversation_id"])
    changes = StateChanges()
    changes.set_conv("topic", "vacation")
    runtime.state_store.save(conversation_id, me, changes, 0)
    return conversation_id


def test_deleting_a_conversation_deletes_its_state_with_us(settings: Settings) -> None:
    with _runtime(settings) as runtime:
        conversation_id = _conversation_with_state(runtime)
        assert state_rows(runtime, conversation_id)[1] == 1
        runtime.conversations.delete(runtime.local_principal(), conversation_id)
        assert state_rows(runtime, conversation_id) == (0, 0)
        with pytest.raises(NotFoundError):
            runtime.state_store.save(conversation_id, runtime.local_principal(), StateChanges(), 1)


def test_a_users_delete_calls_the_hook_and_a_failing_hook_deletes_nothing(
    settings: Settings, hook_server: HookServer
) -> None:
    with _runtime(settings, hook_server) as runtime:
        me = runtime.local_principal()
        conversation_id = _conversation_with_state(runtime)
        assert conversation_id in hook_server.hook.records
        hook_server.faults["delete"] = "500"
        with pytest.raises(HookError):
            runtime.conversations.delete(me, conversation_id)
        assert runtime.conversations.get(me, conversation_id).message_count == 2
        assert conversation_id in hook_server.hook.records
        hook_server.faults.clear()
        runtime.conversations.delete(me, conversation_id)
        assert conversation_id in hook_server.hook.tombstones
        with pytest.raises(NotFoundError):
            runtime.conversations.get(me, conversation_id)


def test_expiry_removes_the_entry_without_calling_the_hook(
    settings: Settings, hook_server: HookServer
) -> None:
    with _runtime(settings, hook_server) as runtime:
        free = add_user(runtime, "free@example.com")  # the local user is on the paid plan
        conversation_id = _conversation_with_state(runtime, free)
        with runtime.database.session() as session:
            session.execute(
                update(Conversation)
                .where(Conversation.id == conversation_id)
                .values(last_used_at=utcnow() - timedelta(days=8))
            )
        assert runtime.conversations.list_conversations(free) == []
        calls = list(hook_server.requests)
        assert sweep(runtime.database, runtime.vault, runtime.settings.retention).deleted == 1
        assert hook_server.requests == calls  # no delete_conversation on expiry
        assert conversation_id in hook_server.hook.records
