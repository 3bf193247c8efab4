"""A source synced by 1 and by 2 ``search2o worker`` processes, and with one killed halfway.

``connectors.fan_out`` turns a sync's batches into ``sources.batch`` jobs that every worker
takes (docs/connectors.md, "Scaling out a sync"). Each run here starts its workers (2 threads
each) on a fresh PostgreSQL database (pgserver; the job queue on it too), adds a folder source
of ``--files`` Markdown files, queues its ``sources.sync`` job and times it until the job ends.
The embedder is an OpenAI-compatible fake on loopback that answers each request after
``--latency-ms`` (a remote model server's latency; tests/connectors/fleet.py), so the rate
measures how the work spreads, not this machine's cores.

Rows: 1 worker, 2 workers, 2 workers with one killed (SIGKILL) once ``--kill-at`` of the
documents are in. Per row: documents and chunks stored, seconds, chunks/s, texts embedded and
texts embedded more than once. Targets (issue "Ingestion throughput", item 4): 2 workers at
least 1.8x the rate of 1 with no text embedded twice; the killed run stores every document.

Run from the repository root (needs the ``bench`` or ``dev`` extra for pgserver)::

    .venv/bin/python bench/scaleout.py                       # about 2 minutes
    .venv/bin/python bench/scaleout.py --files 40 --latency-ms 50
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from benchkit import (  # noqa: E402
    console,
    finish,
    log,
    pg_url,
    postgres_server,
    temporary_pg_database,
    verdict,
)
from tests.connectors.fleet import Outcome, run_sync  # noqa: E402

TARGET_SCALE = 1.8


def parse_args() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=240, help="documents in the source")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="per embedding request")
    parser.add_argument("--batch-size", type=int, default=8, help="connectors.batch_size")
    parser.add_argument("--kill-at", type=float, default=0.3, help="share stored before the kill")
    args = parser.parse_args()
    if args.files < 2 or args.latency_ms < 0 or not 0 < args.kill_at < 1:
        parser.error("--files must be >= 2, --latency-ms >= 0 and --kill-at within (0, 1)")
    return args


def main() -> None:
    """Run the three rows and print the table and the targets."""
    args = parse_args()
    started = time.perf_counter()
    runs = [("1 worker", 1, None), ("2 workers", 2, None), ("2 workers, 1 killed", 2, args.kill_at)]
    outcomes: list[tuple[str, Outcome]] = []
    with postgres_server(True) as server, tempfile.TemporaryDirectory() as scratch:
        for label, workers, kill_at in runs:
            log(f"{label}: syncing {args.files} documents")
            name = label.replace(" ", "_").replace(",", "")
            with temporary_pg_database(server, name) as database:
                outcome = run_sync(
                    Path(scratch) / label.replace(" ", "-").replace(",", ""),
                    pg_url(server, database),
                    workers=workers,
                    files=args.files,
                    latency_s=args.latency_ms / 1000,
                    batch_size=args.batch_size,
                    kill_at_share=kill_at,
                )
            outcomes.append((label, outcome))
    table = Table(
        title=f"A fanned-out sync of {args.files} documents, embedder latency "
        f"{args.latency_ms:g} ms per request"
    )
    for column in ("run", "documents", "chunks", "seconds", "chunks/s", "embedded", "twice"):
        table.add_column(column, justify="right")
    for label, o in outcomes:
        table.add_row(
            label,
            str(o.documents),
            str(o.chunks),
            f"{o.seconds:.1f}",
            f"{o.chunks_per_s:.1f}",
            str(o.embedded_texts),
            str(o.texts_embedded_twice),
        )
    console.print(table)
    one, two, killed = (o for _, o in outcomes)
    scale = two.chunks_per_s / one.chunks_per_s if one.chunks_per_s else 0.0
    ok = scale >= TARGET_SCALE and two.texts_embedded_twice == 0
    console.print(
        f"2 workers vs 1: {scale:.2f}x the rate (target >= {TARGET_SCALE}x, no text "
        f"embedded twice): {verdict(ok)}"
    )
    whole = killed.documents == args.files and killed.summary.endswith(" 0 failed")
    console.print(
        f"one worker killed: {killed.documents}/{args.files} documents stored, sync "
        f"'{killed.summary}': {verdict(whole)}"
    )
    finish(started)


if __name__ == "__main__":
    main()
