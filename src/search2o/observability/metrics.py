"""Prometheus metrics of one process, and the text a scrape of ``GET /metrics`` returns.

The metric objects live in one :class:`Metrics` per process (:func:`process_metrics`, built on
first use, never at import). With ``search2o serve --workers N`` the processes share a folder
named by ``PROMETHEUS_MULTIPROC_DIR`` (the CLI creates and wipes it) and every scrape, whichever
process answers it, adds up all of them: prometheus-client's multiprocess mode (its docs,
"Multiprocess Mode (E.g. Gunicorn)"); the open-streams gauge counts live processes only
(``livesum``).

Labels are route templates, methods, status codes, answer kinds, surface and job kind names:
never ids, users, paths with ids in them, or content, so the number of series stays bounded
and a scrape shows nothing about anyone. The queue's depth and its oldest waiting job are read
from the ledger at scrape time (:class:`JobLedgerCollector`, one grouped ``COUNT`` query), so
they are right however many processes run.

Surfaces report through three calls: :func:`surface_acknowledged`,
:func:`surface_duplicate_dropped` and :func:`surface_rate_limited`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator, Mapping
from datetime import timedelta

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from search2o.errors import StorageError
from search2o.storage.db import Database
from search2o.storage.job_models import Job
from search2o.storage.models import utcnow

__all__ = [
    "CONTENT_TYPE",
    "JobLedgerCollector",
    "Metrics",
    "multiprocess_dir",
    "process_metrics",
    "render",
    "surface_acknowledged",
    "surface_duplicate_dropped",
    "surface_rate_limited",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition format, version 0.0.4 (Prometheus docs, "Exposition formats")."""

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# Seconds. Answers take from tens of milliseconds (the built-in model) to a minute (a large
# remote model); requests mostly well under a second.
_ANSWER_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)
_ACK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
_SURFACE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


