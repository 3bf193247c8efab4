"""``search2o serve --workers N`` and SIGTERM, with real processes on loopback.

* N worker processes on one PostgreSQL database share everything through it: a conversation
  goes on whichever process takes the next request, and a scrape of ``/metrics`` from any of
  them adds up all of them (prometheus-client's multiprocess mode).
* SIGTERM drains: an answer in flight finishes within ``serve.drain_s``; one still running
  after it is stopped with what it wrote stored (``interrupted``) and its run finished; every
  process exits and the command exits 0.
* More than one process on SQLite is refused with one line naming PostgreSQL (exit 2).
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from search2o.config import Settings
from search2o.runtime import Runtime
from search2o.storage.job_models import Job
from search2o.storage.models import Conversation
from search2o.storage.run_models import Run
from tests.api.test_api import add_user
from tests.conftest import free_port
from tests.ops.conftest import SlowModel, samples
from tests.ops.processes import SCRIPT, children, cmdline, process_env, start, stop, wait_ready

pytestmark = pytest.mark.slow


def _token(data_dir: Path, database_url: str) -> dict[str, str]:
    """Migrate the database and make an admin with a token; return its header."""
    settings = Settings(data_dir=data_dir, database_url=database_url, auth_mode="token")
    with Runtime(settings) as runtime:
        return add_user(runtime, "ann@example.com", admin=True)


@pytest.mark.parametrize("how", ["option", "setting"])
def test_more_than_one_process_on_sqlite_is_refused(tmp_path: Path, how: str) -> None:
    env = process_env(tmp_path / "data", f"sqlite:///{tmp_path / 'one.db'}")
    args = ["--workers", "2"] if how == "option" else []
    if how == "setting":
        env["SEARCH2O_SERVE__WORKERS"] = "3"
    done = subprocess.run(
        [str(SCRIPT), "serve", "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    count = 2 if how == "option" else 3
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: --workers: {count} worker processes need PostgreSQL (SEARCH2O_DATABASE_URL="
        "postgresql+psycopg://...); SQLite serves one process: use --workers 1"
    ]
    assert not (tmp_path / "one.db").exists()  # refused before anything was opened


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_worker_processes_share_one_database_and_all_stop_on_sigterm(
    tmp_path: Path, database_url: str
) -> None:
    auth = _token(tmp_path / "data", database_url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    (metrics_dir / "counter_999999.db").write_bytes(b"stale")  # wiped at the start
    env = process_env(tmp_path / "data", database_url, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    log = tmp_path / "serve.log"
    proc = start(env, log, "serve", "--workers", "2", "--port", str(port))
    try:
        wait_ready(base)
        # uvicorn's worker processes (multiprocessing spawns them), not its resource tracker.
        workers = [pid for pid in children(proc.pid) if b"spawn_main" in cmdline(pid)]
        assert len(workers) == 2, (workers, log.read_text())
        # One conversation, each turn on a new connection: any process may take it.
        first = httpx.post(
            f"{base}/v1/chat",
            json={"message": "hello there", "stream": False},
            headers=auth,
            timeout=60,
        )
        assert first.status_code == 200, first.text
        conversation = first.json()["conversation_id"]
        for n in range(5):
            turn = httpx.post(
                f"{base}/v1/chat",
                json={
                    "message": f"follow-up {n}",
                    "conversation_id": conversation,
                    "stream": False,
                },
                headers=auth,
                timeout=60,
            )
            assert turn.status_code == 200, turn.text
        transcript = httpx.get(f"{base}/v1/conversations/{conversation}", headers=auth).json()
        users = [m["text"] for m in transcript["messages"] if m["role"] == "user"]
        assert users == ["hello there"] + [f"follow-up {n}" for n in range(5)]
        # Every scrape, whichever process answers it, counts the six turns of both processes.
        chat = (
            "search2o_http_requests_total",
            (("method", "POST"), ("route", "/v1/chat"), ("status", "200")),
        )
        for _ in range(3):
            scraped = httpx.get(f"{base}/metrics", timeout=30)
            assert scraped.status_code == 200
            assert samples(scraped.text)[chat] == 6
        written = {p.name for p in metrics_dir.glob("*.db")}
        assert "counter_999999.db" not in written
        assert {int(name.rsplit("_", 1)[1][:-3]) for name in written} <= set(workers)
        assert proc.poll() is None
        code = stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = log.read_text()
    assert code == 0, output[-3000:]
    assert output.rstrip().endswith("search2o stopped")
    deadline = time.monotonic() + 10
    while [pid for pid in workers if cmdline(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if cmdline(pid)]  # every worker ended
    with (
        Runtime(Settings(data_dir=tmp_path / "data", database_url=database_url)) as rt,
        rt.database.session() as session,
    ):
        running = session.scalars(select(Job.id).where(Job.state == "running")).all()
    assert running == []  # every consumer finished or released its jobs


def _stream_until_first_delta(
    base: str, auth: dict[str, str], events: list[str], started: threading.Event
) -> None:
    try:
        with httpx.stream(
            "POST",
            f"{base}/v1/chat",
            json={"message": "tell me slowly", "stream": True},
            headers=auth,
            timeout=60,
        ) as response:
            for line in response.iter_lines():
                if line.startswith("event:"):
                    events.append(line[6:].strip())
                    if events[-1] == "delta":
                        started.set()
    except httpx.TransportError as exc:
        events.append(f"cut: {type(exc).__name__}")
    finally:
        started.set()


@pytest.mark.parametrize(
    ("drain_s", "pieces", "finished"),
    [(30, 8, True), (1, 40, False)],
    ids=["answer-finishes", "drain-runs-out"],
)
def test_sigterm_drains_an_answer_in_flight(
    tmp_path: Path, database_url: str, drain_s: int, pieces: int, finished: bool
) -> None:
    model = SlowModel([f"word{n} " for n in range(pieces)], delay_s=0.25)
    auth = _token(tmp_path / "data", database_url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = process_env(
        tmp_path / "data", database_url, SEARCH2O_SERVE__DRAIN_S=str(drain_s), **model.env()
    )
    log = tmp_path / "serve.log"
    proc = start(env, log, "serve", "--port", str(port))
    events: list[str] = []
    started = threading.Event()
    try:
        wait_ready(base)
        reader = threading.Thread(
            target=_stream_until_first_delta, args=(base, auth, events, started)
        )
        reader.start()
        assert started.wait(30) and "delta" in events, (events, log.read_text()[-2000:])
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=drain_s + 60)
        took = time.monotonic() - sent
        reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        model.close()
    output = log.read_text()
    assert code == 0, output[-3000:]
    assert output.rstrip().endswith("search2o stopped")
    with Runtime(Settings(data_dir=tmp_path / "data", database_url=database_url)) as rt:
        with rt.database.session() as session:
            conversation = session.scalars(select(Conversation.id)).one()
            run_status = session.scalars(select(Run.status)).one()
        owner = rt.principal_for("ann@example.com")
        answer = rt.conversations.messages(owner, conversation)[-1]
    assert answer.role == "assistant"
    if finished:
        assert events[-1] == "done", events
        assert answer.status == "complete" and run_status == "complete", run_status
        assert answer.text == "".join(f"word{n} " for n in range(pieces))
    else:
        assert events[-1] != "done", events
        assert took < drain_s + 20
        # Stopped at shutdown with what it wrote kept; no run is left "running".
        assert answer.status == "interrupted", answer.status
        assert run_status == "interrupted", run_status
        assert answer.text.startswith("word0")
