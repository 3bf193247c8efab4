"""The sources' job kinds: ``sources.sync``, ``sources.batch`` and the periodic ``sources.due``.

``sources.batch`` runs one batch of a sync with ``connectors.fan_out``
(:mod:`search2o.connectors.fanout`).

``sources.sync`` (payload ``{"source": NAME, "full": bool, "allow_mass_delete": bool}``) runs
one sync; a sync of the same source already running elsewhere makes it end at once (its result
says so): the lease, not the queue, keeps one sync per source, so a retried job is harmless.
``sources.due`` runs every ``connectors.tick_s`` in ``serve`` and ``worker`` and enqueues a
``sources.sync`` for each source whose ``next_sync_at`` has come (its schedule, or the time a
``Retry-After`` named), with a dedupe key per source and due time, so many consumers start it
once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from search2o.connectors.fanout import BATCH, run_batch_job
from search2o.connectors.settings import connectors_settings
from search2o.connectors.wiring import sources_of, sync_engine
from search2o.errors import ConflictError, InputError

if TYPE_CHECKING:
    from search2o.jobs.context import JobContext
    from search2o.jobs.registry import JobRegistry
    from search2o.runtime import Runtime

__all__ = ["SYNC", "add_source_kinds", "sync_payload"]

SYNC = "sources.sync"
DUE = "sources.due"


def sync_payload(name: str, full: bool = False, allow_mass_delete: bool = False) -> dict[str, Any]:
    """Return the payload of a ``sources.sync`` job."""
    return {"source": name, "full": full, "allow_mass_delete": allow_mass_delete}


def add_source_kinds(registry: JobRegistry, runtime: Runtime) -> None:
    """Register the sources' kinds, bound to ``runtime``."""
    settings = connectors_settings(runtime.settings)

    def sync(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        name = payload.get("source")
        if not isinstance(name, str):
            raise InputError("source", "a sources.sync job needs the source's name")

        def progress(phase: str, counts: Any, total: int | None) -> None:
            ctx.progress(counts.fetched + counts.failed, total, phase)

        try:
            report = sync_engine(runtime).sync(
                name,
                full=bool(payload.get("full")),
                allow_mass_delete=bool(payload.get("allow_mass_delete")),
                on_progress=progress,
            )
        except ConflictError as exc:
            return {"skipped": exc.message}
        return {
            "summary": report.counts.line(),
            "error": report.error,
            "status": report.status,
            "seconds": round(report.seconds, 3),
        }

    def due(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        started = []
        for name, due_at in sources_of(runtime).due():
            runtime.jobs.enqueue(
                SYNC, sync_payload(name), dedupe_key=f"{SYNC}:{name}:{due_at.isoformat()}"
            )
            started.append(name)
        return {"started": started}

    def batch(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        return run_batch_job(ctx, payload, runtime.knowledge, sources_of(runtime), settings)

    registry.add(SYNC, sync, max_attempts=3)
    registry.add(BATCH, batch, max_attempts=3)
    registry.add(DUE, due, every_s=max(settings.tick_s, runtime.settings.jobs.tick_s))
