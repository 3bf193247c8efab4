"""What operators watch: ids on log lines, Prometheus metrics, OpenTelemetry traces.

* :mod:`~search2o.observability.ids`: the request, run and job ids bound for log lines;
* :mod:`~search2o.observability.metrics`: the process's metrics, the scrape's text, and the
  calls surfaces report through (:func:`surface_acknowledged`,
  :func:`surface_duplicate_dropped`, :func:`surface_rate_limited`);
* :mod:`~search2o.observability.tracing`: optional OTLP traces (the ``otel`` extra);
* :mod:`~search2o.observability.answers`: an answer's timings and spans from its event stream;
* :mod:`~search2o.observability.jobs`: job ids and spans in a job consumer.

See docs/operations.md ("Probes", "Metrics", "Traces", "Logs").
"""

from search2o.observability.ids import bind_ids, current_ids
from search2o.observability.metrics import (
    surface_acknowledged,
    surface_duplicate_dropped,
    surface_rate_limited,
)
from search2o.observability.tracing import Tracing, traceparent

__all__ = [
    "Tracing",
    "bind_ids",
    "current_ids",
    "surface_acknowledged",
    "surface_duplicate_dropped",
    "surface_rate_limited",
    "traceparent",
]
