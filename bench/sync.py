"""Sync benchmark: a generated folder source, synced first, then again unchanged and 1% changed.

For each of two sizes (``--files`` N, default 2,000, and N/10) a child process generates N
Markdown files (3-5 paragraphs each, deterministic), adds them as a ``folder`` source on a fresh
SQLite data folder (the embedded default, the built-in all-MiniLM-L6-v2 model) and measures:

* **first sync**: documents/s and chunks/s (listing, reading, chunking, embedding, writing);
* **no-change resync**: its wall time as a share of the first (target <= 2%): nothing may be
  read, let alone embedded;
* **1% changed resync**: 1% of the files get one paragraph more; its time as a share of the
  first (target <= 5%);
* **one-paragraph edit**: the chunks embedded when one paragraph of one file changes (target
  <= 2);
* **peak RSS** of the child process (``ru_maxrss``), at both sizes: the larger run's peak must be
  within 1.2x the smaller's (memory stays bounded as the source grows).

The model is loaded before any timing. Run from the repository root::

    .venv/bin/python bench/sync.py                 # about 4 minutes on 2 cores
    .venv/bin/python bench/sync.py --files 200     # sizes 200 and 20
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import console, finish, log

WORDS = [
    "team",
    "room",
    "desk",
    "policy",
    "leave",
    "budget",
    "travel",
    "laptop",
    "badge",
    "parking",
    "office",
    "contract",
    "review",
    "release",
    "onboarding",
    "payroll",
    "benefit",
    "meeting",
    "report",
    "customer",
    "support",
    "vendor",
    "invoice",
    "audit",
    "security",
    "password",
    "access",
    "training",
    "manager",
    "holiday",
    "schedule",
    "remote",
    "equipment",
    "expense",
]


def paragraph(rng: random.Random, words: int) -> str:
    """One paragraph of ``words`` pseudo-words (deterministic under ``rng``)."""
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def generate(folder: Path, files: int) -> None:
    """Write ``files`` Markdown files under ``folder`` (ten per sub-folder)."""
    rng = random.Random(7)
    for number in range(files):
        sub = folder / f"team{number // 10:04d}"
        sub.mkdir(parents=True, exist_ok=True)
        body = "\n\n".join(paragraph(rng, rng.randint(25, 60)) for _ in range(rng.randint(3, 5)))
        (sub / f"page{number:05d}.md").write_text(f"# Page {number}\n\n{body}\n")


def child(files: int) -> dict[str, Any]:
    """Run the measurements for one size in this process; return them."""
    from search2o.config import Settings
    from search2o.connectors.wiring import sources_of, sync_engine
    from search2o.runtime import Runtime

    with tempfile.TemporaryDirectory(prefix="search2o-sync-bench-") as temp:
        root = Path(temp)
        folder = root / "wiki"
        generate(folder, files)
        runtime = Runtime(Settings(data_dir=root / "data"))
        try:
            runtime.embedder.embed(["warm-up"])  # the model's load is not the sync's
            sources_of(runtime).add("wiki", "folder", {"path": str(folder), "public": True})
            engine = sync_engine(runtime)

            def timed(**options: Any) -> tuple[float, Any]:
                started = time.perf_counter()
                report = engine.sync("wiki", **options)
                return time.perf_counter() - started, report

            first_s, first = timed()
            same_s, same = timed()
            pages = sorted(folder.rglob("*.md"))
            changed = pages[:: max(1, len(pages) // max(1, files // 100))][: max(1, files // 100)]
            rng = random.Random(11)
            for page in changed:
                with page.open("a") as handle:
                    handle.write("\n" + paragraph(rng, 40) + "\n")
            changed_s, changed_report = timed()
            with pages[-1].open("a") as handle:
                handle.write("\nA new paragraph about the quarterly badge audit.\n")
            _, edit = timed()
        finally:
            runtime.close()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "files": files,
        "first_s": first_s,
        "documents": first.counts.added,
        "chunks": first.counts.embedded,
        "same_s": same_s,
        "same": same.counts.line(),
        "same_fetched": same.counts.fetched,
        "changed": len(changed),
        "changed_s": changed_s,
        "changed_line": changed_report.counts.line(),
        "edit_embedded": edit.counts.embedded,
        "peak_mb": peak_kb / 1024,
    }


def run_size(files: int) -> dict[str, Any]:
    """Measure one size in a child process (so its peak RSS is its own)."""
    log(f"size {files}: generating, syncing ...")
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(files)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the {files}-file run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000, help="the larger size (default 2000)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return
    started = time.perf_counter()
    small_n = max(args.files // 10, 10)
    small, large = run_size(small_n), run_size(args.files)

    from rich.table import Table

    table = Table(title=f"Folder source sync ({small_n} and {args.files} files, SQLite)")
    table.add_column("measure")
    table.add_column(f"{small_n} files", justify="right")
    table.add_column(f"{args.files} files", justify="right")
    table.add_column("target")

    def both(key: Any) -> tuple[str, str]:
        return key(small), key(large)

    def share(run: dict[str, Any], key: str) -> str:
        return f"{100 * run[key] / run['first_s']:.2f}%"

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    table.add_row(
        "first sync documents/s", *both(lambda r: f"{r['documents'] / r['first_s']:.1f}"), ""
    )
    table.add_row("first sync chunks/s", *both(lambda r: f"{r['chunks'] / r['first_s']:.1f}"), "")
    table.add_row("first sync", *both(lambda r: f"{r['first_s']:.1f} s"), "")
    same_ok = large["same_s"] <= 0.02 * large["first_s"] and large["same_fetched"] == 0
    table.add_row(
        "no-change resync",
        share(small, "same_s"),
        share(large, "same_s"),
        f"<= 2% ({verdict(same_ok)})",
    )
    changed_ok = large["changed_s"] <= 0.05 * large["first_s"]
    table.add_row(
        "1% changed resync",
        share(small, "changed_s"),
        share(large, "changed_s"),
        f"<= 5% ({verdict(changed_ok)})",
    )
    edit_ok = max(small["edit_embedded"], large["edit_embedded"]) <= 2
    table.add_row(
        "chunks embedded by a one-paragraph edit",
        *both(lambda r: str(r["edit_embedded"])),
        f"<= 2 ({verdict(edit_ok)})",
    )
    rss_ok = large["peak_mb"] <= 1.2 * small["peak_mb"]
    table.add_row(
        "peak RSS",
        *both(lambda r: f"{r['peak_mb']:.0f} MB"),
        f"large <= 1.2x small ({verdict(rss_ok)})",
    )
    console.print(table)
    console.print(f"no-change resync: {large['same']}; 1% changed resync: {large['changed_line']}")
    finish(started, args.json, {"small": small, "large": large})


if __name__ == "__main__":
    main()
