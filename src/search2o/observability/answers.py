"""Following an answer as the API sends it: its timings for the metrics, its spans for traces.

:class:`AnswerObserver` reads the Server-Sent Event frames of a ``POST /v1/chat`` response as
they leave the server (WHATWG HTML, "Server-sent events": ``event:`` and ``data:`` lines, a
blank line ends a frame). It needs no hook in the chat service or the engines: what it sees is
what the client sees.

* ``conversation`` (first): the run's id, and whether an agent answers (``kind`` ``agent``)
  or a turn (``turn``); with tracing, a ``chat.run`` span starts.
* ``tool_call``: a ``retrieval`` span starts (the tool's name as an attribute, never its
  query) and ends at the next event that is not a tool call (the results came back).
* ``delta``: the first one is the time to first token; a ``model`` span runs from the end of
  retrieval (or the start) to the answer's last event.
* ``done`` / ``error`` (last): the answer's time; a turn's ``timings`` (``model_ms``,
  ``tools_ms``) go to the metrics and onto the ``chat.run`` span.

Only the ``data`` of ``conversation``, ``tool_call`` and ``done`` frames is parsed, and only
ids, names and numbers are kept from it: never text, queries or titles. A frame larger than
``_MAX_FRAME`` bytes is skipped (its events are not observed).
"""

from __future__ import annotations

import json
import time
from typing import Any

from search2o.observability.metrics import Metrics

__all__ = ["AnswerObserver"]

_MAX_FRAME = 4 * 1024 * 1024
_PARSED = frozenset({"conversation", "tool_call", "done"})


class AnswerObserver:
    """Observe one answer's event stream (see the module docstring).

    Args:
        metrics: where timings go.
        started: ``time.perf_counter()`` when the request arrived.
        tracer: an OpenTelemetry tracer, or ``None`` without tracing.
        parent: the OpenTelemetry context of the request's span (with ``tracer``).

    """

    def __init__(
        self, metrics: Metrics, started: float, tracer: Any = None, parent: Any = None
    ) -> None:
        self._metrics = metrics
        self._started = started
        self._tracer = tracer
        self._parent = parent
        self._buffer = b""
        self._skipping = False
        self.run_id: str | None = None
        self.kind = "turn"
        self._first_token: float | None = None
        self._ended = False
        self._run_span: Any = None
        self._retrieval: Any = None
        self._model: Any = None

    def feed(self, chunk: bytes) -> None:
        """Read the next bytes of the response body."""
        self._buffer += chunk
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                if len(self._buffer) > _MAX_FRAME:
                    self._buffer, self._skipping = b"", True
                return
            frame, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
            if self._skipping:  # the tail of a frame too large to read
                self._skipping = False
                continue
            self._frame(frame)

    def feed_json(self, body: bytes) -> None:
        """Read a ``"stream": false`` answer (one JSON body): its timings only."""
        try:
            data = json.loads(body)
        except ValueError:
            return
        if isinstance(data, dict):
            self.run_id = _text(data.get("run_id"))
            self.kind = "agent" if data.get("agent") else "turn"
            self._end(data.get("timings"))

    def close(self) -> None:
        """End what is still open (the client left, or the stream stopped early)."""
        for span in (self._retrieval, self._model, self._run_span):
            if span is not None:
                span.end()
        self._retrieval = self._model = self._run_span = None

    # --- frames -----------------------------------------------------------------------------

    def _frame(self, frame: bytes) -> None:
        kind, data = "", b""
        for line in frame.split(b"\n"):
            if line.startswith(b"event:"):
                kind = line[6:].strip().decode("ascii", "replace")
            elif line.startswith(b"data:"):
                data = line[5:].strip()
        if not kind:
            return  # a comment (heartbeat)
        payload: dict[str, Any] = {}
        if kind in _PARSED:
            try:
                parsed = json.loads(data)
            except ValueError:
                parsed = None
            payload = parsed if isinstance(parsed, dict) else {}
        now = time.perf_counter()
        if kind != "tool_call" and self._retrieval is not None:
            self._retrieval.end()
            self._retrieval = None
        if kind == "conversation":
            self.run_id = _text(payload.get("run_id"))
            self.kind = "agent" if payload.get("agent") else "turn"
            self._run_span = self._span("chat.run", {"search2o.answer_kind": self.kind})
            if self._run_span is not None and self.run_id:
                self._run_span.set_attribute("search2o.run_id", self.run_id)
        elif kind == "tool_call":
            if self._retrieval is None:
                name = _text(payload.get("name")) or "tool"
                self._retrieval = self._span("retrieval", {"search2o.tool": name[:64]})
        elif kind == "delta":
            if self._first_token is None:
                self._first_token = now - self._started
                if self._model is not None:
                    self._model.add_event("first_token")
        elif kind in ("done", "error"):
            self._end(payload.get("timings") if kind == "done" else None, error=kind == "error")
            return
        if self._model is None and self._run_span is not None and kind not in ("tool_call",):
            self._model = self._span("model", {})
            if kind == "delta":
                self._model.add_event("first_token")

    def _end(self, timings: Any, *, error: bool = False) -> None:
        if self._ended:
            return
        self._ended = True
        numbers = _numbers(timings)
        self._metrics.observe_answer(
            self.kind,
            first_token_s=self._first_token,
            answer_s=time.perf_counter() - self._started,
            timings=numbers,
        )
        if self._run_span is not None:
            for key, value in numbers.items():
                self._run_span.set_attribute(f"search2o.timings.{key}", value)
            if error:
                from opentelemetry.trace import Status, StatusCode

                self._run_span.set_status(Status(StatusCode.ERROR))
        self.close()

    def _span(self, name: str, attributes: dict[str, str]) -> Any:
        if self._tracer is None:
            return None
        from opentelemetry import trace

        parent = self._parent
        if self._run_span is not None:
            parent = trace.set_span_in_context(self._run_span, self._parent)
        return self._tracer.start_span(name, context=parent, attributes=attributes)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _numbers(timings: Any) -> dict[str, float]:
    """Return the numeric entries of a ``timings`` object (milliseconds), nothing else."""
    if not isinstance(timings, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in timings.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
