"""The conformance suite of state stores: the contract every backend and every hook must keep.

Each ``check_*`` is a plain function taking a :data:`StoreFactory` (a zero-argument callable
returning a fresh :class:`ConformanceTarget`: the store, and how to make users and
conversations for it). It returns nothing on success and raises :class:`ConformanceError`
(an ``AssertionError``) saying what broke. We run them under pytest over our
:class:`~search2o.state.store.DatabaseStateStore` (SQLite and PostgreSQL) and over an HTTP
hook; an enterprise runs them against its own hook::

    search2o state conformance --url https://hooks.example.com/state --secret "$SECRET"

which calls :func:`run_checks` with :func:`~.conformance_http.http_hook_target` plus the
wire-level :func:`~.conformance_http.run_http_checks` (signatures and malformed requests,
:mod:`search2o.state.conformance_http`) and prints a pass/fail table. From
pytest::

    @pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
    def test_my_hook(check):
        check(http_hook_target(URL, SECRET))

The checks write to fresh conversations only (random ids and ``@example.invalid`` emails
when run by the CLI), so they can run against a staging hook; they do not clean up after
themselves beyond deleting what the delete check deletes.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from search2o.accounts import Principal
from search2o.errors import ConflictError, InputError, NotFoundError
from search2o.state.changes import StateChanges, apply
from search2o.state.contract import StateStore
from search2o.state.model import ConversationState
from search2o.state.records import Pause, RunRecord

__all__ = [
    "CHECKS",
    "CheckResult",
    "ConformanceError",
    "ConformanceTarget",
    "StoreFactory",
    "check_bad_versions_are_refused",
    "check_concurrent_first_saves_one_wins",
    "check_concurrent_saves_one_wins",
    "check_delete_is_final",
    "check_many_saves_replay_in_order",
    "check_new_conversation_has_no_state",
    "check_other_user_is_refused",
    "check_round_trip",
    "check_stale_version_is_a_conflict",
    "check_values_that_are_not_json_are_refused",
    "run_checks",
    "sample_changes",
]


class ConformanceError(AssertionError):
    """A store broke the contract; the message says which rule and what happened."""


@dataclass
class ConformanceTarget:
    """What a check needs: a store and a way to make users and conversations for it.

    Attributes:
        store: the store under test.
        new_user: returns a new user (a fresh email).
        new_conversation: returns the id of a new conversation owned by the given user.
        cleanup: called after the store is closed (e.g. to close a database).

    """

    store: StateStore
    new_user: Callable[[], Principal]
    new_conversation: Callable[[Principal], str]
    cleanup: Callable[[], None] | None = None

    def close(self) -> None:
        """Close the store, then run ``cleanup``."""
        try:
            self.store.close()
        finally:
            if self.cleanup is not None:
                self.cleanup()

    def __enter__(self) -> ConformanceTarget:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


StoreFactory = Callable[[], ConformanceTarget]
"""Returns a fresh :class:`ConformanceTarget` for one check."""


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: its name, whether it passed, why not, and how long it took."""

    name: str
    passed: bool
    detail: str
    seconds: float


# --- helpers ------------------------------------------------------------------------------


def _ensure(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceError(message)


def _expect_error(
    kinds: type[Exception] | tuple[type[Exception], ...], call: Callable[[], Any], what: str
) -> Exception:
    names = " or ".join(k.__name__ for k in kinds) if isinstance(kinds, tuple) else kinds.__name__
    try:
        call()
    except kinds as exc:
        return exc
    except Exception as exc:
        raise ConformanceError(
            f"{what}: expected {names}, got {type(exc).__name__}: {exc}"
        ) from exc
    raise ConformanceError(f"{what}: expected {names}, but it succeeded")


def _canonical(state: ConversationState) -> dict[str, Any]:
    data = state.to_json()
    data["prompts"] = sorted(
        data["prompts"], key=lambda p: (p["scope"], p["agent"] or "", p["name"])
    )
    return data


def _first_difference(got: Any, want: Any, path: str = "state") -> str:
    if isinstance(got, dict) and isinstance(want, dict):
        for key in sorted(set(got) | set(want)):
            if key not in got:
                return f"{path}.{key} is missing"
            if key not in want:
                return f"{path}.{key} should not be there"
            if got[key] != want[key]:
                return _first_difference(got[key], want[key], f"{path}.{key}")
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            return f"{path} has {len(got)} items, expected {len(want)}"
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{i}]")
    return f"{path} is {json.dumps(got)[:200]}, expected {json.dumps(want)[:200]}"


