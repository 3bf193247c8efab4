"""Every benchmark still runs: a tiny-size run of each script in ``bench/``, so none can rot.

The figures of these runs mean nothing (tiny sizes, a loaded machine); what is checked is that
each script finishes with exit code 0 and prints its table. A new bench must be added here
(the last test fails otherwise).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"

pytestmark = pytest.mark.slow

# script -> (tiny arguments, text its output must hold)
SMOKE: dict[str, tuple[list[str], str]] = {
    "search.py": (
        [
            "--chunks",
            "2000",
            "--queries",
            "10",
            "--backends",
            "sqlite",
            "--skip-handbook",
            "--skip-sqlite-vec",
        ],
        "Synthetic",
    ),
    "qa_eval.py": (["--skip-handbook", "--mtrag-limit", "5"], "MTRAG-UN"),
    "qa_reader.py": (["--mtrag-limit", "5"], "ROC AUC"),
    "chat.py": (["--turns", "3", "--skip-http"], "first"),
    "window.py": ([], "WindowBudget.build"),
    "state.py": (
        ["--sizes", "5", "--saves", "2", "--backend", "sqlite", "--skip-langgraph"],
        "save",
    ),
    "memory_locomo.py": (
        [
            "--conversations",
            "1",
            "--turns",
            "40",
            "--skip-mem0",
            "--skip-bm25",
            "--latency-memories",
            "20",
        ],
        "one memory replaced",
    ),
    "agents.py": (["--runs", "3"], "per command"),
    "retrieval.py": (
        [
            "--skip-handbook",
            "--mtrag-limit",
            "5",
            "--chunks",
            "1000",
            "--queries",
            "5",
            "--backends",
            "sqlite",
            "--rebuild-queries",
            "1",
        ],
        "recall@5",
    ),
    "load.py": (["--users", "2", "--seconds", "3", "--processes", "1"], "p50 / p95 / p99"),
    "mcp.py": (["--queries", "3"], "search over HTTP"),
    "sync.py": (["--files", "20"], "no-change resync"),
    "ingest.py": (
        ["--runtimes", "torch,onnx-int8", "--mtrag-limit", "2", "--handbook-limit", "3"],
        "ingest speedup:",
    ),
    "scaleout.py": (["--files", "12", "--latency-ms", "20"], "2 workers vs 1"),
    "ingest_memory.py": (["--paragraphs", "40", "--settle", "1"], "Server RSS"),
    "jobs.py": (
        [
            *("--backends", "sqlite", "--latency-jobs", "3", "--idle-jobs", "1"),
            *("--idle-s", "0.3", "--throughput-jobs", "10"),
        ],
        "enqueue→start",
    ),
    "slack.py": (
        ["--events", "5", "--retries", "2", "--model-s", "1", "--workers", "5"],
        "acknowledgement p50 / p99",
    ),
    "web.py": (
        ["--conversations", "200", "--list-requests", "5", "--browser-turns", "1"],
        "first delta in the browser",
    ),
}


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_bench_runs_at_a_tiny_size(script: str, tmp_path: Path) -> None:
    arguments, expected = SMOKE[script]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    env["SEARCH2O_DATA_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, str(BENCH / script), *arguments],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert expected.lower() in output.lower(), output[-4000:]


def test_every_bench_has_a_smoke_run() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - {"benchkit.py"}
    assert scripts == set(SMOKE), "add a tiny run of the new bench to SMOKE"
