"""Our encrypted state store on SQLite and PostgreSQL: compare-and-swap saves in the caller's
transaction, ownership, deletes that stay deleted, compaction, and sealing."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from sqlalchemy import func, select, text

from search2o.errors import ConflictError, InputError, IntegrityCheckError, NotFoundError
from search2o.runtime import Runtime
from search2o.state import ConversationState, DatabaseStateStore, StateChanges, apply
from search2o.state.conformance import sample_changes
from search2o.storage.models import (
    Conversation,
    ConversationKey,
    Message,
    StateChange,
    StateSnapshot,
)
from tests.state.conftest import add_user, delete_conversation, new_conversation, state_rows


def appended(n: int, size: int = 10) -> StateChanges:
    changes = StateChanges()
    changes.append_prompt("conversation", "chat", [{"role": "user", "content": f"{n:0{size}d}"}])
    changes.set_conv("last", n)
    return changes


def history(state: ConversationState) -> list[str]:
    prompt = state.prompt("conversation", "chat")
    return [] if prompt is None else [e["content"] for e in prompt.history]


def test_saves_count_versions_and_restore_replays_them(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    assert store.restore(cid, me) is None

    first = sample_changes("1")
    assert store.save(cid, me, first, 0) == 1
    assert store.restore(cid, me) == (apply(ConversationState(), first), 1)
    assert store.save(cid, me, appended(2), 1) == 2
    restored = store.restore(cid, me)
    assert restored is not None and restored[1] == 2
    assert history(restored[0])[-1] == "0000000002"
    assert state_rows(state_runtime, cid) == (1, 2)


def test_nothing_of_the_state_is_stored_in_plain(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    changes = StateChanges()
    changes.set_conv("secret", "PLAINTEXT-MARKER-4711")
    changes.append_prompt("conversation", "chat", [{"role": "user", "content": "MARKER-TURN"}])
    store.save(cid, me, changes, 0)
    store.save(cid, me, appended(2), 1)
    store.compact(cid)
    store.save(cid, me, changes, 2)
    with state_runtime.database.session() as session:
        blobs = [bytes(b) for b in session.scalars(select(StateChange.sealed))]
        blobs += [bytes(b) for b in session.scalars(select(StateSnapshot.sealed)) if b]
    assert len(blobs) == 2
    for blob in blobs:
        assert b"MARKER" not in blob and b"secret" not in blob and b"chat" not in blob


def test_a_run_that_fails_after_partial_changes_leaves_the_state_exactly_as_before(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    store.save(cid, me, sample_changes("1"), 0)
    before = store.restore(cid, me)

    # The run saved its state and wrote a message in one transaction, then failed.
    with (
        pytest.raises(RuntimeError, match="the model failed"),
        state_runtime.database.session() as session,
    ):
        assert store.save(cid, me, appended(2), 1, session=session) == 2
        session.add(Message(conversation_id=cid, seq=1, role="assistant", body=b"x"))
        session.flush()
        raise RuntimeError("the model failed")

    assert store.restore(cid, me) == before
    assert state_rows(state_runtime, cid) == (1, 1)
    with state_runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(Message)) == 0

    # A run whose state holds a value that is not JSON fails its save; nothing is written.
    bad = appended(3)
    bad.set_conv("handle", threading.Lock())
    with pytest.raises(InputError) as caught:
        store.save(cid, me, bad, 1)
    assert caught.value.field == "conv.handle"
    assert caught.value.reason.startswith("is not JSON-serialisable: ")
    assert store.restore(cid, me) == before
    # The next follow-up continues from the version before the failures.
    assert store.save(cid, me, appended(4), 1) == 2


def test_double_follow_up_race_gives_one_success_and_one_conflict(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    for round_ in range(4):
        cid = new_conversation(state_runtime, me)
        base = apply(ConversationState(), sample_changes("0"))
        store.save(cid, me, sample_changes("0"), 0)
        barrier = threading.Barrier(2)
        outcomes: dict[int, Any] = {}

        def follow_up(
            i: int,
            cid: str = cid,
            barrier: threading.Barrier = barrier,
            outcomes: dict[int, Any] = outcomes,
        ) -> None:
            barrier.wait()
            try:
                with state_runtime.database.session() as session:
                    version = store.save(cid, me, appended(i), 1, session=session)
                    # The run's other writes share the transaction.
                    session.add(
                        Message(conversation_id=cid, seq=version, role="assistant", body=b"x")
                    )
                outcomes[i] = version
            except ConflictError as exc:
                outcomes[i] = exc

        threads = [threading.Thread(target=follow_up, args=(i,)) for i in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)

        winners = [i for i, o in outcomes.items() if o == 2]
        losers = [i for i, o in outcomes.items() if isinstance(o, ConflictError)]
        assert len(winners) == 1 and len(losers) == 1, (round_, outcomes)
        assert "changed meanwhile" in str(outcomes[losers[0]])
        assert "send your message again" in str(outcomes[losers[0]])
        want = (apply(base, appended(winners[0])), 2)
        assert store.restore(cid, me) == want  # the winner's follow-up...
        assert store.restore(cid, me) == want  # ...is what both now see
        with state_runtime.database.session() as session:
            seqs = session.scalars(select(Message.seq).where(Message.conversation_id == cid))
            assert list(seqs) == [2]  # the loser's message went with its transaction


def test_another_users_conversation_is_answered_like_a_missing_one(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    owner, other = add_user(state_runtime), add_user(state_runtime)
    cid = new_conversation(state_runtime, owner)
    store.save(cid, owner, sample_changes("1"), 0)
    missing = "0" * 32
    for conversation in (cid, missing, "not-an-id"):
        calls = (
            lambda c=conversation: store.restore(c, other),
            lambda c=conversation: store.save(c, other, appended(1), 1),
            lambda c=conversation: store.save(c, other, appended(1), 0),
            lambda c=conversation: store.delete(c, other),
        )
        for call in calls:
            with pytest.raises(NotFoundError) as caught:
                call()
            assert str(caught.value) == f"conversation {conversation!r} not found"
    restored = store.restore(cid, owner)
    assert restored is not None and restored[1] == 1


def test_a_deleted_conversation_never_comes_back(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    store.save(cid, me, sample_changes("1"), 0)
    restored = store.restore(cid, me)
    assert restored is not None
    # A run restored version 1, then the user deleted the conversation.
    delete_conversation(state_runtime, store, me, cid)
    for expected in (1, 0):
        with pytest.raises(NotFoundError):
            store.save(cid, me, appended(2), expected)
    with pytest.raises(NotFoundError):
        store.restore(cid, me)
    assert state_rows(state_runtime, cid) == (0, 0)
    with state_runtime.database.session() as session:
        assert session.get(Conversation, cid) is None
        assert session.get(ConversationKey, cid) is None


def test_a_delete_racing_with_a_save_in_flight_leaves_nothing(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    """The save's transaction is open when the delete starts: the delete waits, then wins."""
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    store.save(cid, me, sample_changes("1"), 0)
    saved, go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def run_in_flight() -> None:
        try:
            with state_runtime.database.session() as session:
                store.save(cid, me, appended(2), 1, session=session)
                saved.set()
                go.wait(10)
        except BaseException as exc:
            errors.append(exc)
            saved.set()

    def user_deletes() -> None:
        try:
            delete_conversation(state_runtime, store, me, cid)
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=run_in_flight)
    runner.start()
    assert saved.wait(10)
    deleter = threading.Thread(target=user_deletes)
    deleter.start()
    time.sleep(0.3)  # the delete is now waiting for the run's transaction
    go.set()
    runner.join(30)
    deleter.join(30)
    assert errors == []
    assert state_rows(state_runtime, cid) == (0, 0)
    with pytest.raises(NotFoundError):
        store.save(cid, me, appended(3), 2)
    assert state_rows(state_runtime, cid) == (0, 0)


