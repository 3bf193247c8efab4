"""A fanned-out sync across real ``search2o worker`` processes, with an embedder of fixed latency.

What ``tests/connectors/test_scaleout.py`` and ``bench/scaleout.py`` share. The embedder is
:class:`FakeEmbeddings`, an OpenAI-compatible ``POST /v1/embeddings`` on loopback (OpenAI API
reference, "Create embeddings": ``input`` a string or a list, ``dimensions``,
``encoding_format`` ``float`` or ``base64`` of little-endian float32; answers ``{"object":
"list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}``) that
waits ``latency_s`` per request, as a remote model server does, and counts how often each text
was embedded. :func:`run_sync` starts ``workers`` worker processes on one PostgreSQL database
(queue included), adds a folder source, queues its sync and times it until the sync job ends,
optionally killing one worker (SIGKILL) once a share of the documents is in.
Nothing here imports pytest, so the bench can use it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from search2o.config import Settings
from search2o.connectors.jobs import SYNC, sync_payload
from search2o.connectors.wiring import sources_of
from search2o.runtime import Runtime
from search2o.storage.models import Chunk, Document
from tests.ops.processes import kill, process_env, start, stop

DIMENSION = 64


def fake_vector(text: str) -> list[float]:
    """A deterministic vector of ``text`` (bag of hashed words), so search still ranks."""
    out = [0.0] * DIMENSION
    for word in text.lower().split():
        out[int(hashlib.sha1(word.encode()).hexdigest(), 16) % DIMENSION] += 1.0
    return out


class FakeEmbeddings:
    """OpenAI-compatible embeddings on loopback with a fixed latency per request."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.counts: Counter[str] = Counter()
        self.requests = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
                time.sleep(owner.latency_s)
                with owner._lock:
                    owner.requests += 1
                    owner.counts.update(hashlib.sha256(t.encode()).hexdigest() for t in texts)
                data = []
                for index, text in enumerate(texts):
                    vector: Any = fake_vector(text)
                    if body.get("encoding_format") == "base64":
                        vector = base64.b64encode(struct.pack(f"<{DIMENSION}f", *vector)).decode()
                    data.append({"object": "embedding", "index": index, "embedding": vector})
                usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
                raw = json.dumps(
                    {"object": "list", "data": data, "model": body["model"], "usage": usage}
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


class _Server(ThreadingHTTPServer):
    """Quiet about clients that went away (a killed worker's request)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def fake_embeddings(latency_s: float) -> Iterator[FakeEmbeddings]:
    """Serve :class:`FakeEmbeddings` in a thread for the block."""
    server = FakeEmbeddings(latency_s)
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


def settings_values(database_url: str, embeddings_url: str, batch_size: int) -> dict[str, Any]:
    """The settings every process of the run shares (the sections as nested dicts)."""
    return {
        "database_url": database_url,
        "embedding": {
            "provider": "openai",
            "base_url": embeddings_url,
            "model": "fake-embed",
            "api_key": "sk-fake",
            "dimensions": DIMENSION,
        },
        "connectors": {"fan_out": True, "batch_size": batch_size},
        "jobs": {
            "backend": "postgres",
            "lease_s": 5,
            "tick_s": 1,
            "sweep_interval_s": 1,
            "workers": 2,
        },
    }


def as_env(values: dict[str, Any], prefix: str = "SEARCH2O_") -> dict[str, str]:
    """Flatten nested settings into ``SEARCH2O_SECTION__FIELD`` environment variables."""
    env = {}
    for key, value in values.items():
        if isinstance(value, dict):
            env.update(as_env(value, f"{prefix}{key.upper()}__"))
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            env[f"{prefix}{key.upper()}"] = text
    return env


def write_folder(folder: Path, files: int) -> Path:
    """Write ``files`` Markdown files of distinct text (one or two chunks each)."""
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        (folder / f"policy{n:04}.md").write_text(
            f"# Policy {n}\n\nRule {n}: requests of kind {n} are answered within {n % 9 + 1} "
            f"days by team {n % 13}, and escalations go to desk {n * 7 % 101}.\n"
        )
    return folder


@dataclass
class Outcome:
    """One timed sync: what arrived, how fast, and how often texts went through the model."""

    workers: int
    documents: int
    chunks: int
    seconds: float
    embedded_texts: int
    texts_embedded_twice: int
    summary: str
    killed: bool

    @property
    def chunks_per_s(self) -> float:
        """Chunks stored per second of the sync."""
        return self.chunks / self.seconds if self.seconds > 0 else 0.0


def _count(runtime: Runtime, model: Any) -> int:
    with runtime.database.session() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def _ready(log: Path, within_s: float = 90) -> None:
    deadline = time.monotonic() + within_s
    while "thread(s) on the" not in (log.read_text() if log.exists() else ""):
        if time.monotonic() > deadline:
            raise AssertionError(f"a worker did not start within {within_s} s: {log}")
        time.sleep(0.2)


def run_sync(
    root: Path,
    database_url: str,
    *,
    workers: int,
    files: int,
    latency_s: float,
    batch_size: int = 4,
    kill_at_share: float | None = None,
    within_s: float = 600,
) -> Outcome:
    """Sync a folder of ``files`` documents with ``workers`` worker processes; see the module.

    Raises:
        AssertionError: a worker did not start, or the sync did not end within ``within_s``.

    """
    folder = write_folder(root / "docs", files)
    with fake_embeddings(latency_s) as server:
        values = settings_values(database_url, server.url, batch_size)
        runtime = Runtime(Settings(data_dir=root / "data", **values))
        procs = []
        try:
            sources_of(runtime).add("policies", "folder", {"path": str(folder), "public": True})
            env = process_env(root / "data", database_url, **as_env(values))
            logs = [root / f"worker{i}.log" for i in range(workers)]
            procs = [start(env, log, "worker") for log in logs]
            for log in logs:
                _ready(log)
            started = time.perf_counter()
            job = runtime.jobs.enqueue(SYNC, sync_payload("policies"))
            killed = False
            deadline = time.monotonic() + within_s
            while not (info := runtime.jobs.get(job.id)).finished:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the sync did not end within {within_s} s: {info}")
                share = _count(runtime, Document) / files
                if kill_at_share is not None and not killed and share >= kill_at_share:
                    kill(procs[0])
                    killed = True
                time.sleep(0.05)
            seconds = time.perf_counter() - started
            result = info.result if isinstance(info.result, dict) else {}
            return Outcome(
                workers,
                _count(runtime, Document),
                _count(runtime, Chunk),
                seconds,
                sum(server.counts.values()),
                sum(1 for n in server.counts.values() if n > 1),
                str(result.get("summary") or result),
                killed,
            )
        finally:
            for proc in procs:
                stop(proc, timeout_s=60)
            runtime.close()
