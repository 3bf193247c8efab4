"""A process killed mid-answer (SIGKILL) never leaves a transcript ending on an unanswered
question: the next sweep marks its run interrupted and stores what it had written — also when
it died right after storing the question, before its run recorded a first event."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from search2o.config import Settings
from search2o.runtime import Runtime
from search2o.storage.models import utcnow
from search2o.storage.run_models import Run
from tests.conftest import MemoEmbedder

ROOT = Path(__file__).resolve().parents[2]


def _writer(settings: Settings, stage: str) -> subprocess.Popen[str]:
    """Start ``tests/chat/orphan_writer.py`` at ``stage`` on the test's data and database."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "HF_HUB_OFFLINE": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("SEARCH2O_")}
    command = [sys.executable, "-m", "tests.chat.orphan_writer", str(settings.data_dir)]
    return subprocess.Popen(
        [*command, settings.resolved_database_url, stage],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


def _kill(writer: subprocess.Popen[str]) -> None:
    """Kill ``writer`` the way the OOM killer would (SIGKILL) and wait for it to end."""
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)


def _reap(writer: subprocess.Popen[str]) -> None:
    """Make sure ``writer`` has ended and its pipe is closed, whatever the test did."""
    if writer.poll() is None:
        writer.kill()
    if writer.stdout is not None:
        writer.stdout.close()


def _kill_after_asking(settings: Settings, stage: str) -> None:
    """Kill a ``turn`` or ``agent`` writer once its model is called (SIGKILL).

    The question is stored then and the run has recorded nothing (no event, no heartbeat):
    the process dies between storing the question and the run's first batch.
    """
    writer = _writer(settings, stage)
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().split() == ["asked"]
        _kill(writer)
    finally:
        _reap(writer)


