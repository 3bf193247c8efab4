"""Slack surface benchmark: acknowledgement latency under load, first streamed text, exactly once.

A real search2o server process (token mode, Slack in ``http`` mode, SQLite or PostgreSQL)
acknowledges, and a worker process with ``--workers`` consumer threads answers (``--in-server``:
the server's own consumer, the embedded default), through a fake Slack on loopback
(``tests/surfaces/slack/fake_slack.py``: the Web API's wire format, native streaming). A
scripted chat model takes ``--model-s`` seconds per answer (``--pieces`` pieces spread evenly).
``--events`` signed ``app_mention`` events are posted at once, each on a connection of its
own, from the asyncio loop of a load-generator process of its own, and each of ``--retries``
of them is delivered a second time (``X-Slack-Retry-Num: 1``, as Slack does after a
timeout). Measured:

* **acknowledgement latency**: ``POST /slack/events`` until its response, p50 / p99 in ms
  (target p99 ≤ 300 ms; Slack's limit is 3 s, "Events API": respond within three seconds);
* **time to first streamed text**: from the event's post to the first ``chat.appendStream``
  (or ``chat.update``) of its answer, p50 / p99 in s;
* **duplicates**: threads holding more than one answer; **lost**: events whose thread holds no
  final answer. Both must be 0.

Run from the repository root::

    .venv/bin/python bench/slack.py                         # 50 events, a 10 s model
    .venv/bin/python bench/slack.py --events 5 --model-s 1  # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))  # the fake Slack and the scripted model of the tests
sys.path.insert(0, str(_HERE))

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from benchkit import (  # noqa: E402
    console,
    finish,
    log,
    percentile,
    pg_url,
    postgres_server,
    temporary_pg_database,
    verdict,
)
from rich.table import Table  # noqa: E402
from sqlalchemy import select  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.query.doubles import ScriptedChatModel, Step, TextDelta  # noqa: E402
from tests.surfaces.environment import surface_settings  # noqa: E402
from tests.surfaces.slack.conftest import BOT_TOKEN, SECRET  # noqa: E402
from tests.surfaces.slack.fake_slack import (  # noqa: E402
    BOT_USER,
    FakeSlack,
    event_callback,
    message_event,
    signed,
)

from search2o import accounts  # noqa: E402
from search2o.api.app import create_app  # noqa: E402
from search2o.runtime import Runtime  # noqa: E402
from search2o.storage.db import Database  # noqa: E402
from search2o.storage.delivery_models import SurfaceDelivery  # noqa: E402


def slow_model(seconds: float, pieces: int) -> ScriptedChatModel:
    """A model whose answer takes ``seconds``: ``pieces`` words, one every seconds/pieces."""

    def script(messages: Any, tools: Any) -> list[Step]:
        steps: list[Step] = []
        for i in range(pieces):
            steps += [seconds / pieces, TextDelta(f" word{i}")]
        return steps

    return ScriptedChatModel(script)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--retries", type=int, default=10, help="events delivered twice")
    parser.add_argument("--model-s", type=float, default=10.0)
    parser.add_argument("--pieces", type=int, default=20)
    parser.add_argument("--workers", type=int, default=50, help="job consumer threads")
    parser.add_argument(
        "--in-server",
        action="store_true",
        help="run the answers in the API process (default: a worker process, as at scale)",
    )
    parser.add_argument(
        "--database",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="sqlite: embedded (SQLite + SqliteHuey); postgres: pgserver + PostgresHuey",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)  # the server process
    parser.add_argument("--burst", default=None, help=argparse.SUPPRESS)  # the load generator
    args = parser.parse_args()
    if args.serve is not None:
        serve(json.loads(args.serve))
        return
    if args.burst is not None:
        burst(json.loads(args.burst))
        return
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="search2o-bench-slack-") as folder,
        postgres_server(args.database == "postgres") as pg,
        contextlib.ExitStack() as stack,
    ):
        data = Path(folder)
        url = f"sqlite:///{data / 'bench.db'}"
        if pg is not None:
            url = pg_url(pg, stack.enter_context(temporary_pg_database(pg, "slack")))
        database = Database(url)
        stack.callback(database.close)
        with database.session() as session:
            token = accounts.issue_surface_token(session, "slack")
        with FakeSlack(token=BOT_TOKEN) as fake:
            config = {
                "data_dir": str(data / "data"),
                "database_url": url,
                "api_url": fake.url,
                "token": token,
                "port": free_port(),
                "workers": args.workers,
                "postgres": pg is not None,
                "model_s": args.model_s,
                "pieces": args.pieces,
            }
            # The server is a process of its own, as in production: its threads do not share
            # an interpreter lock with the load generator and the fake Slack.
            server = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--serve",
                    json.dumps({**config, "role": "server", "in_server": args.in_server}),
                ]
            )
            worker = None
            if not args.in_server:
                worker = subprocess.Popen(
                    [sys.executable, __file__, "--serve", json.dumps({**config, "role": "worker"})]
                )
            try:
                base = f"http://127.0.0.1:{config['port']}"
                with httpx.Client(base_url=base, timeout=30) as http:
                    wait_up(http, server)
                    result = run(args, http, database, fake)
            finally:
                for process in (p for p in (server, worker) if p is not None):
                    process.send_signal(signal.SIGTERM)
                    process.wait(timeout=60)
    result["database"] = args.database
    report(args, result)
    finish(started, args.json, result)


def serve(config: dict[str, Any]) -> None:
    """Run the server or the worker of the benchmark (a ``--serve`` child) until SIGTERM."""
    section = {
        "bot_token": BOT_TOKEN,
        "signing_secret": SECRET,
        "mode": "http",
        "api_url": config["api_url"],
        "service_token": config["token"],  # the one the parent issued
        "stream": True,
        "update_every_s": 0.5,
        "update_budget": 1000,
    }
    settings = surface_settings(
        "slack", Path(config["data_dir"]), config["database_url"], section, port=config["port"]
    )
    in_server = config["role"] == "server" and config.get("in_server")
    jobs: dict[str, Any] = {"server_workers": config["workers"] if in_server else 0}
    if config["postgres"]:
        jobs["backend"] = "postgres"
    settings = settings.model_copy(update={"jobs": settings.jobs.model_copy(update=jobs)})
    runtime = Runtime(settings, chat_model=slow_model(config["model_s"], config["pieces"]))
    if config["role"] == "worker":
        try:
            runtime.jobs.run_worker(config["workers"])
        finally:
            runtime.close()
        return
    try:
        uvicorn.run(
            create_app(settings, runtime=runtime),
            host="127.0.0.1",
            port=settings.port,
            log_level="warning",
            log_config=None,
        )
    finally:
        runtime.close()


def wait_up(http: httpx.Client, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while True:
        if server.poll() is not None:
            raise SystemExit(f"the server process ended with code {server.returncode}")
        try:
            if http.get("/v1/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the server did not start within 120 s")
        time.sleep(0.2)


def run(args: argparse.Namespace, http: httpx.Client, database: Database, fake: FakeSlack) -> Any:
    bodies = event_bodies(args.events)
    # warm up: one answer end to end (connections, imports), not measured
    log("warming up")
    warm = json.dumps(
        event_callback(
            message_event(f"<@{BOT_USER}> warm", "1699999999.000100", kind="app_mention"), "EvWarm"
        )
    ).encode()
    http.post("/slack/events", content=warm, headers=signed(SECRET, warm))
    wait_for(database, 1, args.model_s + 30)
    log(f"posting {args.events} events at once ({args.retries} of them twice)")
    burst = {"base_url": str(http.base_url), "events": args.events, "retries": args.retries}
    # The load generator is a process of its own, as Slack's servers are not in ours: it then
    # shares no interpreter lock with the fake Slack, which takes the answers' first Web API
    # calls while the burst is still in flight.
    done = subprocess.run(
        [sys.executable, __file__, "--burst", json.dumps(burst)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    timings = json.loads(done.stdout)
    acks: list[float] = timings["acks_ms"]
    posted: dict[str, float] = timings["posted"]
    rows = wait_for(database, args.events + 1, args.model_s * args.events / args.workers + 120)
    first_text = []
    for row in rows:
        if row.message_key not in posted:
            continue
        calls = [
            c.at
            for c in fake.calls
            if c.method in ("chat.appendStream", "chat.update")
            and c.params.get("ts") == row.reply_key
            and c.answer.get("ok")
        ]
        if calls:
            first_text.append(min(calls) - posted[row.message_key])
    threads_of = {ts: fake.replies("C1", ts) for ts, _ in bodies}
    duplicates = sum(1 for replies in threads_of.values() if len(replies) > 1)
    lost = sum(
        1
        for replies in threads_of.values()
        if not replies or f"word{args.pieces - 1}" not in replies[-1]["text"]
    )
    return {
        "events": args.events,
        "deliveries": len(acks),
        "ack_p50_ms": percentile(acks, 50),
        "ack_p99_ms": percentile(acks, 99),
        "first_text_p50_s": percentile(first_text, 50),
        "first_text_p99_s": percentile(first_text, 99),
        "duplicates": duplicates,
        "lost": lost,
        "model_s": args.model_s,
    }


def event_bodies(events: int) -> list[tuple[str, bytes]]:
    """The burst's ``app_mention`` events: ``(ts, signed-to-be body)``, one user each."""
    bodies = []
    for i in range(events):
        ts = f"{1_700_100_000 + i}.000100"
        event = message_event(f"<@{BOT_USER}> question {i}?", ts, kind="app_mention", user=f"U{i}")
        bodies.append((ts, json.dumps(event_callback(event, f"EvB{i}")).encode()))
    return bodies


