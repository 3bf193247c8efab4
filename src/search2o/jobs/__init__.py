"""The job queue: background work with a ledger row, delivered at least once.

Huey (SQLite embedded, PostgreSQL or Redis at scale) carries job ids; the ``jobs`` table (the
ledger) holds each job's kind, unique dedupe key, state, attempts, lease, progress, result or
error, and decides what runs. See docs/jobs.md.

* :class:`JobQueue`: ``enqueue`` / ``enqueue_many`` (:class:`JobRequest`), ``get``
  (owner-checked), ``list_jobs``, ``sweep``,
  ``start_consumer`` / ``stop_consumer`` (threads in a server), ``run_worker`` (foreground).
* :class:`JobRegistry` / :class:`JobKind`: which handler ``(ctx, payload) -> result`` runs a
  kind, and how often a periodic kind runs. Handlers must be idempotent.
* :class:`JobContext`: a handler's job id, attempt, progress reporting and lease;
  :class:`JobLeaseLost`, :class:`JobInterrupted`.
* :class:`JobInfo`, :class:`JobProgress`, :data:`JobState`: what callers read;
  :func:`find_job` / :func:`find_jobs` read them from the ledger without a transport.

The kinds of the product are registered in :mod:`search2o.jobs.kinds`.
"""

from search2o.jobs.context import JobContext, JobInterrupted, JobLeaseLost
from search2o.jobs.info import JobInfo, JobProgress, JobRequest, JobState
from search2o.jobs.ledger import backoff_delay
from search2o.jobs.lookup import find_job, find_jobs
from search2o.jobs.queue import JobQueue, SweepReport
from search2o.jobs.registry import Handler, JobKind, JobRegistry

__all__ = [
    "Handler",
    "JobContext",
    "JobInfo",
    "JobInterrupted",
    "JobKind",
    "JobLeaseLost",
    "JobProgress",
    "JobQueue",
    "JobRegistry",
    "JobRequest",
    "JobState",
    "SweepReport",
    "backoff_delay",
    "find_job",
    "find_jobs",
]
