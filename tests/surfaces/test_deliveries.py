"""The surface-neutral delivery store on SQLite and PostgreSQL: dedupe, sealing, cursors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text

from search2o.errors import InputError
from search2o.jobs import JobContext, JobQueue, JobRegistry
from search2o.runtime import Runtime
from search2o.storage.delivery_models import SurfaceDelivery
from search2o.surfaces.answering import take_question
from search2o.surfaces.deliveries import DeliveryStore, Inbound

QUESTION = Inbound(
    surface="telegram",
    workspace="7000001",
    channel="-1001",
    channel_type="supergroup",
    user="501",
    message_key="10",
    event_key="900",
    thread_key="main",
    text="What is the secret salary band?",
)


@pytest.fixture
def store(runtime: Runtime) -> DeliveryStore:
    return DeliveryStore(
        runtime.database, runtime.key_provider, {"telegram": frozenset({"private"})}
    )


def test_a_question_is_recorded_once_by_event_or_by_message(store: DeliveryStore) -> None:
    first, new = store.record(QUESTION)
    assert new
    assert store.record(QUESTION) == (first, False)
    assert store.record(replace(QUESTION, event_key="901")) == (first, False)  # same message
    assert store.record(replace(QUESTION, message_key="11")) == (first, False)  # same event
    other, new = store.record(replace(QUESTION, event_key="902", message_key="12"))
    assert new and other != first
    # another surface has its own keys
    mattermost = replace(QUESTION, surface="mattermost")
    assert store.record(mattermost)[1]


def test_a_burst_is_recorded_at_once_each_question_once(
    store: DeliveryStore, runtime: Runtime
) -> None:
    seen, _ = store.record(QUESTION)
    burst = [
        replace(QUESTION, event_key="901"),  # seen before, by its message
        replace(QUESTION, event_key="910", message_key="20"),
        replace(QUESTION, event_key="910", message_key="20"),  # a retry in the same burst
        replace(QUESTION, event_key="911", message_key="20"),  # the same message's twin event
        replace(QUESTION, event_key="912", message_key="21"),
        replace(QUESTION, surface="mattermost"),  # another surface's keys
    ]
    recorded = store.record_many(burst)
    assert [new for _, new in recorded] == [False, True, False, False, True, True]
    ids = [delivery for delivery, _ in recorded]
    assert ids[0] == seen and ids[1] == ids[2] == ids[3]
    assert len({seen, ids[1], ids[4], ids[5]}) == 4
    with runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(SurfaceDelivery)) == 4
    twin = store.load(ids[4])
    assert twin is not None and twin.inbound.text == QUESTION.text
    assert store.record_many(burst) == [(d, False) for d in ids]
    assert store.record_many([]) == []
    # as one at a time would: a twin is not recorded, so its event key stays free
    chain = [
        replace(QUESTION, event_key="920", message_key="30"),
        replace(QUESTION, event_key="921", message_key="30"),  # the first one's twin
        replace(QUESTION, event_key="921", message_key="31"),  # a new message
    ]
    chained = store.record_many(chain)
    assert [new for _, new in chained] == [True, False, True]
    assert chained[0][0] == chained[1][0] != chained[2][0]


def test_the_text_is_sealed_opened_and_dropped_when_final(
    store: DeliveryStore, runtime: Runtime
) -> None:
    delivery_id, _ = store.record(QUESTION)
    with runtime.database.engine.connect() as conn:
        raw = conn.execute(text("SELECT sealed_text FROM surface_deliveries")).scalar_one()
    assert b"salary" not in bytes(raw)
    loaded = store.load(delivery_id)
    assert loaded is not None and loaded.inbound.text == QUESTION.text
    assert loaded.state == "pending" and not loaded.inbound.direct
    store.set(delivery_id, state="answering", reply_key="101,102", act_as="shared:7000001")
    store.finish(delivery_id, "posted")
    done = store.load(delivery_id)
    assert done is not None and done.inbound.text == "" and done.state == "posted"
    assert done.reply_key == "101,102" and done.act_as == "shared:7000001"
    assert store.knows_thread("telegram", "7000001", "-1001", "main")
    assert not store.knows_thread("telegram", "7000001", "-1001", "7")
    assert store.load(delivery_id + 100) is None


def test_a_private_chat_loads_as_direct(store: DeliveryStore) -> None:
    delivery_id, _ = store.record(replace(QUESTION, channel="501", channel_type="private"))
    loaded = store.load(delivery_id)
    assert loaded is not None and loaded.inbound.direct


def test_cursors_are_kept_per_surface_and_workspace(store: DeliveryStore) -> None:
    assert store.cursor("telegram", "7000001", "offset") is None
    store.set_cursor("telegram", "7000001", "offset", "41")
    store.set_cursor("telegram", "7000001", "offset", "42")
    store.set_cursor("mattermost", "7000001", "offset", "7")
    assert store.cursor("telegram", "7000001", "offset") == "42"
    assert store.cursor("telegram", "other", "offset") is None


def test_the_answers_run_is_stored_and_loaded(store: DeliveryStore) -> None:
    delivery_id, _ = store.record(QUESTION)
    loaded = store.load(delivery_id)
    assert loaded is not None and loaded.run_id is None
    store.set_run(delivery_id, "r" * 32)
    again = store.load(delivery_id)
    assert again is not None and again.run_id == "r" * 32


def _answer(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    return {}


def test_a_failed_enqueue_records_nothing_so_the_retry_is_taken_as_new(
    store: DeliveryStore, runtime: Runtime, tmp_path: Path
) -> None:
    # The record and its job are one transaction: a question whose job could not be stored
    # leaves no record behind, so the messenger's retry is a new question with one job.
    without_kind = JobQueue(
        runtime.settings.jobs, runtime.database, JobRegistry(), data_dir=tmp_path / "a"
    )
    try:
        with pytest.raises(InputError) as refused:
            take_question(store, without_kind, "test.answer", QUESTION)
    finally:
        without_kind.close()
    assert refused.value.field == "kind"
    with runtime.database.session() as session:
        assert session.scalar(select(func.count()).select_from(SurfaceDelivery)) == 0
    registry = JobRegistry()
    registry.add("test.answer", _answer)
    with JobQueue(
        runtime.settings.jobs, runtime.database, registry, data_dir=tmp_path / "b"
    ) as queue:
        retry = take_question(store, queue, "test.answer", QUESTION)
        assert retry.status == "answered" and retry.delivery is not None
        assert take_question(store, queue, "test.answer", QUESTION).status == "duplicate"
        jobs = queue.list_jobs(kind="test.answer")
    assert [job.payload for job in jobs] == [{"delivery": retry.delivery}]