def test_a_save_racing_with_a_delete_in_progress_is_not_found(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    """The delete's transaction is open when the save starts: the save waits, then fails."""
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    store.save(cid, me, sample_changes("1"), 0)
    deleting, go = threading.Event(), threading.Event()
    outcome: list[BaseException | int] = []

    def user_deletes() -> None:
        with state_runtime.database.session() as session:
            store.delete(cid, me, session=session)
            session.execute(text("DELETE FROM conversations WHERE id = :c"), {"c": cid})
            deleting.set()
            go.wait(10)

    def run_in_flight() -> None:
        try:
            outcome.append(store.save(cid, me, appended(2), 1))
        except BaseException as exc:
            outcome.append(exc)

    deleter = threading.Thread(target=user_deletes)
    deleter.start()
    assert deleting.wait(10)
    runner = threading.Thread(target=run_in_flight)
    runner.start()
    time.sleep(0.3)
    go.set()
    deleter.join(30)
    runner.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], NotFoundError), outcome
    assert state_rows(state_runtime, cid) == (0, 0)


def test_deleting_only_the_state_leaves_a_tombstone_that_refuses_saves(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    store.save(cid, me, sample_changes("1"), 0)
    store.delete(cid, me)
    assert store.restore(cid, me) is None
    for expected in (0, 1):
        with pytest.raises(NotFoundError):
            store.save(cid, me, appended(2), expected)
    assert state_rows(state_runtime, cid) == (1, 0)
    assert store.compact(cid) == 0


def test_compaction_folds_changes_into_a_snapshot_and_changes_nothing_visible(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    version = 0
    for n in range(10):
        version = store.save(cid, me, appended(n), version)
    before = store.restore(cid, me)
    assert store.pending_changes(cid) == 10
    assert store.compact(cid) == 10
    assert store.compact(cid) == 0
    assert store.pending_changes(cid) == 0
    assert state_rows(state_runtime, cid) == (1, 0)
    assert store.restore(cid, me) == before
    for n in range(10, 13):
        version = store.save(cid, me, appended(n), version)
    restored = store.restore(cid, me)
    assert restored is not None and restored[1] == 13
    assert history(restored[0]) == [f"{n:010d}" for n in range(13)]
    assert store.compact(cid) == 3
    assert store.restore(cid, me) == restored


def test_background_compaction_keeps_the_pending_changes_bounded(
    state_runtime: Runtime,
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    with DatabaseStateStore(state_runtime.database, state_runtime.vault, 4) as store:
        version = 0
        for n in range(30):
            version = store.save(cid, me, appended(n), version)
            store.drain(30)
            assert store.pending_changes(cid) <= 5
        restored = store.restore(cid, me)
    assert restored is not None and restored[1] == 30
    assert history(restored[0]) == [f"{n:010d}" for n in range(30)]
    assert state_rows(state_runtime, cid)[1] <= 5


def test_compaction_is_safe_against_concurrent_saves_and_restores(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    stop = threading.Event()
    problems: list[str] = []

    def compactor() -> None:
        while not stop.is_set():
            try:
                store.compact(cid)
            except Exception as exc:
                problems.append(f"compact: {exc!r}")

    def reader() -> None:
        while not stop.is_set():
            try:
                restored = store.restore(cid, me)
            except Exception as exc:
                problems.append(f"restore: {exc!r}")
                continue
            if restored is not None and len(history(restored[0])) != restored[1]:
                problems.append(f"restore saw {len(history(restored[0]))} at v{restored[1]}")

    helpers = [threading.Thread(target=compactor), threading.Thread(target=reader)]
    for helper in helpers:
        helper.start()
    try:
        version = 0
        for n in range(40):
            version = store.save(cid, me, appended(n), version)
    finally:
        stop.set()
        for helper in helpers:
            helper.join(30)
    assert problems == []
    restored = store.restore(cid, me)
    assert restored is not None and restored[1] == 40
    assert history(restored[0]) == [f"{n:010d}" for n in range(40)]


def test_storage_grows_with_what_runs_add_not_with_the_turn_count_squared(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    version = 0
    for n in range(60):
        version = store.save(cid, me, appended(n, size=200), version)
    with state_runtime.database.session() as session:
        sizes = [
            len(bytes(b))
            for b in session.scalars(
                select(StateChange.sealed)
                .where(StateChange.conversation_id == cid)
                .order_by(StateChange.version)
            )
        ]
    assert len(sizes) == 60
    assert max(sizes) - min(sizes) <= 4  # each save stores only what it added
    store.compact(cid)
    with state_runtime.database.session() as session:
        snapshot = session.scalar(
            select(StateSnapshot.sealed).where(StateSnapshot.conversation_id == cid)
        )
    assert snapshot is not None and len(bytes(snapshot)) < 60 * max(sizes)


def test_altered_or_moved_rows_do_not_open(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    other_cid = new_conversation(state_runtime, me)
    store.save(cid, me, appended(1), 0)
    store.save(cid, me, appended(2), 1)
    store.save(other_cid, me, appended(1), 0)
    with state_runtime.database.session() as session:
        one, two = (bytes(session.get_one(StateChange, (cid, v)).sealed) for v in (1, 2))
        # Swap two versions of one conversation: each opens, but claims the other version.
        session.get_one(StateChange, (cid, 1)).sealed = two
        session.get_one(StateChange, (cid, 2)).sealed = one
        # Move a change into another conversation: it does not open there at all.
        session.get_one(StateChange, (other_cid, 1)).sealed = one
    with pytest.raises(IntegrityCheckError, match="another version"):
        store.restore(cid, me)
    with pytest.raises(IntegrityCheckError):
        store.restore(other_cid, me)


def test_bad_expected_versions_are_input_errors(
    state_runtime: Runtime, store: DatabaseStateStore
) -> None:
    me = add_user(state_runtime)
    cid = new_conversation(state_runtime, me)
    for bad in (-1, True, "0", 0.0, 2**31, 2**70):
        with pytest.raises(InputError) as caught:
            store.save(cid, me, appended(1), bad)  # type: ignore[arg-type]
        assert caught.value.field == "expected_version"
    assert state_rows(state_runtime, cid) == (0, 0)
