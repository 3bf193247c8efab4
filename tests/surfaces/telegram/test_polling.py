"""Long polling with a persisted offset: across a restart (or a crash mid-batch) nothing is
lost and nothing answered twice. Against the fake Bot API, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from search2o.surfaces.telegram.pipeline import Outcome, TelegramPipeline
from search2o.surfaces.telegram.polling import Poller
from search2o.surfaces.telegram.surface import bot_api, pipeline, store
from tests.jobs.conftest import wait_until
from tests.surfaces.telegram.conftest import TelegramEnv, TelegramFactory
from tests.surfaces.telegram.fake_telegram import message_update


def poller(env: TelegramEnv, through: Any = None) -> Poller:
    """A new poller over the env's database, as a restarted process builds it."""
    api = bot_api(env.runtime.settings)
    taking = through or pipeline(env.runtime, api)
    return Poller(api, taking, store(env.runtime), "7000001", timeout_s=0)


class CrashAfter(TelegramPipeline):
    """A pipeline whose process dies after taking ``count`` updates."""

    def __init__(self, inner: TelegramPipeline, count: int) -> None:
        super().__init__(inner.settings, inner.store, inner.queue, inner.bot)
        self.count = count

    def take(self, update: dict[str, Any]) -> Outcome:
        if self.count == 0:
            raise SystemExit("the process died")
        self.count -= 1
        return super().take(update)


def push(env: TelegramEnv, first: int, count: int) -> None:
    for n in range(first, first + count):
        env.fake.push(message_update(n, f"question {n}", message_id=n))


def test_polling_across_a_restart_and_a_crash_loses_and_repeats_nothing(
    telegram_env: TelegramFactory,
) -> None:
    env = telegram_env(mode="polling")
    push(env, 100, 3)
    assert poller(env).poll_once() == 3
    assert poller(env).offset() == 103
    push(env, 103, 3)
    doomed = poller(env, CrashAfter(pipeline(env.runtime, bot_api(env.runtime.settings)), 2))
    with pytest.raises(SystemExit):  # took 103 and 104, died before storing the offset
        doomed.poll_once()
    assert poller(env).offset() == 103  # so the batch is served again
    assert poller(env).poll_once() == 3  # after the restart: 103 and 104 again, then 105
    assert env.fake.pending() == [103, 104, 105]  # confirmed on the next call
    assert poller(env).poll_once() == 0
    assert env.fake.pending() == []
    rows = env.settled(6)
    assert sorted(int(r.event_key) for r in rows) == list(range(100, 106))
    for n in range(100, 106):
        replies = [m for m in env.fake.in_chat(501) if m["reply_parameters"]["message_id"] == n]
        assert len(replies) == 1, n


def test_run_deletes_a_webhook_and_stops_when_told(telegram_env: TelegramFactory) -> None:
    env = telegram_env(mode="polling")
    push(env, 200, 1)
    stop = threading.Event()
    worker = poller(env)
    thread = threading.Thread(target=worker.run, args=(stop,))
    thread.start()
    wait_until(lambda: worker.offset() == 201, 20, "the update taken")
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert env.fake.of("deleteWebhook")[0].params == {"drop_pending_updates": False}