def _restored(
    target: ConformanceTarget, conversation: str, user: Principal, what: str
) -> tuple[ConversationState, int]:
    restored = target.store.restore(conversation, user)
    _ensure(restored is not None, f"{what}: restore returned None after a save")
    assert restored is not None
    state, version = restored
    _ensure(
        isinstance(version, int) and not isinstance(version, bool) and version >= 1,
        f"{what}: restore returned version {version!r}; expected an integer >= 1",
    )
    return state, version


def _expect_state(
    target: ConformanceTarget,
    conversation: str,
    user: Principal,
    want: ConversationState,
    version: int,
    what: str,
) -> None:
    state, got_version = _restored(target, conversation, user, what)
    _ensure(got_version == version, f"{what}: restore gave version {got_version}, not {version}")
    got, expected = _canonical(state), _canonical(want)
    _ensure(got == expected, f"{what}: restored state differs: {_first_difference(got, expected)}")


def _gone(target: ConformanceTarget, conversation: str, user: Principal, what: str) -> None:
    """Restore answers ``None`` or ``NotFoundError`` (both mean: nothing for this caller)."""
    try:
        restored = target.store.restore(conversation, user)
    except NotFoundError:
        return
    _ensure(restored is None, f"{what}: restore returned a state; expected None or NotFoundError")


def sample_changes(tag: str, n: int = 1) -> StateChanges:
    """Return changes touching every part of the state (runs, both prompt scopes, variables).

    Values include non-ASCII text, quotes, newlines, nested lists and objects, floats,
    booleans and nulls, so a store that mangles JSON shows it.
    """
    changes = StateChanges()
    changes.record_run(
        RunRecord(
            run_id=f"run-{tag}",
            agent="triage",
            status="paused",
            inputs={"ticket": n, "text": 'Grüße 🌍 "quoted"\nline two'},
            pause=Pause("main", [2, "then", 0], "Which team?", {"into": "team"}),
            started_at="2025-01-01T00:00:00+00:00",
        )
    )
    changes.append_prompt(
        "conversation",
        "chat",
        [
            {"role": "user", "content": f"turn {tag}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"call-{tag}", "name": "search", "arguments": {"q": tag}}],
            },
            {"role": "tool", "content": "result", "tool_call_id": f"call-{tag}", "name": "search"},
        ],
        system="You are helpful.",
    )
    changes.append_prompt(
        "agent", "notes", [{"role": "assistant", "content": f"note {tag}"}], agent="triage"
    )
    changes.set_conv("counter", n)
    changes.set_conv("nested", {"list": [1, 2.5, True, None, "x"], "deep": {"a": {"b": [{}]}}})
    changes.set_agent("triage", "seen", [tag])
    # The transcript a store keeps when it holds the whole conversation (state hooks).
    for role, text in (("user", f"Book a flight {tag}"), ("assistant", "Which airline? [1]")):
        changes.add_message(
            {
                "id": f"m-{tag}-{role}",
                "role": role,
                "text": text,
                "citations": [{"number": 1, "title": "Travel", "source": "travel.md"}]
                if role == "assistant"
                else [],
                "status": "complete",
                "agent": "triage",
                "searched": role == "assistant",
                "created_at": "2025-01-01T00:00:00+00:00",
            }
        )
    return changes


