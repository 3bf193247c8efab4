"""OpenTelemetry traces exported over OTLP/HTTP to a real receiver on loopback.

The receiver is an HTTP server that decodes what the SDK's OTLP exporter posts to
``/v1/traces`` (``ExportTraceServiceRequest``, protobuf; OpenTelemetry specification, "OTLP
/HTTP"). The app is configured only by ``tracing.enabled`` and the standard ``OTEL_*``
environment variables.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from search2o.api.app import create_app
from search2o.config import Settings
from search2o.errors import ConfigError
from search2o.observability.settings import TracingSettings
from search2o.observability.tracing import Tracing
from search2o.runtime import Runtime
from tests.api.test_api import add_user, serve
from tests.conftest import MemoEmbedder
from tests.ops.conftest import streamed_chat

pytestmark = pytest.mark.slow

CANARY = "pangolin6620"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: keeps every span posted to ``/v1/traces``."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.bodies: list[bytes] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.bodies.append(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                self.server.spans.extend(scope.spans)
        self.send_response(200 if self.path == "/v1/traces" else 404)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what was received."""


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{server.server_port}/v1/traces"
    )
    monkeypatch.setenv("OTEL_SERVICE_NAME", "search2o-test")
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _attributes(span: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in span.attributes:
        kind = item.value.WhichOneof("value")
        found[item.key] = getattr(item.value, kind) if kind else None
    return found


def test_a_chat_request_is_one_trace_that_continues_the_callers(
    receiver: Receiver, settings: Settings, embedder: MemoEmbedder
) -> None:
    chosen = settings.model_copy(
        update={"auth_mode": "token", "tracing": TracingSettings(enabled=True)}
    )
    with Runtime(chosen, embedder=embedder) as rt:
        auth = add_user(rt, "ann@example.com", admin=True)
        with serve(create_app(chosen, runtime=rt)) as client:  # its end flushes the spans
            events = streamed_chat(
                client, f"Where is the {CANARY} garage?", traceparent=CALLER, **auth
            )
            upload = client.post(
                "/v1/documents?wait=60",
                files=[("files", ("lunch.md", b"# Lunch\n\nAt noon.\n", "text/markdown"))],
                headers=auth,
            )
    assert events[-1] == "done" and upload.status_code == 201, upload.text
    by_name: dict[str, list[Any]] = {}
    for span in receiver.spans:
        by_name.setdefault(span.name, []).append(span)
    assert {"POST /v1/chat", "chat.run", "model", "POST /v1/documents"} <= set(by_name), set(
        by_name
    )
    (request,) = by_name["POST /v1/chat"]
    (run,) = by_name["chat.run"]
    assert request.trace_id.hex() == TRACE_ID  # the caller's trace goes on
    assert request.parent_span_id.hex() == "00f067aa0ba902b7"
    assert run.trace_id == request.trace_id and run.parent_span_id == request.span_id
    model = by_name["model"][0]
    assert model.trace_id == request.trace_id and model.parent_span_id == run.span_id
    assert any(event.name == "first_token" for event in model.events)
    attributes = _attributes(request)
    assert attributes["http.route"] == "/v1/chat"
    assert attributes["http.response.status_code"] == 200
    assert _attributes(run)["search2o.answer_kind"] == "turn"
    assert len(_attributes(run)["search2o.run_id"]) >= 16
    # The upload's job is delivered in a consumer span of the upload request's trace.
    (uploaded,) = by_name["POST /v1/documents"]
    (job,) = [s for s in receiver.spans if s.name == "job documents.ingest"]
    assert len(_attributes(job)["search2o.job_id"]) == 32
    assert job.trace_id == uploaded.trace_id and job.parent_span_id == uploaded.span_id
    # Names, ids, routes and numbers only: the message never leaves in a span.
    assert all(CANARY.encode() not in body for body in receiver.bodies)
    assert all(auth["Authorization"][7:].encode() not in body for body in receiver.bodies)


def test_tracing_is_off_by_default_and_refuses_an_unknown_protocol(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Tracing.open(TracingSettings()) is None
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert Tracing.open(TracingSettings(enabled=True)) is None
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    with pytest.raises(ConfigError, match="'carrier-pigeon' is not supported"):
        Tracing.open(TracingSettings(enabled=True))
