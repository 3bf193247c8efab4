"""Helpers of the operations tests: a Prometheus scrape, a chat's events, a slow model.

The real processes (``search2o serve``, ``search2o worker``, Redis) are in
:mod:`tests.ops.processes`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.ops.processes import redis_url_fixture


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse a scrape (Prometheus text format) into ``{(name, sorted labels): value}``."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(text: str, name: str, **labels: str) -> float:
    """Return one sample of a scrape, 0 when it is absent (a counter not yet incremented)."""
    return samples(text).get((name, tuple(sorted(labels.items()))), 0.0)


def streamed_chat(client: httpx.Client, message: str, **headers: str) -> list[str]:
    """Send a streamed chat turn; return the event names of its answer, in order."""
    kinds: list[str] = []
    with client.stream(
        "POST", "/v1/chat", json={"message": message, "stream": True}, headers=headers
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event:"):
                kinds.append(line[6:].strip())
    return kinds


# --- a slow model endpoint ----------------------------------------------------------------


class SlowModel(ThreadingHTTPServer):
    """An OpenAI-compatible Chat Completions endpoint on loopback that answers slowly.

    A streamed request gets ``pieces`` text deltas, ``delay_s`` apart (OpenAI's streaming wire
    format: ``data: <chunk JSON>`` events, then ``data: [DONE]``); any other request (a
    title) gets one whole completion at once. ``url`` is its ``base_url``.
    """

    def __init__(self, pieces: list[str], delay_s: float) -> None:
        self.pieces = pieces
        self.delay_s = delay_s
        super().__init__(("127.0.0.1", 0), _SlowHandler)
        self.url = f"http://127.0.0.1:{self.server_port}/v1"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def env(self) -> dict[str, str]:
        """The settings that make it the default chat model of a search2o process."""
        return {
            "SEARCH2O_CHAT__PROFILES__DEFAULT__PROVIDER": "openai",
            "SEARCH2O_CHAT__PROFILES__DEFAULT__MODEL": "slow",
            "SEARCH2O_CHAT__PROFILES__DEFAULT__BASE_URL": self.url,
            "SEARCH2O_CHAT__PROFILES__DEFAULT__MAX_RETRIES": "0",
        }

    def close(self) -> None:
        """Stop serving."""
        self.shutdown()
        self.server_close()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-slow",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "slow",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


class _SlowHandler(BaseHTTPRequestHandler):
    server: SlowModel

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if not request.get("stream"):
            whole = {
                "id": "chatcmpl-title",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": "slow",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "A title"},
                        "finish_reason": "stop",
                    }
                ],
            }
            raw = json.dumps(whole).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        try:
            self.wfile.write(_chunk({"role": "assistant", "content": ""}))
            for piece in self.server.pieces:
                time.sleep(self.server.delay_s)
                self.wfile.write(_chunk({"content": piece}))
                self.wfile.flush()
            self.wfile.write(_chunk({}, "stop") + b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller went away (stopped mid-answer)
        self.close_connection = True


redis_url = redis_url_fixture("the scale and fault tests")


@pytest.fixture
def own_postgres() -> Iterator[Any]:
    """A PostgreSQL server of this test's own (pgserver) that the test may stop and restart.

    The session's server (``pg_server``) is left alone: other tests' databases live there.
    """
    import pgserver

    folder = tempfile.mkdtemp(prefix="search2o-pg-down-")
    server = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        yield server
    finally:
        server.ensure_postgres_running()  # cleanup stops a running server only
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def stop_postgres(server: Any) -> None:
    """Stop ``server`` (pgserver) the way an operator would: ``pg_ctl stop -m fast``."""
    from pgserver._commands import pg_ctl

    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user, timeout=60)
