"""Memory of the server through one large upload: baseline, peak, and what it gives back.

A real ``search2o serve`` process (the embedded default: SQLite in a fresh data folder, the
built-in all-MiniLM-L6-v2 model, jobs run in the server process) is started on loopback. One
small upload loads the model and warms every path; the resident set size (RSS, from
``/proc/<pid>/status`` ``VmRSS``) then is the **baseline**. A generated DOCX of ``--paragraphs``
numbered paragraphs (distinct texts, so every chunk goes through the model: one chunk each, 2,400
at the default; the 15.6 MiB export that showed the problem had 2,941) is uploaded with
``?wait=``; the kernel's high-water mark of the resident set, reset at the baseline
(``clear_refs`` 5, ``VmHWM``; proc(5)), is the **peak**, and RSS ``--settle`` seconds after the
job ended is **after**. ``--database postgres`` runs the same on PostgreSQL (pgserver).

Targets: after - baseline <= 100 MB; peak - baseline
within the bound docs/operations.md states for one document (``--peak-bound``, MB).

Run from the repository root::

    .venv/bin/python bench/ingest_memory.py                       # about 4 minutes on 2 cores
    .venv/bin/python bench/ingest_memory.py --paragraphs 300 --settle 5
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import (  # noqa: E402
    console,
    finish,
    log,
    pg_url,
    postgres_server,
    temporary_pg_database,
    verdict,
)
from sync import WORDS  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.ops.processes import process_env, start, stop, wait_ready  # noqa: E402

MB = 1024 * 1024


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Return ``field`` of /proc/<pid>/status in MiB: ``VmRSS`` now, ``VmHWM`` its peak."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


def make_docx(paragraphs: int, seed: int = 7) -> bytes:
    """Return a DOCX of ``paragraphs`` numbered paragraphs (~150 words) under headings."""
    import docx

    rng = random.Random(seed)
    document = docx.Document()
    document.add_heading("Company handbook (generated)", level=0)
    for number in range(paragraphs):
        if number % 20 == 0:
            document.add_heading(f"Section {number // 20 + 1}", level=1)
        words = " ".join(rng.choice(WORDS) for _ in range(150))
        document.add_paragraph(f"Rule {number}: {words}.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def upload(base: str, name: str, data: bytes) -> list[dict[str, Any]]:
    """Upload one file, follow its job to the end and return its outcomes."""
    response = httpx.post(
        f"{base}/v1/documents", params={"wait": 300}, files={"files": (name, data)}, timeout=400
    )
    while response.status_code == 202:  # not done within the longest wait: follow the job
        job = response.json()["job"]
        if job["state"] == "failed":
            raise SystemExit(f"upload of {name}: job {job['state']}: {job}")
        time.sleep(1)
        response = httpx.get(f"{base}/v1/jobs/{job['id']}", timeout=30)
        if response.status_code == 200:
            job = response.json()
            if job["state"] == "done":
                outcomes: list[dict[str, Any]] = job["result"]["outcomes"]
                return outcomes
            response = httpx.Response(202, json={"job": job})
    if response.status_code != 201:
        raise SystemExit(f"upload of {name} answered {response.status_code}: {response.text}")
    outcomes = response.json()
    return outcomes


def measure(args: argparse.Namespace, database_url: str | None, folder: Path) -> dict[str, float]:
    """Run one server through the warm-up and the large upload; return the figures in MiB."""
    data_dir = folder / "data"
    url = database_url or f"sqlite:///{data_dir / 'search2o.db'}"
    env = process_env(data_dir, url, SEARCH2O_AUTH_MODE="local", SEARCH2O_LOG_FORMAT="text")
    if args.batch_size:
        env["SEARCH2O_EMBEDDING__BATCH_SIZE"] = str(args.batch_size)
    port = free_port()
    proc = start(env, folder / "serve.log", "serve", "--host", "127.0.0.1", "--port", str(port))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, within_s=180)
        upload(base, "warm.docx", make_docx(60, seed=1))
        time.sleep(2)
        baseline = rss_mb(proc.pid)
        data = make_docx(args.paragraphs)
        log(f"DOCX of {args.paragraphs} paragraphs: {len(data) / MB:.1f} MiB; uploading")
        started = time.perf_counter()
        # From here VmHWM is the peak of this upload alone (proc(5), /proc/<pid>/clear_refs).
        Path(f"/proc/{proc.pid}/clear_refs").write_text("5")
        outcomes = upload(base, "handbook.docx", data)
        peak = rss_mb(proc.pid, "VmHWM")
        took = time.perf_counter() - started
        outcome = outcomes[0]
        log(f"ingested in {took:.0f} s: {outcome.get('status')}, {outcome.get('chunks')} chunks")
        time.sleep(args.settle)
        after = rss_mb(proc.pid)
    finally:
        stop(proc, timeout_s=120)
    return {
        "baseline": baseline,
        "peak": peak,
        "after": after,
        "chunks": float(outcomes[0].get("chunks") or 0),
        "seconds": took,
        "docx_mib": len(data) / MB,
    }


def main() -> int:
    """Parse the arguments, run each database and print the table with each target's verdict."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paragraphs", type=int, default=2400, help="paragraphs of the DOCX")
    parser.add_argument("--settle", type=float, default=60, help="seconds after the job ended")
    parser.add_argument("--database", choices=["sqlite", "postgres"], action="append")
    parser.add_argument("--batch-size", type=int, help="embedding.batch_size (default: its own)")
    parser.add_argument("--peak-bound", type=float, default=400, help="MB over the baseline")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = []
    for database in args.database or ["sqlite"]:
        with ExitStack() as stack:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            url = None
            if database == "postgres":
                server = stack.enter_context(postgres_server(True))
                url = pg_url(server, stack.enter_context(temporary_pg_database(server, "mem")))
            log(f"{database}: starting the server")
            rows.append((database, measure(args, url, folder)))
    table = Table(title="Server RSS through one large upload (MiB)")
    for column in (
        "database",
        "DOCX MiB",
        "chunks",
        "ingest s",
        "baseline",
        "peak",
        "+peak",
        "after",
        "+after",
        "+after <= 100",
        f"+peak <= {args.peak_bound:.0f}",
    ):
        table.add_column(column, justify="right")
    for database, r in rows:
        peak_ok = r["peak"] - r["baseline"] <= args.peak_bound
        after_ok = r["after"] - r["baseline"] <= 100
        table.add_row(
            database,
            f"{r['docx_mib']:.1f}",
            f"{r['chunks']:.0f}",
            f"{r['seconds']:.0f}",
            f"{r['baseline']:.0f}",
            f"{r['peak']:.0f}",
            f"{r['peak'] - r['baseline']:+.0f}",
            f"{r['after']:.0f}",
            f"{r['after'] - r['baseline']:+.0f}",
            verdict(after_ok),
            verdict(peak_ok),
        )
    console.print(table)
    finish(started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
