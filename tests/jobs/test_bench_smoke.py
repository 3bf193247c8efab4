"""``bench/jobs.py`` runs end to end at a tiny size and reports what it measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_jobs_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    output = tmp_path / "jobs.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"}
    env = {k: v for k, v in env.items() if not k.startswith("SEARCH2O_")}
    done = subprocess.run(
        [
            *(sys.executable, "bench/jobs.py", "--backends", "sqlite", "--latency-jobs", "3"),
            *("--idle-jobs", "1", "--idle-s", "0.3", "--throughput-jobs", "10"),
            *("--json", str(output)),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "enqueue→start" in done.stdout and "embedded (SQLite)" in done.stdout
    (result,) = json.loads(output.read_text())["results"]
    assert result["backend"] == "sqlite" and len(result["latency_ms"]) == 3
    assert len(result["idle_latency_ms"]) == 1 and result["jobs_per_s"] > 0
    verdict = "PASS" if result["passed"] else "FAIL"
    assert verdict in done.stdout
    assert 0 < result["latency_p50_ms"] < 30_000
