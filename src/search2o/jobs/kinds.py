"""The job kinds of the product, and the queue a process opens from its runtime.

:func:`build_registry` is the one place that says which kinds exist; ``search2o serve`` and
``search2o worker`` both build their queue with :func:`open_job_queue`, so an API process can
enqueue exactly the kinds a worker can run. Every handler is idempotent (docs/jobs.md,
"Writing a job kind"):

* ``retention.sweep`` (every ``retention.sweep_interval_s``): delete the conversations
  expired under retention;
* ``runs.sweep`` (every ``runs.sweep_interval_s``): interrupt runs whose process died, remove
  the events of finished runs;
* ``uploads.clean`` (hourly): remove the files of uploads whose job ended, or that waited a day;
* ``state.compact`` (payload ``conversation``; when a save passes ``state.compact_every``): fold
  a conversation's state changes into a snapshot;
* ``documents.ingest`` (payload ``upload``, ``groups``, ``users``; one per
  ``POST /v1/documents``): ingest the files of an API upload;
* and every extension's kinds (:mod:`search2o.extensions`): ``slack.answer``/``slack.rate``,
  ``telegram.*`` and ``mattermost.*`` when that section is configured (docs/slack.md,
  docs/telegram.md, docs/mattermost.md).

A periodic kind runs at most every ``jobs.tick_s`` (shorter intervals are raised to it), once
across all consumers.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import delete, select

from search2o import extensions
from search2o.errors import InputError
from search2o.jobs.context import JobContext
from search2o.jobs.queue import JobQueue
from search2o.jobs.registry import JobRegistry
from search2o.knowledge.access import AccessList
from search2o.query.retention import sweep as retention_sweep
from search2o.state.store import DatabaseStateStore
from search2o.storage.job_models import Job
from search2o.storage.models import utcnow
from search2o.storage.upload_models import UploadPart

if TYPE_CHECKING:
    from search2o.chat.service import ChatService
    from search2o.config import Settings
    from search2o.crypto.vault import Vault
    from search2o.knowledge.store import KnowledgeStore
    from search2o.state.contract import StateStore
    from search2o.storage.db import Database

__all__ = [
    "COMPACT",
    "INGEST",
    "UPLOAD_KEEP",
    "JobHost",
    "build_registry",
    "ingest_dedupe_key",
    "open_job_queue",
]

INGEST = "documents.ingest"
COMPACT = "state.compact"
UPLOAD_KEEP = timedelta(days=1)
"""How long an upload's files wait for a job that never finished before they are removed."""


class JobHost(Protocol):
    """What the product's job kinds use of a process: :class:`search2o.runtime.Runtime` is one.

    A protocol, so that the core's job kinds name the runtime's parts without importing the
    runtime (which opens this module's queue).
    """

    @property
    def settings(self) -> Settings:
        """The process's settings."""

    @property
    def database(self) -> Database:
        """The open database."""

    @property
    def vault(self) -> Vault:
        """The sealer of conversation records."""

    @property
    def chat(self) -> ChatService:
        """The chat service (its runs are swept)."""

    @property
    def state_store(self) -> StateStore:
        """Where agents' conversation state is kept."""

    @property
    def knowledge(self) -> KnowledgeStore:
        """The knowledge store uploads are ingested into."""


def ingest_dedupe_key(upload_id: str) -> str:
    """Return the dedupe key of the job that ingests upload ``upload_id`` (one job per upload)."""
    return f"{INGEST}:{upload_id}"


