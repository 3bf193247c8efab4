"""Load: simulated users against 1 API process and against 3, throughput and latency per operation.

The scale test's run (``tests/ops/scenario.py``: users with tokens in two groups, streamed chat
turns and follow-ups on another process, agent runs that ``ask`` and remember, memory and
knowledge searches, uploads) at the issue's size, 200 users for 2 minutes, twice: once with one
``search2o serve`` process and once with three, each time with two ``search2o worker`` processes,
on a fresh PostgreSQL database (pgserver) and a ``redis-server`` job queue. Prints per operation
the count, throughput (operations per second of wall time) and p50/p95/p99 latency of both runs,
and the ratio of throughput 3 : 1 (the last shape's to the first's); then the checks of the
scale test (5xx, failures, leaked canaries, transcripts, uploads whole or absent) as PASS/FAIL.

On the 2 shared cores of the build machines three processes cannot do more than one by much:
every operation embeds text on the same CPUs. The ratio measures what the processes add where
cores are free; here it mostly shows that they add no errors and no leaks.

    .venv/bin/python bench/load.py                        # 200 users x 120 s, 1 then 3 processes
    .venv/bin/python bench/load.py --users 20 --seconds 30
    .venv/bin/python bench/load.py --processes 3          # one shape only
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the scale test's scenario and process helpers

from benchkit import (  # noqa: E402
    console,
    finish,
    load_average,
    log,
    percentile,
    pg_url,
    postgres_server,
    temporary_pg_database,
    verdict,
)
from rich.table import Table  # noqa: E402
from tests.ops.processes import Cluster, redis_server, scale_env  # noqa: E402
from tests.ops.scenario import (  # noqa: E402
    OPERATIONS,
    check_after,
    prepare,
    run_load,
    seed,
    table,
    wait_for_jobs,
)


def one_run(
    server: Any, redis_url: str, processes: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Run the load on ``processes`` API processes and 2 workers; return figures and checks."""
    with temporary_pg_database(server, "load") as name, tempfile.TemporaryDirectory() as folder:
        url = pg_url(server, name)
        data = Path(folder) / "data"
        population = seed(data, url, args.users)
        cluster = Cluster.of(scale_env(data, url, redis_url), Path(folder) / "logs", processes, 2)
        try:
            log(f"{processes} API process(es) + 2 workers starting")
            cluster.wait_ready(within_s=300)
            prepare(cluster.urls, population)
            log(f"{args.users} users for {args.seconds:g} s on {processes} process(es)")
            results = run_load(cluster.urls, population, args.seconds)
            left = wait_for_jobs(url, within_s=120)
            problems = check_after(cluster.urls[0], population, results)
        finally:
            cluster.close()
    return {
        "processes": processes,
        "wall_s": results.wall_s,
        "operations": table(results, percentile),
        "statuses": {str(k): v for k, v in results.statuses.items()},
        "checks": {
            "every operation ran": all(results.seconds.get(op) for op in OPERATIONS),
            "no 5xx": results.server_errors == 0,
            "no failed operation": not results.failures,
            "no leaked canary": not results.leaks,
            "transcripts in order, uploads whole or absent": not problems,
            "job queue drained": left == 0,
        },
        "failures": results.failures[:5] + results.leaks[:5] + problems[:5],
    }


def report(runs: list[dict[str, Any]]) -> None:
    """Print the per-operation table of every run, the ratio, and the checks."""
    out = Table(title=f"Load per operation (load average {load_average()})")
    out.add_column("operation")
    for run in runs:
        n = run["processes"]
        out.add_column(f"{n} proc: count", justify="right")
        out.add_column(f"{n} proc: per s", justify="right")
        out.add_column(f"{n} proc: p50 / p95 / p99 s", justify="right")
    first, last = runs[0]["processes"], runs[-1]["processes"]
    if len(runs) > 1:
        out.add_column(f"throughput {last} : {first}", justify="right")
    for operation in OPERATIONS:
        row = [operation]
        for run in runs:
            figures = run["operations"][operation]
            row += [
                str(figures["count"]),
                f"{figures['per_s']:.2f}",
                f"{figures['p50']:.2f} / {figures['p95']:.2f} / {figures['p99']:.2f}",
            ]
        if len(runs) > 1:
            low, high = (r["operations"][operation]["per_s"] for r in (runs[0], runs[-1]))
            row.append(f"{high / low:.2f}" if low else "-")
        out.add_row(*row)
    console.print(out)
    checks = Table(title="Checks of the scale test")
    checks.add_column("check")
    for run in runs:
        checks.add_column(f"{run['processes']} proc")
    for name in runs[0]["checks"]:
        checks.add_row(name, *(verdict(run["checks"][name]) for run in runs))
    console.print(checks)
    for run in runs:
        for failure in run["failures"]:
            console.print(f"[red]{run['processes']} proc:[/red] {failure}", soft_wrap=True)


def main() -> int:
    """Parse the options, run each shape, print the tables; exit 1 when a check failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=200, help="simulated users (200)")
    parser.add_argument("--seconds", type=float, default=120, help="length of each run (120)")
    parser.add_argument(
        "--processes", type=int, nargs="+", default=[1, 3], help="API process counts (1 3)"
    )
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args()
    started = time.perf_counter()
    runs = []
    with (
        postgres_server(True) as server,
        tempfile.TemporaryDirectory() as folder,
        redis_server(Path(folder)) as redis_url,
    ):
        for processes in args.processes:
            runs.append(one_run(server, redis_url, processes, args))
    report(runs)
    finish(started, args.json, runs)
    return 0 if all(all(run["checks"].values()) for run in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
