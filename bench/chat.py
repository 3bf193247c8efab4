"""Chat turn latency of the Query Engine with the built-in model, in process and over HTTP.

Ingests ``../shared/data/handbook`` into a temporary SQLite database, then plays the
conversations of ``../shared/data/handbook-eval/public.jsonl`` over and over (each item a new
conversation, turn by turn) until ``--turns`` turns (default 200) have run, twice:

* **in process**: ``TurnEngine.run`` directly; time to first token (first ``delta`` event) and
  total turn time from the caller's clock;
* **HTTP + SSE**: ``POST /v1/chat`` against a real uvicorn server on loopback, reading the event
  stream with httpx; time to first ``delta`` frame and to the ``done`` frame.

It also prints the engine's own overhead per turn, from each answer's trace: total time minus
the chat model's time (deciding, writing the query, scoring sentences) and the tools' time
(query embedding + hybrid search). That is storing the conversation and messages, loading the
history, checking the toolset, numbering citations, filtering markers and writing the trace.
Target: overhead p50 under 20 ms.

Run from the repository root::

    .venv/bin/python bench/chat.py
    .venv/bin/python bench/chat.py --turns 50 --skip-http
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn
from rich.console import Console
from rich.table import Table

from search2o.api.app import create_app
from search2o.config import load_settings
from search2o.knowledge.access import AccessList
from search2o.runtime import Runtime

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
console = Console()


def _conversations() -> list[list[str]]:
    lines = (DATA / "handbook-eval" / "public.jsonl").read_text().splitlines()
    return [[turn["user"] for turn in json.loads(line)["turns"]] for line in lines]


def _schedule(turns: int) -> list[list[str]]:
    """Return conversations (lists of messages) totalling exactly ``turns`` messages."""
    plan: list[list[str]] = []
    left = turns
    while left > 0:
        for conversation in _conversations():
            if left <= 0:
                break
            plan.append(conversation[:left])
            left -= len(plan[-1])
    return plan


def _quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def in_process(runtime: Runtime, turns: int) -> dict[str, list[float]]:
    """Run the schedule through the engine; return per-turn timings in milliseconds."""
    principal = runtime.local_principal()
    result: dict[str, list[float]] = {
        "first": [],
        "total": [],
        "engine": [],
        "model": [],
        "tools": [],
    }
    for conversation in _schedule(turns):
        conversation_id = None
        for message in conversation:
            started = time.perf_counter()
            first = None
            for event in runtime.turns.run_sync(
                runtime.turns.prepare(principal, message, conversation_id)
            ):
                if event.kind == "delta" and first is None:
                    first = time.perf_counter() - started
                elif event.kind == "conversation":
                    conversation_id = event.data["conversation_id"]
                elif event.kind == "done":
                    timings = event.data["timings"]
            result["total"].append((time.perf_counter() - started) * 1000)
            result["first"].append((first or 0.0) * 1000)
            result["engine"].append(timings["engine_ms"])
            result["model"].append(timings["model_ms"])
            result["tools"].append(timings["tools_ms"])
    return result


def over_http(runtime: Runtime, turns: int) -> dict[str, list[float]]:
    """Run the schedule through ``POST /v1/chat`` (SSE) on loopback; timings in ms."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = create_app(runtime=runtime)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    result: dict[str, list[float]] = {"first": [], "total": []}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            for conversation in _schedule(turns):
                conversation_id = None
                for message in conversation:
                    body = {"message": message, "conversation_id": conversation_id}
                    started = time.perf_counter()
                    first = None
                    with client.stream("POST", "/v1/chat", json=body) as response:
                        event = ""
                        for line in response.iter_lines():
                            if line.startswith("event: "):
                                event = line[7:]
                            elif line.startswith("data: "):
                                data = json.loads(line[6:])
                                if event == "conversation":
                                    conversation_id = data["conversation_id"]
                                elif event == "delta" and first is None:
                                    first = time.perf_counter() - started
                    result["total"].append((time.perf_counter() - started) * 1000)
                    result["first"].append((first or 0.0) * 1000)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    return result


def main() -> int:
    """Run the benchmark; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        settings = load_settings(data_dir=Path(data_dir), log_level="WARNING")
        with Runtime(settings) as runtime:
            runtime.knowledge.ingest_paths([DATA / "handbook"], AccessList())
            runtime.turns.ask(runtime.local_principal(), "warm-up question about vacation")
            local = in_process(runtime, args.turns)
            http = None if args.skip_http else over_http(runtime, args.turns)
    table = Table(title=f"chat turns, built-in model, SQLite, {args.turns} turns (ms)")
    for column in ("measure", "p50", "p95", "target"):
        table.add_column(column)
    rows = [
        ("in process: first token", local["first"], ""),
        ("in process: whole turn", local["total"], ""),
        ("  of which chat model", local["model"], ""),
        ("  of which tools (search)", local["tools"], ""),
        ("  of which engine overhead", local["engine"], "p50 < 20"),
    ]
    if http is not None:
        rows += [
            ("HTTP SSE: first delta", http["first"], ""),
            ("HTTP SSE: whole turn", http["total"], ""),
        ]
    for name, values, target in rows:
        p50, p95 = _quantiles(values)
        table.add_row(name, f"{p50:.1f}", f"{p95:.1f}", target)
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