def test_a_killed_writer_leaves_an_interrupted_answer_with_its_text(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    writer = _writer(settings, "answer")
    try:
        assert writer.stdout is not None
        line = writer.stdout.readline().split()
        assert line[0] == "started", line
        conversation_id, run_id = line[1], line[2]
        # Let it record a few more batches, then kill it the way the OOM killer would.
        runs = settings.runs.model_copy(update={"stale_s": 0.5, "heartbeat_s": 0.1})
        runtime = Runtime(settings.model_copy(update={"runs": runs}), embedder=embedder)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with runtime.database.session() as session:
                recorded = session.scalar(select(Run.last_seq).where(Run.id == run_id)) or 0
            if recorded >= 9:  # the conversation event and 8 deltas
                break
            time.sleep(0.05)
        _kill(writer)
    finally:
        _reap(writer)
    try:
        principal = runtime.local_principal()
        assert runtime.chat.runs.info(principal, run_id).status == "running"
        # While the heartbeat is fresh nothing happens; once it is stale, the sweep interrupts.
        assert runtime.chat.runs.sweep(now=utcnow() - timedelta(seconds=10)).interrupted == 0
        assert runtime.chat.runs.sweep(now=utcnow() + timedelta(seconds=5)).interrupted == 1
        assert runtime.chat.runs.info(principal, run_id).status == "interrupted"
        messages = runtime.conversations.messages(principal, conversation_id)
        assert [m.role for m in messages] == ["user", "assistant"]
        answer = messages[1]
        assert answer.status == "interrupted"
        words = answer.text.split()
        assert len(words) >= 8 and words == [f"word{i}" for i in range(len(words))]

        # A client following the run gets what was recorded, then an error saying why it ended.
        async def follow() -> list:
            return [e async for _, e in runtime.chat.follow(principal, run_id)]

        events = asyncio.run(follow())
        assert events[0].kind == "conversation" and events[-1].kind == "error"
        assert events[-1].data["error"] == "RunInterrupted"
        assert "".join(e.data["text"] for e in events if e.kind == "delta") == answer.text
        # A second sweep changes nothing: one answer, never two.
        assert runtime.chat.runs.sweep(now=utcnow() + timedelta(seconds=5)).interrupted == 0
        assert len(runtime.conversations.messages(principal, conversation_id)) == 2
    finally:
        runtime.close()


@pytest.mark.parametrize("stage", ["turn", "agent"])
def test_a_writer_killed_before_its_first_event_still_answers_the_question(
    settings: Settings, embedder: MemoEmbedder, stage: str
) -> None:
    _kill_after_asking(settings, stage)
    runtime = Runtime(settings, embedder=embedder)
    try:
        principal = runtime.local_principal()
        with runtime.database.session() as session:
            run = session.scalars(select(Run)).one()
            assert (run.status, run.last_seq) == ("running", 0)
        (conversation,) = runtime.conversations.list_conversations(principal)
        assert runtime.chat.runs.sweep(now=utcnow() + timedelta(hours=1)).interrupted == 1
        messages = runtime.conversations.messages(principal, conversation.id)
        assert [(m.role, m.status, m.text) for m in messages] == [
            ("user", "complete", "Anyone?"),
            ("assistant", "interrupted", ""),
        ]
        # The conversation goes on: a chat turn follows the interrupted answer.
        follow_up = runtime.chat.prepare(principal, "Again?", conversation.id)
        events = list(runtime.chat.run_sync(follow_up))
        assert events[-1].kind == "done", events[-1]
        roles = [m.role for m in runtime.conversations.messages(principal, conversation.id)]
        assert roles == ["user", "assistant", "user", "assistant"]
    finally:
        runtime.close()


def test_a_follow_up_comes_after_the_interrupted_answer_of_a_dead_run(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    # This process has answered before (its start-up sweep is behind it) when another one
    # dies right after storing a question; the user asks again once that run is stale.
    runs = settings.runs.model_copy(update={"stale_s": 0.5, "heartbeat_s": 0.1})
    runtime = Runtime(settings.model_copy(update={"runs": runs}), embedder=embedder)
    try:
        principal = runtime.local_principal()
        assert list(runtime.chat.run_sync(runtime.chat.prepare(principal, "Hello")))
        _kill_after_asking(settings, "turn")
        time.sleep(1.0)  # twice stale_s: the dead run is stale, no periodic sweep has run
        (orphaned,) = [
            c for c in runtime.conversations.list_conversations(principal) if c.title == "Anyone?"
        ]
        follow_up = runtime.chat.prepare(principal, "Still there?", orphaned.id)
        assert list(runtime.chat.run_sync(follow_up))[-1].kind == "done"
        messages = runtime.conversations.messages(principal, orphaned.id)
        assert [(m.role, m.status, m.text) for m in messages][:3] == [
            ("user", "complete", "Anyone?"),
            ("assistant", "interrupted", ""),
            ("user", "complete", "Still there?"),
        ]
        assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    finally:
        runtime.close()


def test_a_writer_dead_after_storing_its_answer_leaves_no_second_answer(runtime: Runtime) -> None:
    # The turn runs to its end and stores its answer, but nothing finishes the run: its
    # process died before recording the last events (the state kill -9 leaves there).
    principal = runtime.local_principal()
    runs = runtime.chat.runs
    run_id = runs.create(principal)
    turn = runtime.turns.prepare(principal, "Where do bikes go?")
    note = functools.partial(runs.note_stored, run_id)

    async def answer() -> list:
        return [e async for e in runtime.turns.run(turn, None, note)]

    events = asyncio.run(answer())
    assert events[-1].kind == "done", events[-1]
    assert runs.info(principal, run_id).status == "running"
    assert runs.sweep(now=utcnow() + timedelta(seconds=60)).interrupted == 1
    assert runs.info(principal, run_id).status == "interrupted"
    messages = runtime.conversations.messages(principal, events[0].data["conversation_id"])
    roles = [(m.role, m.status) for m in messages]
    assert roles == [("user", "complete"), ("assistant", "complete")]
    assert messages[1].text == events[-1].data["text"]