def build_registry(runtime: JobHost) -> JobRegistry:
    """Return the registry of every job kind of the product, bound to ``runtime``."""
    settings = runtime.settings
    registry = JobRegistry()
    tick = settings.jobs.tick_s

    def sweep_retention(ctx: JobContext, payload: dict[str, Any]) -> dict[str, int]:
        # Idempotent: a second run finds nothing expired left to delete.
        return {
            "deleted": retention_sweep(runtime.database, runtime.vault, settings.retention).deleted
        }

    def sweep_runs(ctx: JobContext, payload: dict[str, Any]) -> dict[str, int]:
        report = runtime.chat.runs.sweep()
        return {"interrupted": report.interrupted, "removed": report.removed}

    def compact(ctx: JobContext, payload: dict[str, Any]) -> dict[str, int]:
        store = runtime.state_store
        if not isinstance(store, DatabaseStateStore):
            return {"folded": 0}  # hooks keep the state: nothing of ours to compact
        return {"folded": store.compact(str(payload.get("conversation", "")))}

    if settings.retention.sweep_interval_s > 0:
        every = max(settings.retention.sweep_interval_s, tick)
        registry.add("retention.sweep", sweep_retention, every_s=every)
    if settings.runs.sweep_interval_s > 0:
        registry.add("runs.sweep", sweep_runs, every_s=max(settings.runs.sweep_interval_s, tick))
    registry.add("uploads.clean", lambda ctx, payload: _clean_uploads(runtime), every_s=3600)
    registry.add(COMPACT, compact)
    registry.add(INGEST, lambda ctx, payload: _ingest_upload(runtime, ctx, payload))
    for extension in extensions.discover():  # surfaces' and connectors' kinds
        if extension.add_kinds is not None:
            extension.add_kinds(registry, runtime)
    return registry


def _ingest_upload(runtime: JobHost, ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    """Ingest the files of one upload, in order; report each file's outcome.

    Idempotent: ingesting the same bytes under the same identity again is ``unchanged``. The
    files stay until :func:`_clean_uploads` removes them after the job ends, so a retry after a
    crash finds them.

    Raises:
        InputError: the upload's files are gone (it failed for good, nothing to retry).

    """
    upload = str(payload.get("upload", ""))
    access = AccessList.build(payload.get("groups") or [], payload.get("users") or [])
    with runtime.database.session() as session:
        positions = list(
            session.scalars(
                select(UploadPart.position)
                .where(UploadPart.upload_id == upload)
                .order_by(UploadPart.position)
            )
        )
    if not positions:
        raise InputError("upload", f"upload {upload!r} has no files left to ingest")
    outcomes = []
    for done, position in enumerate(positions):
        ctx.progress(done, len(positions), "ingesting")
        with runtime.database.session() as session:
            part = session.get_one(UploadPart, (upload, position))
            source, filename, data = part.source, part.filename, part.data
        outcome = runtime.knowledge.ingest_bytes(source, filename, data, access)
        outcomes.append(asdict(outcome))
    ctx.progress(len(positions), len(positions), "ingested")
    return {"outcomes": outcomes}


def _clean_uploads(runtime: JobHost) -> dict[str, int]:
    """Remove the files of uploads whose job ended, and of any upload older than a day."""
    with runtime.database.session() as session:
        waiting = select(UploadPart.upload_id).distinct()
        finished = [
            upload
            for upload in session.scalars(waiting)
            if session.scalar(select(Job.state).where(Job.dedupe_key == ingest_dedupe_key(upload)))
            in ("done", "failed")
        ]
        stale = utcnow() - UPLOAD_KEEP
        removed = session.execute(
            delete(UploadPart).where(
                UploadPart.upload_id.in_(finished) | (UploadPart.created_at < stale)
            )
        )
        return {"removed": int(getattr(removed, "rowcount", 0) or 0)}


def open_job_queue(runtime: JobHost, registry: JobRegistry | None = None) -> JobQueue:
    """Open the job queue of ``runtime``'s settings and database (close it, or use ``with``).

    Args:
        registry: the kinds; default :func:`build_registry` of ``runtime``.

    Raises:
        ConfigError, StorageError: as :class:`~search2o.jobs.queue.JobQueue`.

    """
    return JobQueue(
        runtime.settings.jobs,
        runtime.database,
        registry if registry is not None else build_registry(runtime),
        data_dir=runtime.settings.data_dir,
    )