def burst(config: dict[str, Any]) -> None:
    """Post the burst at once (a ``--burst`` child) and print its timings as JSON.

    Prints ``{"acks_ms": [ms per request], "posted": {ts: monotonic s of its first post}}``;
    ``time.monotonic`` is the system's ``CLOCK_MONOTONIC``, so the parent compares it with the
    fake Slack's call times.

    Each delivery is one HTTP/1.1 request (RFC 9112) on a connection of its own, its bytes
    built and its connection opened before the clock starts, written and read on one asyncio
    loop: the generator's own work per request is a socket write and a read, so what is
    measured is the server, not the generator (its first version, 60 threads posting through
    httpx in one interpreter, added 100-150 ms of waiting for that interpreter's lock to
    every figure: the server's own request logs said p50 90-110 ms while it said 250-290).
    """
    bodies = event_bodies(config["events"])
    jobs = [(ts, b, None) for ts, b in bodies] + [
        (ts, b, 1) for ts, b in bodies[: config["retries"]]
    ]
    url = httpx.URL(config["base_url"])
    assert url.host and url.port

    def request(body: bytes, retry: int | None) -> bytes:
        headers = {
            "Host": f"{url.host}:{url.port}",
            **signed(SECRET, body, retry=retry),
            "Content-Length": str(len(body)),
            "Connection": "close",
        }
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        return f"POST /slack/events HTTP/1.1\r\n{head}\r\n".encode() + body

    async def post_all() -> tuple[list[float], dict[str, float]]:
        wire = [request(body, retry) for _, body, retry in jobs]
        connections = [await asyncio.open_connection(url.host, url.port) for _ in jobs]
        acks: list[float] = [0.0] * len(jobs)
        sent_at: list[float] = [0.0] * len(jobs)

        async def deliver(index: int) -> None:
            reader, writer = connections[index]
            sent = sent_at[index] = time.monotonic()
            writer.write(wire[index])
            head = await reader.readuntil(b"\r\n\r\n")
            status = head.split(b" ", 2)[1]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            answer = await reader.readexactly(length)
            acks[index] = (time.monotonic() - sent) * 1000
            if status != b"200":
                raise SystemExit(f"delivery {index}: HTTP {status.decode()} {answer[:200]!r}")
            writer.close()

        await asyncio.gather(*(deliver(i) for i in range(len(jobs))))
        posted: dict[str, float] = {}
        for (ts, _, _), sent in zip(jobs, sent_at, strict=True):
            posted[ts] = min(sent, posted.get(ts, sent))
        return acks, posted

    acks, posted = asyncio.run(post_all())
    print(json.dumps({"acks_ms": acks, "posted": posted}))


