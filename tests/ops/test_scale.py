"""The scale test: 3 API processes and 2 workers on one PostgreSQL and a real Redis, many users.

The native recipe of docs/deployment.md for real: three ``search2o serve`` processes on their
own loopback ports and two ``search2o worker`` processes, on one pgserver PostgreSQL with the
job queue on a ``redis-server``. Simulated users (:mod:`tests.ops.scenario`: tokens, two
groups, a canary per user and per group) do streamed chat turns whose follow-ups go to another
process, agent runs that ``ask`` on one process and are answered on another (storing a
memory), memory and knowledge searches, while uploads trickle in. Asserted: no 5xx and no
failed operation, no canary outside its user or group in any answer, every transcript exactly
the messages sent in order, every upload whole or absent, the job queue drained, and the
``/metrics`` counters of every process moved.

Size: the issue's 200 users for 2 minutes is ``bench/load.py``'s default. Here the user count
and the duration come from ``SCALE_TEST_USERS`` (default 8) and ``SCALE_TEST_SECONDS``
(default 20): on the 2 shared cores of the build machines starting the five processes takes
about 25 s, preparing (agent, canary documents, each process's first search loading its
embedding model) about 15 s, and the checks after about 10 s, so these defaults keep the file
near 85 s of wall time (measured: 84 s; 115 s with the machine busy elsewhere). More
users only queue behind the same two cores (every operation
embeds text on CPU); eight users keep every operation represented many times per process
while staying inside that budget. ``SCALE_TEST_USERS=200 SCALE_TEST_SECONDS=120`` runs the
issue's size.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from tests.ops.conftest import samples
from tests.ops.processes import Cluster, scale_env
from tests.ops.scenario import OPERATIONS, check_after, prepare, run_load, seed, wait_for_jobs

pytestmark = pytest.mark.slow

USERS = int(os.environ.get("SCALE_TEST_USERS", "8"))
SECONDS = float(os.environ.get("SCALE_TEST_SECONDS", "20"))


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = httpx.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 200, response.text
    return samples(response.text)


def _total(
    scrapes: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]], name: str, **labels: str
) -> float:
    """The sum over processes of every sample ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(
        v
        for scrape in scrapes
        for (n, got), v in scrape.items()
        if n == name and wanted <= set(got)
    )


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_users_on_three_api_processes_and_two_workers(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    data = tmp_path / "data"
    population = seed(data, database_url, USERS)
    cluster = Cluster.of(scale_env(data, database_url, redis_url), tmp_path / "logs", 3, 2)
    marks = [time.monotonic()]
    try:
        cluster.wait_ready()
        marks.append(time.monotonic())
        prepare(cluster.urls, population)
        marks.append(time.monotonic())
        before = [_scrape(url) for url in cluster.urls]
        results = run_load(cluster.urls, population, SECONDS)
        marks.append(time.monotonic())
        left = wait_for_jobs(database_url, within_s=60)
        problems = check_after(cluster.urls[1], population, results)
        marks.append(time.monotonic())
        after = [_scrape(url) for url in cluster.urls]
        running = [proc.poll() is None for proc in [*cluster.apis, *cluster.workers] if proc]
    finally:
        cluster.close()
    counts = {op: len(results.seconds.get(op, [])) for op in OPERATIONS}
    phases = ", ".join(
        f"{name} {b - a:.0f} s"
        for name, a, b in zip(
            ("start", "prepare", "load", "checks"), marks, marks[1:], strict=False
        )
    )
    print(f"\n{phases}")
    print(f"{USERS} users, {results.wall_s:.1f} s: {counts}; statuses {dict(results.statuses)}")
    assert all(running), running
    assert results.server_errors == 0, results.failures
    assert results.failures == []
    assert results.leaks == []
    # The control of the leak check: users do see their own canaries (memory, group document).
    assert results.own["memory search"] > 0 and results.own["search"] > 0, results.own
    assert problems == []
    assert left == 0, "jobs still queued or running a minute after the load"
    assert all(counts.values()), counts
    assert len(results.conversations) >= USERS
    # Every process took part, and its counters moved with what it served.
    for i, (was, now) in enumerate(zip(before, after, strict=True)):
        for name, labels in (
            ("search2o_http_requests_total", {"route": "/v1/chat", "status": "200"}),
            ("search2o_http_requests_total", {"route": "/v1/memories/search"}),
            ("search2o_chat_first_token_seconds_count", {"kind": "turn"}),
            ("search2o_chat_answer_seconds_count", {"kind": "agent"}),
        ):
            assert _total([now], name, **labels) > _total([was], name, **labels), (i, name)
    chats = counts["chat"] + counts["follow-up"] + counts["agent ask"] + counts["agent answer"]
    moved = _total(after, "search2o_http_requests_total", route="/v1/chat") - _total(
        before, "search2o_http_requests_total", route="/v1/chat"
    )
    assert moved == chats
    assert _total(after, "search2o_sse_streams_open") == 0  # every stream closed
    # The ledger's gauges (read from the database at scrape) saw the uploads' jobs finish.
    assert _total(after[:1], "search2o_jobs", state="done") > _total(
        before[:1], "search2o_jobs", state="done"
    )
