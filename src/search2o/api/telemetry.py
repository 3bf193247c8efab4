"""The outermost middleware: request ids, one log line, metrics and a span per request.

:class:`Telemetry` is a pure ASGI middleware (it never buffers a response, so event streams
pass as they are written). For every HTTP request it:

* takes the client's ``x-request-id`` when it is short and printable, else makes one, binds it
  for every log line of the request (:mod:`search2o.observability.ids`) and returns it in the
  ``x-request-id`` header (and ``x-search2o-auth-mode: local-single-user`` in local mode);
* logs one ``request`` line when the response ends: ``request_id``, ``method``, ``path``,
  ``route`` (the template), ``status``, ``ms`` and, for an answer, its ``run_id``; a sign-in
  link's path holds its secret, so it is logged as its template;
* counts the request and its latency per route template (:mod:`search2o.observability.metrics`;
  requests no route matched are ``route="unmatched"``, so a scan of random paths adds no
  series), keeps the open event streams' gauge, and follows ``POST /v1/chat`` answers for their
  time to first token, model and search time (:mod:`search2o.observability.answers`);
* with tracing on, runs the request in a server span named ``<METHOD> <route>`` that continues
  the caller's ``traceparent`` (:mod:`search2o.observability.tracing`);
* turns an exception that escaped the app into a 500 with our error body naming the request
  id (the traceback goes to the log), when the response had not started.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from search2o.observability.answers import AnswerObserver
from search2o.observability.ids import bind_ids
from search2o.observability.metrics import Metrics
from search2o.observability.tracing import Tracing, extract_context
from search2o.signin import LINK_API_PATH

__all__ = ["Telemetry"]

_SECRET_PATHS = {LINK_API_PATH: LINK_API_PATH + "{value}"}
"""Path prefixes followed by a secret, and what is logged instead of the whole path."""


def _loggable(path: str) -> str:
    """Return ``path`` as it may be logged: without the secret of a sign-in link."""
    for prefix, shown in _SECRET_PATHS.items():
        if path.startswith(prefix):
            return shown
    return path


log = logging.getLogger("search2o.api")

_CHAT_PATH = "/v1/chat"
_MAX_JSON_ANSWER = 4 * 1024 * 1024


def request_id_of(headers: Headers) -> str:
    """Return the client's ``x-request-id`` if short (1-64) and printable, else a new one."""
    given = headers.get("x-request-id", "")
    return given if given.isprintable() and 0 < len(given) <= 64 else uuid.uuid4().hex[:16]


class _Exchange:
    """What one request's response did so far."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.status = 500
        self.response_started = False
        self.headers_at: float | None = None
        self.stream = False
        self.json_chat = False
        self.json_body = b""
        self.observer: AnswerObserver | None = None


class Telemetry:
    """Log, count and trace every HTTP request (see the module docstring).

    Args:
        app: the application behind it.
        metrics: this process's metrics.
        tracing: the app's tracing, or ``None`` when it is off.
        local_mode: mark every response ``x-search2o-auth-mode: local-single-user``.
        route_of: the route template of a request the router did not reach (refused by the
            ingress before routing: 401, 413), or ``None`` when no route matches it.

    """

    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        tracing: Tracing | None,
        local_mode: bool,
        route_of: Callable[[Scope], str | None] = lambda scope: None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.tracing = tracing
        self.local_mode = local_mode
        self.route_of = route_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI call (see the class docstring)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        exchange = _Exchange(time.perf_counter())
        request_id = request_id_of(headers)
        span, attached, parent = self._start_span(scope, headers)
        is_chat = scope["method"] == "POST" and scope["path"] == _CHAT_PATH

        async def send_out(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.status = int(message["status"])
                exchange.response_started = True
                exchange.headers_at = time.perf_counter()
                out = MutableHeaders(scope=message)
                out["x-request-id"] = request_id
                if self.local_mode:
                    out["x-search2o-auth-mode"] = "local-single-user"
                media = out.get("content-type", "")
                exchange.stream = media.startswith("text/event-stream")
                if exchange.stream:
                    self.metrics.sse_open.inc()
                if is_chat and exchange.status == 200:
                    tracer = self.tracing.tracer if self.tracing is not None else None
                    exchange.observer = AnswerObserver(
                        self.metrics, exchange.started, tracer, parent
                    )
                    exchange.json_chat = media.startswith("application/json")
            elif message["type"] == "http.response.body" and exchange.observer is not None:
                body = message.get("body", b"")
                if exchange.stream:
                    exchange.observer.feed(body)
                elif exchange.json_chat and len(exchange.json_body) < _MAX_JSON_ANSWER:
                    exchange.json_body += body
                    if not message.get("more_body", False):
                        exchange.observer.feed_json(exchange.json_body)
            await send(message)

        with bind_ids(request_id=request_id):
            try:
                await self.app(scope, receive, send_out)
            except Exception as exc:
                log.exception("unhandled error", extra={"fields": {"request_id": request_id}})
                if span is not None:
                    span.record_exception(exc)
                if not exchange.response_started:
                    await _internal_error(request_id)(send_out)
            finally:
                self._finish(scope, exchange, request_id, span)
                if attached is not None:
                    from opentelemetry import context

                    context.detach(attached)

    def _start_span(self, scope: Scope, headers: Headers) -> tuple[Any, Any, Any]:
        """Start the request's server span; return it, its attach token and its context."""
        if self.tracing is None:
            return None, None, None
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind

        span = self.tracing.tracer.start_span(
            f"{scope['method']} unmatched",
            context=extract_context(headers),
            kind=SpanKind.SERVER,
            attributes={"http.request.method": scope["method"]},
        )
        current = trace.set_span_in_context(span)
        return span, context.attach(current), current

    def _finish(self, scope: Scope, exchange: _Exchange, request_id: str, span: Any) -> None:
        """Count, log and end the span of a request whose response is over."""
        ended = time.perf_counter()
        route = getattr(scope.get("route"), "path", None) or self.route_of(scope) or "unmatched"
        method = scope["method"]
        status = exchange.status
        self.metrics.http_requests.labels(method, route, str(status)).inc()
        until = exchange.headers_at if exchange.stream and exchange.headers_at else ended
        self.metrics.http_duration.labels(method, route).observe(until - exchange.started)
        if exchange.stream:
            self.metrics.sse_open.dec()
        observer = exchange.observer
        if observer is not None:
            observer.close()
        run_id = observer.run_id if observer is not None else None
        run_id = run_id or (scope.get("path_params") or {}).get("run_id")
        fields: dict[str, Any] = {
            "request_id": request_id,
            "method": method,
            "path": _loggable(scope["path"]),
            "route": route,
            "status": status,
            "ms": round((ended - exchange.started) * 1000, 1),
        }
        if isinstance(run_id, str):
            fields["run_id"] = run_id
        log.info("request", extra={"fields": fields})
        if span is not None:
            span.update_name(f"{method} {route}")
            span.set_attribute("http.route", route)
            span.set_attribute("http.response.status_code", status)
            span.set_attribute("search2o.request_id", request_id)
            if status >= 500:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR))
            span.end()


def _internal_error(request_id: str) -> Any:
    """Return an ASGI sender of our 500 body naming ``request_id``."""
    body = json.dumps(
        {
            "detail": {
                "error": "InternalError",
                "message": f"internal error; the server log has request {request_id}",
            }
        }
    ).encode()

    async def respond(send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 500,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return respond