def _follow_up(tag: str) -> StateChanges:
    """Return the changes of a second run: complete a run, append, delete and set variables."""
    changes = StateChanges()
    changes.record_run(
        RunRecord(
            run_id="run-1",
            agent="triage",
            status="completed",
            inputs={"ticket": 1, "text": 'Grüße 🌍 "quoted"\nline two'},
            output={"team": "billing", "score": 0.75},
            started_at="2025-01-01T00:00:00+00:00",
            finished_at="2025-01-01T00:01:00+00:00",
        )
    )
    changes.record_run(RunRecord(run_id=f"run-{tag}", agent="writer", status="completed"))
    changes.append_prompt("conversation", "chat", [{"role": "user", "content": "and then?"}])
    changes.delete_conv("nested")
    changes.set_conv("counter", 2)
    changes.set_agent("writer", "draft", "Dear customer, ...")
    changes.delete_agent("triage", "seen")
    return changes


def _save(
    target: ConformanceTarget,
    conversation: str,
    user: Principal,
    changes: StateChanges,
    expected: int,
    base: ConversationState,
    what: str,
) -> int:
    version = target.store.save(conversation, user, changes, expected, base=base)
    _ensure(
        isinstance(version, int) and not isinstance(version, bool) and version > expected,
        f"{what}: save returned version {version!r}; expected an integer > {expected}",
    )
    return version


def _race(
    target: ConformanceTarget,
    conversation: str,
    user: Principal,
    base: ConversationState,
    expected: int,
    writers: int,
    what: str,
) -> None:
    """Let ``writers`` threads save at once from ``expected``; exactly one must win."""
    barrier = threading.Barrier(writers)
    outcomes: list[tuple[int, Any]] = []
    lock = threading.Lock()

    def write(i: int) -> None:
        changes = sample_changes(f"racer-{i}", 100 + i)
        barrier.wait()
        try:
            outcome: Any = target.store.save(conversation, user, changes, expected, base=base)
        except Exception as exc:
            outcome = exc
        with lock:
            outcomes.append((i, outcome))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    _ensure(len(outcomes) == writers, f"{what}: a save did not finish within 120 s")
    wins = [(i, o) for i, o in outcomes if isinstance(o, int) and not isinstance(o, bool)]
    losses = [o for _, o in outcomes if isinstance(o, ConflictError)]
    others = [o for _, o in outcomes if not isinstance(o, int | ConflictError)]
    _ensure(
        not others,
        f"{what}: a concurrent save failed with "
        + ", ".join(f"{type(o).__name__}: {o}" for o in others),
    )
    _ensure(
        len(wins) == 1 and len(losses) == writers - 1,
        f"{what}: {len(wins)} of {writers} concurrent saves from version {expected} succeeded; "
        "exactly one must, the others must get ConflictError",
    )
    winner, version = wins[0]
    want = apply(base, sample_changes(f"racer-{winner}", 100 + winner))
    _expect_state(target, conversation, user, want, version, f"{what} (winner's state)")


# --- the checks ---------------------------------------------------------------------------


def check_new_conversation_has_no_state(factory: StoreFactory) -> None:
    """Check that a conversation nobody saved into restores as ``None``."""
    with factory() as target:
        user = target.new_user()
        conversation = target.new_conversation(user)
        restored = target.store.restore(conversation, user)
        _ensure(restored is None, f"restore of a new conversation returned {restored!r}")


def check_round_trip(factory: StoreFactory) -> None:
    """Check that what is saved is restored exactly, version by version."""
    with factory() as target:
        user = target.new_user()
        conversation = target.new_conversation(user)
        first = sample_changes("1")
        v1 = _save(target, conversation, user, first, 0, ConversationState(), "first save")
        state1 = apply(ConversationState(), first)
        _expect_state(target, conversation, user, state1, v1, "after the first save")
        second = _follow_up("2")
        v2 = _save(target, conversation, user, second, v1, state1, "second save")
        _expect_state(target, conversation, user, apply(state1, second), v2, "after the second")