def wait_for(database: Database, count: int, timeout_s: float) -> list[SurfaceDelivery]:
    deadline = time.monotonic() + timeout_s
    while True:
        with database.session() as session:
            rows = list(session.scalars(select(SurfaceDelivery)))
            session.expunge_all()
        if len(rows) >= count and all(r.state in ("posted", "failed") for r in rows):
            return rows
        if time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    title = f"Slack ({r['database']}): {r['events']} events at once, a {r['model_s']:g} s model"
    table = Table(title=title)
    for column in ("measure", "value", "target"):
        table.add_column(column)
    table.add_row("deliveries (incl. retries)", str(r["deliveries"]), "")
    table.add_row(
        "acknowledgement p50 / p99",
        f"{r['ack_p50_ms']:.1f} / {r['ack_p99_ms']:.1f} ms",
        f"p99 ≤ 300 ms: {verdict(r['ack_p99_ms'] <= 300)}",
    )
    table.add_row(
        "first streamed text p50 / p99",
        f"{r['first_text_p50_s']:.2f} / {r['first_text_p99_s']:.2f} s",
        "",
    )
    table.add_row("duplicates", str(r["duplicates"]), f"0: {verdict(r['duplicates'] == 0)}")
    table.add_row("lost", str(r["lost"]), f"0: {verdict(r['lost'] == 0)}")
    console.print(table)


if __name__ == "__main__":
    main()
