"""What the transport may do to messages, on SQLite, PostgreSQL and Redis: the ledger copes.

A message delivered twice runs its job once; a lost message is resent by the sweeper; a
message that is not ours (or Huey's pickle) is dropped without running anything; messages on
the wire are JSON holding the job id only.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from search2o.jobs.transport import JsonMessageSerializer
from tests.jobs.conftest import BACKENDS, QueueEnv, wait_until
from tests.jobs.kinds import effects, runs


@BACKENDS
def test_a_message_delivered_twice_runs_its_job_once(queue_env: QueueEnv) -> None:
    producer = queue_env.open()
    job = producer.enqueue("test.effect", {"document_id": 5})
    wire = producer.huey.storage.enqueued_items()
    assert len(wire) == 1
    message = json.loads(bytes(wire[0]))
    assert message["args"] == [job.id] and message["eta"] is None
    assert job.id in message["args"] and "document_id" not in json.dumps(message)
    producer.huey.storage.enqueue(bytes(wire[0]))  # the transport redelivers it
    assert producer.huey.pending_count() == 2
    consumer = queue_env.open()
    consumer.start_consumer(2)
    assert consumer.wait(job.id, 30).state == "done"
    wait_until(lambda: consumer.huey.pending_count() == 0, 10, "both deliveries")
    later = consumer.enqueue("test.effect")
    consumer.wait(later.id, 30)
    assert [a for a, _, _ in runs(queue_env.database, job.id)] == [1]
    assert effects(queue_env.database, job.id) == 1


@BACKENDS
def test_a_lost_message_is_resent_by_the_sweeper(queue_env: QueueEnv) -> None:
    producer = queue_env.open()
    job = producer.enqueue("test.effect")
    producer.huey.storage.flush_queue()  # the transport lost it
    assert producer.huey.pending_count() == 0
    consumer = queue_env.open()
    consumer.start_consumer(1)
    done = consumer.wait(job.id, 30)
    assert done.state == "done" and done.attempts == 1
    # Not before the job had been due and untouched for lost_after_s.
    assert (done.started_at - done.created_at).total_seconds() >= queue_env.settings.lost_after_s


@BACKENDS
def test_a_message_that_is_not_ours_is_dropped(queue_env: QueueEnv) -> None:
    producer = queue_env.open()
    job = producer.enqueue("test.effect")
    storage = producer.huey.storage
    storage.enqueue(pickle.dumps({"id": "x", "name": "os.system", "args": ["true"]}))
    storage.enqueue(b'{"id": "x", "name": "n", "eta": null, "args": [1, 2]}')
    consumer = queue_env.open()
    consumer.start_consumer(1)
    assert consumer.wait(job.id, 30).state == "done"
    wait_until(lambda: consumer.huey.pending_count() == 0, 10, "the foreign messages dropped")
    assert consumer.consuming


def test_the_serializer_refuses_what_job_messages_never_carry() -> None:
    from huey.registry import Message

    serializer = JsonMessageSerializer()
    fine = Message(id="m", name="search2o.jobs.queue.search2o_job", args=("a" * 32,), kwargs={})
    assert serializer.deserialize(serializer.serialize(fine)).args == ("a" * 32,)
    for bad in (
        fine._replace(kwargs={"x": 1}),
        fine._replace(args=("a", "b")),
        fine._replace(args=(7,)),
        fine._replace(expires=60),
        fine._replace(on_complete=fine),
    ):
        with pytest.raises(ValueError, match="job"):
            serializer.serialize(bad)
    with pytest.raises(ValueError):
        serializer.deserialize(pickle.dumps(fine))


@pytest.mark.parametrize(
    ("database_url", "transport"), [("sqlite", "sqlite")], indirect=["database_url"]
)
def test_negative_control_without_the_conditional_claim_a_redelivery_runs_twice(
    queue_env: QueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The redelivery check above can fail: a claim that ignores the state runs a job twice."""
    from sqlalchemy import update

    from search2o.jobs import ledger
    from search2o.jobs.ledger import Claim, Lease
    from search2o.storage.job_models import Job

    def careless_claim(database: Any, job_id: str, worker: str, lease_s: float, now: Any) -> Any:
        with database.session() as session:
            session.execute(
                update(Job)
                .where(Job.id == job_id)
                .values(state="running", attempts=Job.attempts + 1, lease_owner=worker)
            )
            row = session.get_one(Job, job_id)
            return Claim(Lease(job_id, worker, row.attempts), row.kind, 9, row.payload, None)

    monkeypatch.setattr(ledger, "claim", careless_claim)
    producer = queue_env.open()
    job = producer.enqueue("test.effect")
    producer.huey.storage.enqueue(bytes(producer.huey.storage.enqueued_items()[0]))
    consumer = queue_env.open()
    consumer.start_consumer(1)
    wait_until(lambda: len(runs(queue_env.database, job.id)) == 2, 30, "the second run")
    assert effects(queue_env.database, job.id) == 1  # the idempotent effect still holds
