"""The ``metrics`` and ``tracing`` settings sections (docs/operations.md)."""

from __future__ import annotations

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
)

__all__ = ["MetricsSettings", "TracingSettings"]


class MetricsSettings(BaseModel):
    """The Prometheus endpoint ``GET /metrics`` (docs/operations.md, "Metrics").

    ``enabled`` false: ``/metrics`` answers 404. With ``token`` set a scrape must send
    ``Authorization: Bearer <token>`` (compared in constant time) from any address; without
    it only loopback peers may scrape (:func:`~search2o.netpolicy.is_loopback_host`).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="serve GET /metrics")
    token: SecretStr | None = Field(
        default=None, description="bearer token scrapers send; unset: loopback peers only"
    )

    @field_validator("token")
    @classmethod
    def _long_token(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and len(token.get_secret_value()) < 16:
            raise ValueError("metrics.token must be at least 16 characters")
        return token


class TracingSettings(BaseModel):
    """OpenTelemetry traces, off by default (the ``otel`` extra; docs/operations.md, "Traces").

    With ``enabled`` the process exports spans over OTLP; where and how (endpoint, protocol,
    headers, service name, sampler) come from the standard ``OTEL_*`` environment variables
    (OpenTelemetry specification, "Environment Variable Specification" and "OTLP Exporter
    Configuration"), e.g. ``OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318``.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=False, description="export spans over OTLP (OTEL_* env)")
