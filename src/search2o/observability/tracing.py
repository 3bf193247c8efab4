"""OpenTelemetry traces (the optional ``otel`` extra), off unless ``tracing.enabled``.

:meth:`Tracing.open` builds a tracer provider of its own (not the SDK's global one, so every
app and test owns and closes its spans) that exports in batches over OTLP. Everything about
the export comes from the standard environment variables (OpenTelemetry specification,
"OTLP Exporter Configuration" and "Environment Variable Specification"):
``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`` (``http/protobuf``, the specification's default, or
``grpc``), ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``, ``..._HEADERS``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``; ``OTEL_SDK_DISABLED=true`` turns it off.

Incoming requests continue a caller's trace from its W3C ``traceparent`` header (W3C Trace
Context); :func:`traceparent` gives the header of the current span for work handed on (a job
payload's ``traceparent``, read by :mod:`search2o.observability.jobs`).

Spans carry names, ids, routes, statuses and durations only: never message text, queries,
titles or tokens.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import Any

from search2o.errors import ConfigError, MissingExtraError
from search2o.observability.settings import TracingSettings

__all__ = ["Tracing", "extract_context", "traceparent"]

_INSTALL = "pip install 'search2o[otel]'"


class Tracing:
    """The tracer of one app or worker, and the provider that exports its spans.

    Use :meth:`open`; :attr:`tracer` is an OpenTelemetry ``Tracer``. :meth:`close` flushes
    what is left and stops the exporter.
    """

    def __init__(self, provider: Any) -> None:
        self._provider = provider
        self.tracer: Any = provider.get_tracer("search2o")

    @classmethod
    def open(cls, settings: TracingSettings) -> Tracing | None:
        """Return the tracing of these settings, or ``None`` when it is off.

        Raises:
            MissingExtraError: tracing is on but the ``otel`` extra is not installed.
            ConfigError: the OTLP protocol is neither ``http/protobuf`` nor ``grpc``.

        """
        if not settings.enabled or _env("OTEL_SDK_DISABLED").lower() == "true":
            return None
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            raise MissingExtraError(
                f"tracing.enabled needs the OpenTelemetry SDK, which is not installed: {_INSTALL}",
                "otel",
            ) from None
        provider = TracerProvider(
            resource=Resource.create({"service.name": _env("OTEL_SERVICE_NAME") or "search2o"})
        )
        provider.add_span_processor(BatchSpanProcessor(_exporter()))
        return cls(provider)

    def close(self) -> None:
        """Export the spans still buffered, then stop the exporter."""
        self._provider.shutdown()


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def _exporter() -> Any:
    """Return the OTLP span exporter the ``OTEL_EXPORTER_OTLP_*PROTOCOL`` variables name."""
    protocol = (
        _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or _env("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    modules = {
        "http/protobuf": "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "grpc": "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    }
    if protocol not in modules:
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL {protocol!r} is not supported: use http/protobuf or grpc"
        )
    try:
        module = importlib.import_module(modules[protocol])
    except ImportError:
        raise MissingExtraError(
            f"tracing over OTLP {protocol} needs its exporter, which is not installed: {_INSTALL}",
            "otel",
        ) from None
    return module.OTLPSpanExporter()


def extract_context(headers: Mapping[str, str]) -> Any:
    """Return the OpenTelemetry context a request's ``traceparent`` header continues."""
    from opentelemetry.propagate import extract

    return extract(dict(headers))


def traceparent() -> str | None:
    """Return the W3C ``traceparent`` of the current span, or ``None`` without one.

    For work handed on to another process (a job's payload), so its spans join this trace.
    """
    try:
        from opentelemetry.propagate import inject
    except ImportError:
        return None
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier.get("traceparent")
