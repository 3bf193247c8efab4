"""Helpers of the operations tests: a Prometheus scrape, a chat's events, real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families


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


# --- real processes -------------------------------------------------------------------------


def process_env(data_dir: Path, database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a search2o process: this one's, less any ``SEARCH2O_*``, plus ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEARCH2O_", "PROMETHEUS_"))}
    if env.get("PYTHONPATH"):  # the sources under test, wherever the process starts
        env["PYTHONPATH"] = os.pathsep.join(
            str(Path(part).resolve()) for part in env["PYTHONPATH"].split(os.pathsep)
        )
    env.update(
        SEARCH2O_DATA_DIR=str(data_dir),
        SEARCH2O_DATABASE_URL=database_url,
        SEARCH2O_AUTH_MODE="token",
        SEARCH2O_LOG_FORMAT="json",
        HF_HUB_OFFLINE="1",
        NO_COLOR="1",
    )
    env.update(extra)
    return env


def wait_ready(base_url: str, within_s: float = 90) -> httpx.Response:
    """Poll ``/v1/health/ready`` until it answers 200; fail after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    last: httpx.Response | str = "no answer"
    while time.monotonic() < deadline:
        try:
            last = httpx.get(f"{base_url}/v1/health/ready", timeout=5)
            if last.status_code == 200:
                return last
        except httpx.TransportError as exc:
            last = repr(exc)
        time.sleep(0.25)
    raise AssertionError(f"{base_url} not ready within {within_s} s: {last!r}")


def children(pid: int) -> list[int]:
    """Return the ids of the live processes whose parent is ``pid`` (read from ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after it.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def stop(proc: subprocess.Popen[str], timeout_s: float = 60) -> int:
    """SIGTERM ``proc`` and return its exit status (killed and failed after ``timeout_s``)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"process {proc.pid} did not stop within {timeout_s} s") from None


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
