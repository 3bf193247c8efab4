"""Scale a sync out: its batches become ``sources.batch`` jobs that every consumer shares.

With ``connectors.fan_out`` on, a sync lists and diffs as always, then puts each batch of
documents to fetch on the job queue (payload ``{"source": ID, "holder": LEASE HOLDER, "keys":
[...]}``) instead of running it itself. Every ``search2o worker`` and ``serve`` process on any
machine takes batches (Redis or PostgreSQL carry the queue at scale), fetches their documents
and embeds only the chunks whose text is new. The sync waits for its batches, adding each
one's counts and checkpointing as they end; while some wait in the queue, it runs them itself
(so it is never idle, and a deployment with no free consumer still finishes). It then prunes
and records as a sync without fan-out does.

Faults:

* a killed worker's batch is taken over when its job lease runs out (``jobs.lease_s``) and run
  again; documents it wrote are found unchanged (same content hash), so nothing is lost and
  nothing is embedded twice;
* a batch job that fails for good counts its documents as failed (the sync still prunes only
  after a complete listing, and never prunes what failed: those keys were listed);
* rejected credentials or a long ``Retry-After`` met in a batch stop the sync as they would
  inline;
* a batch whose sync ended or was taken over (its lease holder no longer holds the source)
  ends at once without touching anything.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from search2o.connectors.batch import BatchWriter
from search2o.connectors.contract import CredentialsRejectedError, RetryLaterError
from search2o.connectors.politeness import Polite
from search2o.connectors.report import SyncCounts
from search2o.connectors.settings import ConnectorsSettings
from search2o.connectors.sources import Sources
from search2o.errors import InputError
from search2o.jobs.info import JobRequest
from search2o.jobs.queue import JobQueue
from search2o.knowledge.store import KnowledgeStore

if TYPE_CHECKING:
    from search2o.jobs.context import JobContext

__all__ = ["BATCH", "BatchOutcome", "FanOut", "run_batch_job"]

log = logging.getLogger("search2o.connectors")

BATCH = "sources.batch"
_POLL_S = 0.1
_TRIES = 3
_TICK_S = 5.0  # the sync's lease renewal while no batch ends (its lease_s is at least 10 s)


class BatchOutcome:
    """What a batch job reported: its counts, and a stop (``rejected``, ``later``) if any."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.counts = SyncCounts.of(result.get("counts"))
        self.superseded = bool(result.get("superseded"))
        self.stop: str | None = result.get("stop")
        self.message = str(result.get("message") or "")
        self.after_s = float(result.get("after_s") or 0.0)


class FanOut:
    """Runs a sync's batches as jobs on ``queue`` and waits for them (see the module docstring).

    Args:
        queue: the runtime's job queue (its registry holds ``sources.batch``).
        poll_s: how often job states are read while waiting.

    """

    def __init__(self, queue: JobQueue, poll_s: float = _POLL_S) -> None:
        self.queue = queue
        self.poll_s = poll_s

    def run(
        self,
        source_id: int,
        holder: str,
        batches: list[list[str]],
        on_done: Callable[[BatchOutcome], None],
        on_failed: Callable[[list[str], str], None],
        tick: Callable[[], None],
    ) -> None:
        """Enqueue ``batches``, then wait until each is done, helping with queued ones.

        A batch whose payload would pass ``jobs.max_payload_bytes`` (many long keys) is split.

        Args:
            on_done: called with each finished batch's outcome (it may raise to stop the sync:
                the batches left end on their own once the lease is released).
            on_failed: called with the keys and the error of a batch that failed for good.
            tick: called when a batch ended, else every 5 s (the sync renews its lease and
                checkpoints).

        """
        limit = self.queue.settings.max_payload_bytes
        batches = [part for keys in batches for part in _fit(source_id, holder, keys, limit)]
        requests = [JobRequest(BATCH, _payload(source_id, holder, keys)) for keys in batches]
        ids = [job.id for job in self.queue.enqueue_many(requests)]
        keys_of = dict(zip(ids, batches, strict=True))
        pending = list(ids)
        ticked = time.monotonic()
        while pending:
            states = self.queue.states(pending)
            finished = False
            for job_id in [j for j in pending if states.get(j) in ("done", "failed")]:
                pending.remove(job_id)
                finished = True
                job = self.queue.get(job_id)
                if job.state == "done":
                    on_done(BatchOutcome(job.result if isinstance(job.result, dict) else {}))
                else:
                    on_failed(keys_of[job_id], job.error or "failed")
            queued = [j for j in pending if states.get(j) == "queued"]
            # Help while batches wait: run one here (claimed through the ledger like any
            # delivery, so no consumer runs it too). A few tries: a consumer may take it first.
            if not finished and not any(self.queue.run_here(j) for j in queued[:_TRIES]):
                time.sleep(self.poll_s)
            if finished or time.monotonic() - ticked >= _TICK_S:
                ticked = time.monotonic()
                tick()


def _payload(source_id: int, holder: str, keys: list[str]) -> dict[str, Any]:
    """Return the ``sources.batch`` payload of ``keys``."""
    return {"source": source_id, "holder": holder, "keys": keys}


def _fit(source_id: int, holder: str, keys: list[str], max_bytes: int) -> list[list[str]]:
    """Split ``keys`` until each part's payload fits ``jobs.max_payload_bytes`` (halving).

    One key (at most 1,000 characters, the engine's bound) always fits the smallest limit of
    a real deployment; a part of one key is never split further.
    """
    size = len(json.dumps(_payload(source_id, holder, keys), ensure_ascii=False).encode())
    if size <= max_bytes or len(keys) <= 1:
        return [keys]
    half = len(keys) // 2
    return _fit(source_id, holder, keys[:half], max_bytes) + _fit(
        source_id, holder, keys[half:], max_bytes
    )


def run_batch_job(
    ctx: JobContext,
    payload: dict[str, Any],
    knowledge: KnowledgeStore,
    sources: Sources,
    settings: ConnectorsSettings,
) -> dict[str, Any]:
    """Handle one ``sources.batch`` job: fetch and write its keys; return its counts.

    Raises:
        InputError: the payload is malformed (a final failure: retrying cannot fix it).

    """
    source_id, holder, keys = payload.get("source"), payload.get("holder"), payload.get("keys")
    if not isinstance(source_id, int) or not isinstance(holder, str) or not isinstance(keys, list):
        raise InputError("payload", "a sources.batch job needs source (id), holder and keys")
    row = sources.held(source_id, holder)
    if row is None:
        return {"superseded": True}
    counts = SyncCounts()
    polite = Polite(settings.requests_per_s, settings.retries, settings.max_inline_wait_s)
    writer = BatchWriter(knowledge, row.id, row.name, counts, polite, settings.fetch_concurrency)
    connector = sources.connector(row)
    connector.bind(polite.call)
    done = 0

    def after_each() -> None:
        nonlocal done
        done += 1
        ctx.progress(done, len(keys), "writing")

    try:
        writer.write_batch(connector, [str(k) for k in keys], after_each)
    except CredentialsRejectedError as exc:
        return {"counts": counts.to_json(), "stop": "rejected", "message": exc.message}
    except RetryLaterError as exc:
        return {"counts": counts.to_json(), "stop": "later", "after_s": exc.after_s}
    finally:
        connector.close()
    return {"counts": counts.to_json()}
