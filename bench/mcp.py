"""Latency of the MCP ``search`` tool over Streamable HTTP, excluding the query embedding.

Ingests ``../shared/data/handbook`` into a temporary SQLite database (token mode, one user
with an API token), serves the API (``/mcp`` included) with uvicorn on loopback, and calls
``search`` with the SDK's own client (``mcp.Client`` over ``streamable_http_client``, one
connection per protocol era) for the questions of ``../shared/data/handbook-eval/public.jsonl``
over and over until ``--queries`` calls have run, in each era:

* **2026-07-28**: the per-request envelope (each call one stateless POST);
* **handshake**: the ``initialize`` era (stateless transport, JSON responses).

The query embedding is taken out: the built-in model's vectors are memoised and every
question is embedded once before timing (that one-off time is printed too), so a timed call
is the HTTP round trip, authentication (one token lookup), the hybrid search under access
rights, and the tool's JSON. For scale the table also shows ``KnowledgeStore.search`` in
process on the same memo. Target: ``search`` p50 ≤ 30 ms over HTTP on SQLite.

Run from the repository root::

    .venv/bin/python bench/mcp.py
    .venv/bin/python bench/mcp.py --queries 20
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# Run as ``python bench/mcp.py``, this folder is first on sys.path and ``import mcp`` would
# find this script; the SDK is imported with the folder taken off, benchkit with it put back.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import anyio  # noqa: E402
import httpx2  # noqa: E402
import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
import uvicorn  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from rich.table import Table  # noqa: E402

from mcp import Client  # noqa: E402
from search2o import accounts  # noqa: E402
from search2o.api.app import create_app  # noqa: E402
from search2o.config import load_settings  # noqa: E402
from search2o.knowledge.access import AccessList  # noqa: E402
from search2o.providers.embeddings import BuiltinEmbedder  # noqa: E402
from search2o.runtime import Runtime  # noqa: E402

sys.path.insert(0, str(_HERE))
from benchkit import console, finish, log, percentile, verdict  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
TARGET_P50_MS = 30.0
ERAS = {"2026-07-28": "2026-07-28", "handshake (2025-11-25)": "legacy"}


class MemoEmbedder(BuiltinEmbedder):
    """The built-in model with a memo: a text is embedded once, then answered from the memo."""

    def __init__(self) -> None:
        super().__init__()
        self.memo: dict[str, npt.NDArray[np.float32]] = {}

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if missing:
            for text, vector in zip(missing, super().embed(missing), strict=True):
                self.memo[text] = vector
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([self.memo[t] for t in texts])


def questions() -> list[str]:
    """Every turn of the handbook evaluation meant to be searched."""
    found = []
    for line in (DATA / "handbook-eval" / "public.jsonl").read_text().splitlines():
        if line.strip():
            found += [t["user"] for t in json.loads(line)["turns"] if t["expect"] != "no_search"]
    return found


def serve(runtime: Runtime) -> tuple[uvicorn.Server, threading.Thread, int]:
    """Start the API on a free loopback port; return the server, its thread and the port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    app = create_app(runtime.settings, runtime=runtime)
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", log_config=None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise SystemExit("the API server died while starting")
        time.sleep(0.02)
    return server, thread, port


async def time_search(url: str, token: str, mode: str, plan: list[str]) -> list[float]:
    """Call ``search`` for each of ``plan`` over one connection; milliseconds per call."""
    timings: list[float] = []
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        await client.call_tool("search", {"query": plan[0]})  # connection warm-up
        for query in plan:
            started = time.perf_counter()
            result = await client.call_tool("search", {"query": query})
            timings.append((time.perf_counter() - started) * 1000)
            if result.is_error or not result.structured_content:
                raise SystemExit(f"search failed for {query!r}: {result.content}")
    return timings


def main() -> int:
    """Run the benchmark; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=200, help="timed calls per era")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    started = time.perf_counter()
    asked = questions()
    plan = [asked[i % len(asked)] for i in range(max(1, args.queries))]
    with tempfile.TemporaryDirectory() as data_dir:
        settings = load_settings(data_dir=Path(data_dir), log_level="WARNING", auth_mode="token")
        embedder = MemoEmbedder()
        with Runtime(settings, embedder=embedder) as runtime:
            log("ingesting the handbook")
            summary = runtime.knowledge.ingest_paths([DATA / "handbook"], AccessList())
            with runtime.database.session() as session:
                user = accounts.create_user(session, "bench@example.com")
                token = accounts.issue_token(session, user, "bench")
            embed_started = time.perf_counter()
            embedder.embed(sorted(set(plan)))
            embed_ms = (time.perf_counter() - embed_started) * 1000 / len(set(plan))
            principal = runtime.principal_for("bench@example.com")
            local: list[float] = []
            for query in plan:
                t0 = time.perf_counter()
                runtime.knowledge.search(principal, query, settings.mcp.search_k)
                local.append((time.perf_counter() - t0) * 1000)
            server, thread, port = serve(runtime)
            try:
                url = f"http://127.0.0.1:{port}/mcp"
                eras: dict[str, list[float]] = {}
                for name, mode in ERAS.items():
                    log(f"{len(plan)} search calls over HTTP, {name}")
                    eras[name] = anyio.run(time_search, url, token, mode, plan)
            finally:
                server.should_exit = True
                thread.join(timeout=30)
    table = Table(
        title=f"MCP search, handbook ({summary.chunks} chunks), SQLite, "
        f"{len(plan)} calls each (ms, query embedding excluded)"
    )
    for column in ("measure", "p50", "p95", "target", "verdict"):
        table.add_column(column)
    rows: list[tuple[str, list[float], bool]] = [
        (f"search over HTTP, {name}", values, True) for name, values in eras.items()
    ]
    rows.append(("KnowledgeStore.search in process", local, False))
    payload: dict[str, Any] = {"queries": len(plan), "embed_ms_per_query": embed_ms}
    for name, values, targeted in rows:
        p50, p95 = percentile(values, 50), percentile(values, 95)
        target = f"p50 ≤ {TARGET_P50_MS:.0f}" if targeted else ""
        table.add_row(
            name,
            f"{p50:.1f}",
            f"{p95:.1f}",
            target,
            verdict(p50 <= TARGET_P50_MS) if targeted else "",
        )
        payload[name] = {"p50_ms": p50, "p95_ms": p95}
    console.print(table)
    console.print(f"query embedding (excluded above): {embed_ms:.1f} ms per question")
    finish(started, args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
