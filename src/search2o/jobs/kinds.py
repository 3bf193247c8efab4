"""The job kinds of the product, and the queue a process opens from its runtime.

:func:`build_registry` is the one place that says which kinds exist; ``search2o serve`` and
``search2o worker`` both build their queue with :func:`open_job_queue`, so an API process can
enqueue exactly the kinds a worker can run. Add a kind here as::

    registry.add("retention.sweep", lambda ctx, payload: ..., every_s=3600)

with an idempotent handler closing over what it needs from ``runtime`` (docs/jobs.md,
"Writing a job kind"). The queue's own work (the sweeper, the periodic tick) needs no kind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from search2o.jobs.queue import JobQueue
from search2o.jobs.registry import JobRegistry

if TYPE_CHECKING:
    from search2o.runtime import Runtime

__all__ = ["build_registry", "open_job_queue"]


def build_registry(runtime: Runtime) -> JobRegistry:
    """Return the registry of every job kind of the product, bound to ``runtime``."""
    return JobRegistry()


def open_job_queue(runtime: Runtime, registry: JobRegistry | None = None) -> JobQueue:
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
