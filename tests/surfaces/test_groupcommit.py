"""Group commit of the messengers' acknowledgements (search2o.surfaces.groupcommit).

A burst's questions share transactions, each is recorded once with one job, every caller gets
its own outcome, and a bad question fails only its own caller. The first transaction is held
open until the rest of the burst waits, so the batches are known exactly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from search2o.errors import ConfigError, InputError, StorageError
from search2o.jobs import JobContext, JobQueue, JobRegistry
from search2o.runtime import Runtime
from search2o.storage.db import Database
from search2o.storage.delivery_models import SurfaceDelivery
from search2o.surfaces.answering import Outcome
from search2o.surfaces.deliveries import DeliveryStore, Inbound
from search2o.surfaces.groupcommit import GroupCommit
from tests.surfaces.test_deliveries import QUESTION

KIND = "test.answer"


def question(n: int) -> Inbound:
    return replace(QUESTION, event_key=str(900 + n), message_key=str(10 + n))


@pytest.fixture
def answered() -> list[int]:
    return []


@pytest.fixture
def queue(runtime: Runtime, tmp_path: Path, answered: list[int]) -> Iterator[JobQueue]:
    def answer(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        answered.append(int(payload["delivery"]))
        return {}

    registry = JobRegistry()
    registry.add(KIND, answer)
    with JobQueue(runtime.settings.jobs, runtime.database, registry, data_dir=tmp_path) as q:
        yield q


@pytest.fixture
def store(runtime: Runtime) -> DeliveryStore:
    return DeliveryStore(runtime.database, runtime.key_provider, {"telegram": frozenset()})


class Hold:
    """Holds the first ``record_many`` call (its transaction open) until released."""

    def __init__(self, store: DeliveryStore, fail: Inbound | None = None) -> None:
        self._record_many = store.record_many
        self._released = threading.Event()
        self.entered = False
        self.fail = fail
        store.record_many = self  # type: ignore[method-assign]

    def __call__(self, inbounds: Sequence[Inbound], session: Any = None) -> list[tuple[int, bool]]:
        if not self.entered:
            self.entered = True
            assert self._released.wait(10)
        if self.fail in inbounds:
            raise StorageError("the database refused this one question")
        return self._record_many(inbounds, session)

    def release(self) -> None:
        self._released.set()


def burst(taker: GroupCommit, inbounds: list[Inbound], hold: Hold) -> list[Outcome | BaseException]:
    """Take ``inbounds`` from as many threads; the first write waits in ``hold``."""
    results: list[Outcome | BaseException] = [RuntimeError("not taken")] * len(inbounds)

    def take(i: int) -> None:
        try:
            results[i] = taker.take(inbounds[i])
        except Exception as exc:
            results[i] = exc

    first = threading.Thread(target=take, args=(0,))
    first.start()
    deadline = time.monotonic() + 10
    while not hold.entered:  # the first transaction is open
        assert time.monotonic() < deadline, "the first question was never written"
        time.sleep(0.005)
    others = [threading.Thread(target=take, args=(i,)) for i in range(1, len(inbounds))]
    for t in others:
        t.start()
    while len(taker._pending) < len(others):  # every other caller waits for the next commit
        assert time.monotonic() < deadline, f"{len(taker._pending)} of {len(others)} waiting"
        time.sleep(0.005)
    hold.release()
    for t in [first, *others]:
        t.join(30)
    return results


def test_a_burst_shares_one_commit_and_each_question_is_taken_once(
    store: DeliveryStore, queue: JobQueue, runtime: Runtime, answered: list[int]
) -> None:
    taker = GroupCommit(store, queue, KIND)
    distinct = [question(n) for n in range(40)]
    # ten of them again, as a retry (same event) and as the same message under a second event
    again = [question(n) for n in range(5)] + [
        replace(question(n), event_key=f"x{n}") for n in range(5, 10)
    ]
    results = burst(taker, distinct + again, Hold(store))
    assert all(isinstance(r, Outcome) for r in results), results
    outcomes = [r for r in results if isinstance(r, Outcome)]
    assert [o.status for o in outcomes[:40]] == ["answered"] * 40
    assert [o.status for o in outcomes[40:]] == ["duplicate"] * 10
    assert [o.delivery for o in outcomes[40:]] == [o.delivery for o in outcomes[:10]]
    assert len({o.delivery for o in outcomes}) == 40
    # the first question alone, the other 49 waiting meanwhile in one transaction
    assert (taker.batches, taker.questions) == (2, 50)
    with runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(SurfaceDelivery)) == 40
    ids = sorted(o.delivery or 0 for o in outcomes[:40])
    jobs = queue.list_jobs(kind=KIND, limit=100)
    assert sorted(j.payload["delivery"] for j in jobs) == ids
    # each job's message went to the transport after the commit: the consumer runs all 40
    queue.start_consumer(workers=2)
    deadline = time.monotonic() + 30
    while len(answered) < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    taker.close()
    assert sorted(answered) == ids
    # after close, a question is still taken and its job's message still sent
    late = taker.take(question(99))
    assert late.status == "answered"
    while late.delivery not in answered and time.monotonic() < deadline + 30:
        time.sleep(0.05)
    assert late.delivery in answered


def test_one_bad_question_fails_only_its_own_caller(
    store: DeliveryStore, queue: JobQueue, runtime: Runtime
) -> None:
    taker = GroupCommit(store, queue, KIND)
    inbounds = [question(n) for n in range(8)]
    results = burst(taker, inbounds, Hold(store, fail=inbounds[5]))
    assert isinstance(results[5], StorageError)
    taken = [r for i, r in enumerate(results) if i != 5]
    assert all(isinstance(r, Outcome) and r.status == "answered" for r in taken), results
    with runtime.database.session() as session:
        rows = session.scalars(select(SurfaceDelivery.event_key)).all()
    assert sorted(rows) == sorted(q.event_key for i, q in enumerate(inbounds) if i != 5)
    assert len(queue.list_jobs(kind=KIND)) == 7
    taker.close()


def test_a_refused_kind_records_nothing(
    store: DeliveryStore, runtime: Runtime, tmp_path: Path
) -> None:
    with (
        JobQueue(runtime.settings.jobs, runtime.database, JobRegistry(), data_dir=tmp_path) as q,
        pytest.raises(InputError) as refused,
    ):
        GroupCommit(store, q, KIND).take(question(1))
    assert refused.value.field == "kind"
    with runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(SurfaceDelivery)) == 0


def test_store_and_queue_must_share_a_database(
    store: DeliveryStore, runtime: Runtime, tmp_path: Path
) -> None:
    other = Database(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        with JobQueue(runtime.settings.jobs, other, JobRegistry(), data_dir=tmp_path) as q:
            with pytest.raises(ConfigError, match="share one database"):
                GroupCommit(store, q, KIND)
            with pytest.raises(ValueError, match="max_batch"):
                GroupCommit(DeliveryStore(other, runtime.key_provider, {}), q, KIND, max_batch=0)
    finally:
        other.close()