def check_stale_version_is_a_conflict(factory: StoreFactory) -> None:
    """Check that a save from another version than the stored one is a conflict."""
    with factory() as target:
        user = target.new_user()
        conversation = target.new_conversation(user)
        first = sample_changes("1")
        v1 = _save(target, conversation, user, first, 0, ConversationState(), "first save")
        state1 = apply(ConversationState(), first)
        for stale in (0, v1 + 1, v1 + 50):
            _expect_error(
                ConflictError,
                functools.partial(
                    target.store.save, conversation, user, _follow_up("x"), stale, base=state1
                ),
                f"save from version {stale} while the state is at {v1}",
            )
        _expect_state(target, conversation, user, state1, v1, "after the refused saves")


def check_concurrent_saves_one_wins(factory: StoreFactory) -> None:
    """Check that of four follow-ups saving from one version at once, exactly one wins."""
    with factory() as target:
        user = target.new_user()
        conversation = target.new_conversation(user)
        first = sample_changes("1")
        v1 = _save(target, conversation, user, first, 0, ConversationState(), "first save")
        _race(
            target,
            conversation,
            user,
            apply(ConversationState(), first),
            v1,
            4,
            "concurrent follow-ups",
        )


def check_concurrent_first_saves_one_wins(factory: StoreFactory) -> None:
    """Check that of two first saves (version 0) at once, exactly one wins."""
    with factory() as target:
        user = target.new_user()
        conversation = target.new_conversation(user)
        _race(target, conversation, user, ConversationState(), 0, 2, "concurrent first saves")


def check_other_user_is_refused(factory: StoreFactory) -> None:
    """Check that another user cannot read, save into or delete someone's state."""
    with factory() as target:
        owner, other = target.new_user(), target.new_user()
        conversation = target.new_conversation(owner)
        first = sample_changes("1")
        v1 = _save(target, conversation, owner, first, 0, ConversationState(), "owner's save")
        state1 = apply(ConversationState(), first)
        _gone(target, conversation, other, "another user's restore")
        for expected, base in ((v1, state1), (0, ConversationState())):
            _expect_error(
                NotFoundError,
                functools.partial(
                    target.store.save, conversation, other, _follow_up("x"), expected, base=base
                ),
                f"another user's save from version {expected}",
            )
        _expect_error(
            NotFoundError,
            lambda: target.store.delete(conversation, other),
            "another user's delete",
        )
        _expect_state(target, conversation, owner, state1, v1, "owner's state afterwards")


def check_delete_is_final(factory: StoreFactory) -> None:
    """Check that after delete the state is gone and no save brings it back."""
    with factory() as target:
        user = target.new_user()
        conversation = target.new_conversation(user)
        first = sample_changes("1")
        v1 = _save(target, conversation, user, first, 0, ConversationState(), "first save")
        state1 = apply(ConversationState(), first)
        target.store.delete(conversation, user)
        _gone(target, conversation, user, "restore after delete")
        for expected, base in ((v1, state1), (0, ConversationState())):
            _expect_error(
                NotFoundError,
                functools.partial(
                    target.store.save, conversation, user, _follow_up("late"), expected, base=base
                ),
                f"save from version {expected} after delete",
            )
        _gone(target, conversation, user, "restore after the refused saves")


