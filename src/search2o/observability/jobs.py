"""What a job consumer adds to telemetry: the job's id on its log lines, and a span per job.

:func:`instrument_queue` connects to the queue's Huey signals (Huey docs, "Signals"), which
Huey sends in the consumer thread that runs the task: ``executing`` before a delivery of a job
runs, then ``complete``, ``error`` (or ``interrupted``, ``timeout``, ``canceled``) after it.
The job's id (the delivery's only argument) is bound for the log lines of that thread
(:mod:`search2o.observability.ids`); with tracing on, a ``job <kind>`` span covers the
delivery, continuing the trace of the request that enqueued it when the job's payload holds
its ``traceparent`` (:func:`search2o.observability.tracing.traceparent`).

Nothing in :mod:`search2o.jobs` changes: the signals are Huey's public API.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any

from huey import signals

from search2o.jobs.lookup import find_job
from search2o.jobs.queue import JobQueue
from search2o.jobs.transport import DELIVER_TASK
from search2o.observability.ids import bind_ids
from search2o.observability.tracing import Tracing

__all__ = ["instrument_queue"]

_ENDED = (
    signals.SIGNAL_COMPLETE,
    signals.SIGNAL_ERROR,
    signals.SIGNAL_INTERRUPTED,
    signals.SIGNAL_TIMEOUT,
    signals.SIGNAL_CANCELED,
)


class _Delivery(threading.local):
    """The delivery the current consumer thread runs: its bound ids and its span."""

    ids: contextlib.ExitStack | None = None
    span: Any = None


_INSTRUMENTED: weakref.WeakSet[JobQueue] = weakref.WeakSet()


def instrument_queue(queue: JobQueue, tracing: Tracing | None = None) -> None:
    """Bind each delivered job's id for logging and, with ``tracing``, give it a span.

    Call before the queue's consumer starts; a queue already instrumented keeps its first
    instrumentation (several apps may share one runtime's queue).
    """
    if queue in _INSTRUMENTED:
        return
    _INSTRUMENTED.add(queue)
    current = _Delivery()

    def started(signal: str, task: Any, *args: Any) -> None:
        ended(signal, task)  # a delivery that never reported its end
        if getattr(task, "name", None) != DELIVER_TASK or not task.args:
            return
        job_id = str(task.args[0])
        stack = contextlib.ExitStack()
        stack.enter_context(bind_ids(job_id=job_id))
        current.ids = stack
        if tracing is not None:
            current.span = _job_span(queue, tracing, job_id)

    def ended(signal: str, task: Any, *args: Any) -> None:
        span, current.span = current.span, None
        if span is not None:
            if signal == signals.SIGNAL_ERROR and args:
                span.record_exception(args[0])
                span.set_status(_error_status())
            span.end()
        stack, current.ids = current.ids, None
        if stack is not None:
            stack.close()

    queue.huey.signal(signals.SIGNAL_EXECUTING)(started)
    queue.huey.signal(*_ENDED)(ended)


def _job_span(queue: JobQueue, tracing: Tracing, job_id: str) -> Any:
    """Start the span of one delivery: ``job <kind>``, in the enqueuer's trace if it left one."""
    from opentelemetry.trace import SpanKind

    from search2o.observability.tracing import extract_context

    try:
        job = find_job(queue.database, job_id)
        kind, parent = job.kind, job.payload.get("traceparent")
    except Exception:  # the delivery itself reports a missing job or a database failure
        kind, parent = "unknown", None
    context = extract_context({"traceparent": parent}) if isinstance(parent, str) else None
    return tracing.tracer.start_span(
        f"job {kind}",
        context=context,
        kind=SpanKind.CONSUMER,
        attributes={"search2o.job_id": job_id, "search2o.job_kind": kind},
    )


def _error_status() -> Any:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR)