class Metrics:
    """Every metric object of the process.

    Args:
        registry: where they are registered (one process: scraped from it); ``None`` in
            multiprocess mode, where they write to the shared folder and a scrape reads it.

    Metrics (``_total`` and ``_bucket``/``_sum``/``_count`` suffixes added by the format):

    * ``search2o_http_requests_total{method, route, status}``: requests answered;
    * ``search2o_http_request_duration_seconds{method, route}``: until the last byte; for an
      event stream until its headers (the stream lasts as long as its answer);
    * ``search2o_sse_streams_open``: event streams being sent now;
    * ``search2o_chat_first_token_seconds{kind}``: from the request to the first ``delta`` sent
      (``kind`` ``turn`` or ``agent``);
    * ``search2o_chat_answer_seconds{kind}``: from the request to the answer's last event;
    * ``search2o_chat_model_seconds``, ``search2o_chat_search_seconds``: a turn's model and
      tool time, from its ``done`` event's ``timings``;
    * ``search2o_surface_ack_seconds{surface}``, ``search2o_surface_duplicates_dropped_total
      {surface}``, ``search2o_surface_rate_limited_total{surface}``: what surfaces report;
    * at scrape, from the ledger: ``search2o_jobs{kind, state}`` and
      ``search2o_job_oldest_queued_seconds{kind}`` (:class:`JobLedgerCollector`).

    """

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.registry = registry
        self.http_requests = Counter(
            "search2o_http_requests",
            "HTTP requests answered, per route template, method and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.http_duration = Histogram(
            "search2o_http_request_duration_seconds",
            "HTTP request latency per route template (event streams: until the headers)",
            ["method", "route"],
            registry=registry,
        )
        self.sse_open = Gauge(
            "search2o_sse_streams_open",
            "Server-Sent Event streams being sent",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.first_token = Histogram(
            "search2o_chat_first_token_seconds",
            "From the chat request to the first delta event sent",
            ["kind"],
            buckets=_ANSWER_BUCKETS,
            registry=registry,
        )
        self.answer = Histogram(
            "search2o_chat_answer_seconds",
            "From the chat request to the answer's last event",
            ["kind"],
            buckets=_ANSWER_BUCKETS,
            registry=registry,
        )
        self.model = Histogram(
            "search2o_chat_model_seconds",
            "Chat model time of a turn (its done event's timings.model_ms)",
            buckets=_ANSWER_BUCKETS,
            registry=registry,
        )
        self.search = Histogram(
            "search2o_chat_search_seconds",
            "Tool (knowledge and web search) time of a turn (timings.tools_ms)",
            buckets=_ANSWER_BUCKETS,
            registry=registry,
        )
        self.surface_ack = Histogram(
            "search2o_surface_ack_seconds",
            "From a messenger's event arriving to its acknowledgement",
            ["surface"],
            buckets=_ACK_BUCKETS,
            registry=registry,
        )
        self.surface_duplicates = Counter(
            "search2o_surface_duplicates_dropped",
            "Messenger events dropped as duplicates (retries, replays)",
            ["surface"],
            registry=registry,
        )
        self.surface_rate_limited = Counter(
            "search2o_surface_rate_limited",
            "HTTP 429 answers received from a messenger's API",
            ["surface"],
            registry=registry,
        )

    def observe_answer(
        self,
        kind: str,
        *,
        first_token_s: float | None,
        answer_s: float | None,
        timings: Mapping[str, object] | None,
    ) -> None:
        """Record one answer as the API saw it (``kind`` ``turn`` or ``agent``)."""
        if first_token_s is not None:
            self.first_token.labels(kind).observe(first_token_s)
        if answer_s is not None:
            self.answer.labels(kind).observe(answer_s)
        for key, histogram in (("model_ms", self.model), ("tools_ms", self.search)):
            value = (timings or {}).get(key)
            if isinstance(value, int | float) and value >= 0:
                histogram.observe(value / 1000)


def multiprocess_dir() -> str | None:
    """Return the shared metrics folder of multiprocess mode, or ``None`` for one process."""
    return os.environ.get(MULTIPROC_ENV) or None


@functools.cache
def process_metrics() -> Metrics:
    """Return this process's metrics (built on first use; multiprocess if its folder is set)."""
    return Metrics(None if multiprocess_dir() else CollectorRegistry())


class JobLedgerCollector(Collector):
    """Queue depth and the oldest waiting job, read from the ``jobs`` table at each scrape.

    ``search2o_jobs{kind, state}``: jobs per kind and state (finished ones are kept
    ``jobs.keep_finished_days``); ``search2o_job_oldest_queued_seconds{kind}``: age of the
    oldest job that is due and waits for a worker (0 when none); ``search2o_jobs_ledger_up``:
    1, or 0 when the database did not answer (the other two are then left out).
    """

    def __init__(self, database: Database) -> None:
        self._database = database

    def collect(self) -> Iterator[Metric]:
        """Yield the three families (one grouped query, one ``MIN`` per kind)."""
        up = GaugeMetricFamily("search2o_jobs_ledger_up", "Whether the job ledger answered")
        try:
            rows, oldest = self._read()
        except (StorageError, SQLAlchemyError):
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        jobs = GaugeMetricFamily("search2o_jobs", "Jobs in the ledger", labels=["kind", "state"])
        for kind, state, count in rows:
            jobs.add_metric([kind, state], count)
        yield jobs
        age = GaugeMetricFamily(
            "search2o_job_oldest_queued_seconds",
            "Age of the oldest due job waiting for a worker",
            labels=["kind"],
        )
        for kind, seconds in oldest.items():
            age.add_metric([kind], seconds)
        yield age

    def _read(self) -> tuple[list[tuple[str, str, int]], dict[str, float]]:
        now = utcnow()
        with self._database.session() as session:
            counted = session.execute(
                select(Job.kind, Job.state, func.count()).group_by(Job.kind, Job.state)
            ).all()
            waiting = session.execute(
                select(Job.kind, func.min(Job.created_at))
                .where(Job.state == "queued", Job.run_after <= now)
                .group_by(Job.kind)
            ).all()
        rows = [(str(kind), str(state), int(count)) for kind, state, count in counted]
        oldest = {str(kind): 0.0 for kind, _, _ in rows}
        for kind, created in waiting:
            if created is not None:
                oldest[str(kind)] = max(0.0, (now - created) / timedelta(seconds=1))
        return rows, oldest


def render(database: Database) -> bytes:
    """Return the text of one scrape: this process's (or all processes') metrics + the ledger's.

    Raises:
        nothing for a database that is down: ``search2o_jobs_ledger_up`` says 0.

    """
    metrics = process_metrics()
    if metrics.registry is None:
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = metrics.registry
    ledger = CollectorRegistry()
    ledger.register(JobLedgerCollector(database))
    return generate_latest(registry) + generate_latest(ledger)


def _surface(name: str) -> str:
    if not _SURFACE_NAME.match(name):
        raise ValueError(f"surface name {name!r} must match {_SURFACE_NAME.pattern}")
    return name


def surface_acknowledged(surface: str, seconds: float) -> None:
    """Record that ``surface`` acknowledged an event ``seconds`` after it arrived.

    Args:
        surface: the surface's name (``slack``, ``telegram``...: lowercase letters, digits,
            ``_``, at most 32; never a user, channel or team).
        seconds: from the request's arrival to the acknowledgement sent.

    Raises:
        ValueError: a malformed surface name (a programming error, not user input).

    """
    process_metrics().surface_ack.labels(_surface(surface)).observe(max(0.0, seconds))


def surface_duplicate_dropped(surface: str) -> None:
    """Count one event ``surface`` dropped as a duplicate (a retry or replay it had seen).

    Raises:
        ValueError: as :func:`surface_acknowledged`.

    """
    process_metrics().surface_duplicates.labels(_surface(surface)).inc()


def surface_rate_limited(surface: str) -> None:
    """Count one HTTP 429 that ``surface`` received from its messenger's API.

    Raises:
        ValueError: as :func:`surface_acknowledged`.

    """
    process_metrics().surface_rate_limited.labels(_surface(surface)).inc()