def check_values_that_are_not_json_are_refused(factory: StoreFactory) -> None:
    """Check that non-JSON values fail the save with InputError naming the variable."""
    with factory() as target:
        user = target.new_user()
        conversation = target.new_conversation(user)
        first = sample_changes("1")
        v1 = _save(target, conversation, user, first, 0, ConversationState(), "first save")
        state1 = apply(ConversationState(), first)
        bad_conv = _follow_up("x")
        bad_conv.set_conv("tags", {"a", "b"})
        bad_agent = _follow_up("x")
        bad_agent.set_agent("triage", "ratio", float("nan"))
        bad_run = _follow_up("x")
        bad_run.record_run(RunRecord(run_id="r", agent="a", status="completed", output=object()))
        for changes, field in (
            (bad_conv, "conv.tags"),
            (bad_agent, "agent.ratio"),
            (bad_run, "runs[r].output"),
        ):
            error = _expect_error(
                InputError,
                functools.partial(target.store.save, conversation, user, changes, v1, base=state1),
                f"save with a non-JSON {field}",
            )
            assert isinstance(error, InputError)
            _ensure(
                error.field == field and error.reason.startswith("is not JSON-serialisable"),
                f"save with a non-JSON {field}: the error names {error.field!r} "
                f"({error.reason!r}); expected {field!r} and 'is not JSON-serialisable: ...'",
            )
        _expect_state(target, conversation, user, state1, v1, "after the refused saves")


def check_bad_versions_are_refused(factory: StoreFactory) -> None:
    """Check that bad versions are InputError and malformed ids are not found."""
    with factory() as target:
        user = target.new_user()
        conversation = target.new_conversation(user)
        for bad in (-1, True, "1", 1.0, None):
            error = _expect_error(
                InputError,
                functools.partial(
                    target.store.save,
                    conversation,
                    user,
                    sample_changes("1"),
                    bad,  # type: ignore[arg-type]
                    base=ConversationState(),
                ),
                f"save with expected_version={bad!r}",
            )
            assert isinstance(error, InputError)
            _ensure(
                error.field == "expected_version",
                f"save with expected_version={bad!r}: the error names {error.field!r}",
            )
        for bad_id in ("../../etc/passwd", "", "X" * 32, conversation.upper()):
            _gone(target, bad_id, user, f"restore of malformed id {bad_id!r}")
        _ensure(
            target.store.restore(conversation, user) is None,
            "the refused saves left a state behind",
        )


def check_many_saves_replay_in_order(factory: StoreFactory) -> None:
    """Check that after forty saves every appended entry is kept once, in order."""
    with factory() as target:
        user = target.new_user()
        conversation = target.new_conversation(user)
        state, version = ConversationState(), 0
        for n in range(40):
            changes = StateChanges()
            changes.append_prompt("conversation", "chat", [{"role": "user", "content": str(n)}])
            changes.set_conv("last", n)
            version = _save(target, conversation, user, changes, version, state, f"save {n}")
            state = apply(state, changes)
        _expect_state(target, conversation, user, state, version, "after forty saves")


CHECKS: tuple[Callable[[StoreFactory], None], ...] = (
    check_new_conversation_has_no_state,
    check_round_trip,
    check_stale_version_is_a_conflict,
    check_concurrent_saves_one_wins,
    check_concurrent_first_saves_one_wins,
    check_other_user_is_refused,
    check_delete_is_final,
    check_values_that_are_not_json_are_refused,
    check_bad_versions_are_refused,
    check_many_saves_replay_in_order,
)
"""Every store-level check, in the order the CLI runs them."""


def run_checks(
    factory: StoreFactory, checks: Sequence[Callable[[StoreFactory], None]] = CHECKS
) -> list[CheckResult]:
    """Run ``checks`` against ``factory``; never raises for a failing check.

    Returns:
        One :class:`CheckResult` per check; ``detail`` is the failure (or unexpected error).

    """
    results = []
    for check in checks:
        results.append(_timed(check.__name__, functools.partial(check, factory)))
    return results


def _timed(name: str, call: Callable[[], None]) -> CheckResult:
    start = time.perf_counter()
    try:
        call()
    except ConformanceError as exc:
        return CheckResult(name, False, str(exc), time.perf_counter() - start)
    except Exception as exc:
        detail = f"unexpected {type(exc).__name__}: {exc}"
        return CheckResult(name, False, detail, time.perf_counter() - start)
    return CheckResult(name, True, "", time.perf_counter() - start)
