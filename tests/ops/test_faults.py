"""The fault test: ``kill -9`` at random points, and PostgreSQL stopped and restarted under load.

**Kill points.** Two API processes and a worker (the native recipe, jobs on Redis) on one
PostgreSQL. At each point, chosen by a seeded random generator (the seed is printed; set
``FAULT_TEST_SEED`` to replay a run), one activity starts (they take turns, from a random first
one) and its process gets SIGKILL after a random delay (0-0.8 s), the victim and the files
drawn at random too:

* ingestion: an upload of two handbook files; the worker ingesting them (or the API process
  that took the upload) is killed;
* a streamed chat turn; the API process streaming it is killed;
* a run of the ``counter`` agent, which saves conversation state (``conv.n``) and a memory
  (``count <n>``) in one transaction; the API process running it is killed;
* key rotation (``search2o keys rotate``): the rotating process is killed mid-way.

The killed process is started again, and then: the database opens at the head migration; the
ledger finishes every ingestion job (``done``, none lost, none failed); every document is whole
(its text and chunk count those of a clean ingestion) or absent; the counter's state is the last
successful save: a follow-up run returns the acknowledged count + 1 (+ 2 when the killed run
had saved before dying) and the memory says exactly the saved count, so a run that did not save
left no memory; no answer stays running (the runs sweeper interrupts the orphans), every
conversation reads back decrypted, every question followed by its answer (an ``interrupted``
one for a killed answer, even one killed before its run recorded a first event), and takes a
follow-up.

The issue asks for 50 points: ``FAULT_TEST_POINTS`` (default 4, one of each activity) sets how
many. Each point costs a process restart, the embedding model loading again in it, and the
checks: 20-40 s on the 2 shared cores of the build machines, so 4 keeps this file near 3
minutes with the PostgreSQL tests; ``FAULT_TEST_POINTS=50`` is the issue's run (about 25
minutes, docs/operations.md).

**PostgreSQL down.** On a pgserver instance of this test's own (the session's server is not
touched): while clients keep sending requests, ``pg_ctl stop`` — every answer is 200 or a clear
503 naming the storage error, never a 500 or a dropped connection; ``/v1/health/ready`` 503;
then PostgreSQL starts again and the same processes (not restarted) answer ready and serve.
"""

from __future__ import annotations

import os
import random
import secrets
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from search2o.api.app import create_app
from search2o.client import Client
from search2o.config import Settings
from search2o.query.settings import ChatSettings, ModelProfile
from search2o.runtime import Runtime
from search2o.storage.db import Database
from tests.api.test_api import add_user, serve
from tests.conftest import MemoEmbedder, _pg_url, handbook_files
from tests.ops.conftest import SlowModel, stop_postgres
from tests.ops.processes import SCRIPT, Cluster, kill, scale_env, start
from tests.ops.scenario import seed

pytestmark = pytest.mark.slow

POINTS = int(os.environ.get("FAULT_TEST_POINTS", "4"))
SEED = int(os.environ.get("FAULT_TEST_SEED", str(secrets.randbelow(10**6))))
ACTIVITIES = ("ingest", "turn", "agent", "rotate")
COUNTER = {
    "name": "counter",
    "description": "Counts its runs in a conversation and remembers the count",
    "functions": {
        "main": {
            "set": {"conv.n": "{ (conv.n if 'n' in conv else 0) + 1 }"},
            "memory.store": {"store": {"count": "{ f'count {conv.n}' }"}},
            "end": {"output": "{ conv.n }"},
        }
    },
}
# Short leases and sweeps so what a killed process held is taken over within seconds.
FAST = {
    "SEARCH2O_JOBS__LEASE_S": "2",
    "SEARCH2O_JOBS__LOST_AFTER_S": "3",
    "SEARCH2O_JOBS__SWEEP_INTERVAL_S": "0.5",
    "SEARCH2O_JOBS__TICK_S": "1",
    "SEARCH2O_JOBS__BACKOFF_BASE_S": "0.5",
    "SEARCH2O_RUNS__STALE_S": "5",
    "SEARCH2O_RUNS__SWEEP_INTERVAL_S": "1",
}


def _files() -> list[Path]:
    """The five shortest handbook files (1-3 kB): enough text that an ingestion takes a while."""
    return sorted(handbook_files(), key=lambda p: p.stat().st_size)[:5]


def _until(check: Callable[[], Any], within_s: float, what: str) -> Any:
    deadline = time.monotonic() + within_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {within_s:g} s")
        time.sleep(0.25)


class World:
    """The cluster and what the test knows it should find in it."""

    def __init__(self, cluster: Cluster, database_url: str, admin: str, user: str) -> None:
        self.cluster = cluster
        self.database_url = database_url
        self.admin = {"Authorization": f"Bearer {admin}"}
        self.user_token = user
        self.user = {"Authorization": f"Bearer {user}"}
        self.reference: dict[str, tuple[int, str]] = {}  # file name -> (chunks, text)
        self.jobs: list[str] = []
        self.conversations: list[str] = []
        self.counter_conversation = ""
        self.counted = 0  # the counter's last acknowledged value
        self.first_activity = 0

    def url(self, i: int) -> str:
        return self.cluster.urls[i % len(self.cluster.urls)]

    def upload(self, at: int, names: list[str], prefix: str, wait: float = 0) -> httpx.Response:
        by_name = {p.name: p for p in _files()}
        files = [("files", (n, by_name[n].read_bytes(), "text/markdown")) for n in names]
        return httpx.post(
            f"{self.url(at)}/v1/documents?wait={wait}",
            files=files,
            data={"paths": [f"{prefix}/{n}" for n in names]},
            headers=self.admin,
            timeout=180,
        )

    def count(self, at: int) -> tuple[int | None, str]:
        """Run the counter once on process ``at``; return its output (None: no ``done``)."""
        try:
            with Client(self.url(at), self.user_token, timeout=60, retries=0) as client:
                items = list(
                    client.chat("count", self.counter_conversation or None, agent="counter")
                )
        except Exception as exc:  # the process was killed under it: any failure is expected
            return None, repr(exc)
        done = [i.event for i in items if i.kind == "done"]
        if done and not self.counter_conversation:
            self.counter_conversation = done[0].conversation_id  # type: ignore[attr-defined]
        return (int(done[0].output), "") if done else (None, repr(items[-1:]))  # type: ignore[attr-defined]

    def turn(self, at: int, message: str, conversation: str | None) -> str | None:
        """A streamed chat turn on process ``at``; return its conversation (None: failed)."""
        try:
            with Client(self.url(at), self.user_token, timeout=60, retries=0) as client:
                items = list(client.chat(message, conversation))
        except Exception:  # the process was killed under it
            return None
        return items[0].event.conversation_id if items else None  # type: ignore[attr-defined]


def _point(world: World, rng: random.Random, number: int, logs: Path) -> str:
    """Run one activity, kill its process at a random moment, restart it; return what."""
    # The activities take turns (from a random first one), so a few points cover all four.
    activity = ACTIVITIES[(world.first_activity + number) % len(ACTIVITIES)]
    delay = rng.uniform(0.0, 0.8)
    at = rng.randrange(len(world.cluster.urls))
    outcome: dict[str, Any] = {}

    def act() -> None:
        if activity == "ingest":
            names = rng.sample(sorted(world.reference), 2)
            try:
                response = world.upload(at, names, f"p{number}")
            except httpx.TransportError as exc:
                # The API process taking the upload died before answering: the upload is
                # whole or absent (checked with every document), its job id never arrived.
                outcome["dropped"] = type(exc).__name__
                return
            if response.status_code == 202:
                world.jobs.append(response.json()["job"]["id"])
            outcome["status"] = response.status_code
        elif activity == "turn":
            outcome["conversation"] = world.turn(at, f"point {number}: where do bikes go?", None)
        elif activity == "agent":
            outcome["count"] = world.count(at)

    victim: subprocess.Popen[str] | None
    if activity == "rotate":
        victim = start(world.cluster.env, logs / f"rotate-{number}.log", "keys", "rotate")
        time.sleep(delay)
        kill(victim)
        what = f"rotate killed after {delay:.2f} s"
    else:
        on_worker = activity == "ingest" and rng.random() < 0.7
        thread = threading.Thread(target=act)
        thread.start()
        time.sleep(delay)
        if on_worker:
            victim = world.cluster.workers[0]
            assert victim is not None
            kill(victim)
            world.cluster.start_worker(0)
        else:
            victim = world.cluster.apis[at]
            assert victim is not None
            kill(victim)
            world.cluster.start_api(at)
        thread.join(timeout=120)
        assert not thread.is_alive(), f"point {number}: the {activity} client hangs"
        target = "worker" if on_worker else f"api-{at}"
        what = f"{activity}: {target} killed after {delay:.2f} s -> {outcome}"
    world.cluster.wait_ready()
    if activity == "agent":
        count, _ = outcome["count"]
        if count is not None:
            world.counted = count
    return what


def _verify(world: World, number: int) -> None:
    """The invariants after a restart (the module docstring's list)."""
    Database(world.database_url).close()  # opens, and is at the head migration (or migrates)
    # No ingestion job lost: the ledger finishes each one.
    for job in world.jobs:
        state = _until(
            lambda job=job: (
                (
                    s := httpx.get(
                        f"{world.url(0)}/v1/jobs/{job}", headers=world.admin, timeout=30
                    ).json()["state"]
                )
                in ("done", "failed")
                and s
            ),
            90,
            f"point {number}: job {job} finishing",
        )
        assert state == "done", f"point {number}: job {job} {state}"
    # Every document whole or absent.
    listed = httpx.get(f"{world.url(1)}/v1/documents", headers=world.admin, timeout=30).json()
    for document in listed:
        name = document["source"].rsplit("/", 1)[-1]
        chunks, text = world.reference[name]
        got = httpx.get(
            f"{world.url(0)}/v1/documents/{document['id']}/text", headers=world.admin, timeout=30
        ).json()["text"]
        assert (document["chunk_count"], got) == (chunks, text), (number, document["source"])
    # The counter's state is the last successful save, and its memory says the same.
    before = world.counted
    count, why = world.count(number + 1)
    assert count is not None, f"point {number}: the follow-up run failed: {why}"
    assert count in (before + 1, before + 2), (number, before, count)
    memories = httpx.get(f"{world.url(number)}/v1/memories", headers=world.user, timeout=30).json()[
        "memories"
    ]
    assert [m["text"] for m in memories] == [f"count {count}"], (number, memories)
    world.counted = count
    # No answer stays running; every conversation reads back and takes a follow-up.
    _until(lambda: _no_running(world), 30, f"point {number}: orphaned runs interrupted")
    listed = httpx.get(
        f"{world.url(number)}/v1/conversations?limit=100", headers=world.user, timeout=30
    )
    assert listed.status_code == 200, listed.text
    for conversation in [c["id"] for c in listed.json()["conversations"]]:
        detail = httpx.get(
            f"{world.url(number)}/v1/conversations/{conversation}", headers=world.user, timeout=30
        )
        assert detail.status_code == 200, (number, detail.text)
        roles = [m["role"] for m in detail.json()["messages"]]
        # Question, answer, question, answer: a killed answer is stored `interrupted` by the
        # sweeper, also when the process died before its run recorded a first event (the run
        # is linked to its conversation with the question).
        assert roles == ["user", "assistant"] * (len(roles) // 2), (number, roles)
    assert world.turn(number, f"after point {number}", world.conversations[-1])


def _no_running(world: World) -> bool:
    from sqlalchemy import func, select

    from search2o.storage.run_models import Run

    database = Database(world.database_url, migrate=False)
    try:
        with database.session() as session:
            running = session.scalar(
                select(func.count()).select_from(Run).where(Run.status == "running")
            )
        return not running
    finally:
        database.close()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_kill_9_at_random_points_loses_nothing(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    print(f"\nFAULT_TEST_SEED={SEED} FAULT_TEST_POINTS={POINTS}")
    rng = random.Random(SEED)
    data = tmp_path / "data"
    population = seed(data, database_url, 1)
    env = scale_env(data, database_url, redis_url, **FAST)
    cluster = Cluster.of(env, tmp_path / "logs", 2, 1)
    world = World(cluster, database_url, population.admin_token, population.users[0].token)
    done: Counter[str] = Counter()
    try:
        cluster.wait_ready()
        put = httpx.put(
            f"{world.url(0)}/v1/agents/counter", json=COUNTER, headers=world.admin, timeout=60
        )
        assert put.status_code == 201, put.text
        names = [p.name for p in _files()]
        clean = world.upload(0, names, "ref", wait=170)
        assert clean.status_code == 201, clean.text
        for document in httpx.get(
            f"{world.url(1)}/v1/documents", headers=world.admin, timeout=30
        ).json():
            text = httpx.get(
                f"{world.url(1)}/v1/documents/{document['id']}/text",
                headers=world.admin,
                timeout=30,
            ).json()["text"]
            world.reference[document["source"].rsplit("/", 1)[-1]] = (document["chunk_count"], text)
        assert len(world.reference) == len(names)
        assert world.count(0)[0] == 1
        world.counted = 1
        first = world.turn(1, "where do bikes go?", None)
        assert first
        world.conversations.append(first)
        world.first_activity = rng.randrange(len(ACTIVITIES))
        for number in range(POINTS):
            began = time.monotonic()
            what = _point(world, rng, number, tmp_path / "logs")
            done[what.split(":")[0].split()[0]] += 1
            _verify(world, number)
            print(f"point {number}: {what} ({time.monotonic() - began:.0f} s)")
        # A rotation killed mid-way is finished by the next one: every data key on one version.
        finished = subprocess.run(
            [str(SCRIPT), "keys", "rotate", "--rewrap-only"],
            env=cluster.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert finished.returncode == 0, finished.stderr
        _verify(world, POINTS)
    finally:
        cluster.close()
    print(f"activities: {dict(done)}")


def _load(
    urls: list[str], auth: dict[str, str], stop: threading.Event, seen: Counter[str], bad: list[str]
) -> None:
    """Send searches and chat turns round-robin until ``stop``; count what came back."""
    n = 0
    with httpx.Client(headers=auth, timeout=60) as http:
        while not stop.is_set():
            url = urls[n % len(urls)]
            try:
                if n % 2:
                    response = http.post(f"{url}/v1/search", json={"query": "bikes"})
                else:
                    response = http.post(
                        f"{url}/v1/chat", json={"message": "where do bikes go?", "stream": False}
                    )
            except httpx.TransportError as exc:
                kind = "search" if n % 2 else "chat"
                bad.append(f"{kind} on {url} at {time.monotonic():.1f}: dropped: {exc!r}")
                n += 1
                continue
            seen[str(response.status_code)] += 1
            if response.status_code == 503:
                detail = response.json()["detail"]
                if detail.get("error") != "StorageError" or not detail.get("message"):
                    bad.append(f"an unclear 503: {response.text[:300]}")
            elif response.status_code != 200:
                bad.append(f"{response.status_code}: {response.text[:300]}")
            n += 1
            time.sleep(0.05)


def test_postgres_stopped_and_started_under_load(
    own_postgres: Any, tmp_path: Path, redis_url: str
) -> None:
    url = _pg_url(own_postgres, "postgres")
    data = tmp_path / "data"
    population = seed(data, url, 1)
    auth = {"Authorization": f"Bearer {population.users[0].token}"}
    cluster = Cluster.of(scale_env(data, url, redis_url, **FAST), tmp_path / "logs", 2, 1)
    seen: Counter[str] = Counter()
    bad: list[str] = []
    stop = threading.Event()
    try:
        cluster.wait_ready()
        pids = [proc.pid for proc in cluster.apis if proc]
        loaders = [
            threading.Thread(target=_load, args=(cluster.urls, auth, stop, seen, bad))
            for _ in range(3)
        ]
        for loader in loaders:
            loader.start()
        _until(lambda: seen["200"] >= 6, 120, "answers before the outage")
        stopped = time.monotonic()
        stop_postgres(own_postgres)
        down = _until(
            lambda: all(
                httpx.get(f"{u}/v1/health/ready", timeout=30).status_code == 503
                for u in cluster.urls
            ),
            30,
            "every process not ready",
        )
        _until(lambda: seen["503"] >= 6, 60, "requests refused while PostgreSQL is down")
        refused = seen["503"]
        restarted = time.monotonic()
        own_postgres.ensure_postgres_running()
        _until(
            lambda: all(
                httpx.get(f"{u}/v1/health/ready", timeout=30).status_code == 200
                for u in cluster.urls
            ),
            60,
            "every process ready again",
        )
        answered = seen["200"]
        _until(lambda: seen["200"] >= answered + 6, 60, "answers after the outage")
        stop.set()
        for loader in loaders:
            loader.join(timeout=90)
        alive = [proc.poll() is None for proc in cluster.apis if proc]
        same = [proc.pid for proc in cluster.apis if proc] == pids
    finally:
        stop.set()
        cluster.close()
    print(
        f"\nanswers during the run: {dict(seen)}; stopped at {stopped:.1f}, "
        f"started again at {restarted:.1f}"
    )
    assert down
    assert bad == [], bad[:5]
    assert refused >= 6 and set(seen) <= {"200", "503"}, seen
    assert all(alive) and same  # recovered by themselves, no restart


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "json"])
def test_an_answer_in_flight_when_postgres_stops_ends_with_a_clear_error(
    own_postgres: Any, tmp_path: Path, embedder: MemoEmbedder, stream: bool
) -> None:
    """Its events can no longer be recorded: the answer ends with StorageError, not a hang."""
    model = SlowModel([f"word{n} " for n in range(60)], delay_s=0.2)
    url = _pg_url(own_postgres, "postgres")
    profile = ModelProfile(provider="openai", model="slow", base_url=model.url, max_retries=0)
    env_settings = Settings(
        data_dir=tmp_path / "data",
        database_url=url,
        auth_mode="token",
        chat=ChatSettings(profiles={"default": profile}),
    )
    outcome: dict[str, Any] = {}
    try:
        with Runtime(env_settings, embedder=embedder) as rt:
            auth = add_user(rt, "ann@example.com")
            with serve(create_app(env_settings, runtime=rt)) as client:

                def ask() -> None:
                    started = time.monotonic()
                    body = {"message": "tell me slowly", "stream": stream}
                    with client.stream(
                        "POST", "/v1/chat", json=body, headers=auth, timeout=60
                    ) as response:
                        outcome["status"] = response.status_code
                        outcome["text"] = response.read().decode()
                    outcome["took_s"] = time.monotonic() - started

                asker = threading.Thread(target=ask)
                asker.start()
                time.sleep(2.0)  # the answer is writing (and recording) its deltas
                stop_postgres(own_postgres)
                asker.join(timeout=45)
                hung = asker.is_alive()
                own_postgres.ensure_postgres_running()
                asker.join(timeout=90)
    finally:
        model.close()
    assert not hung, "the answer did not end within 45 s of the database going away"
    assert outcome["took_s"] < 40, outcome
    if stream:
        assert outcome["status"] == 200
        last = [line for line in outcome["text"].splitlines() if line.startswith("event:")][-1]
        assert last == "event: error", outcome["text"][-500:]
        assert (
            '"error": "StorageError"' in outcome["text"]
            or '"error":"StorageError"' in (outcome["text"])
        )
    else:
        assert outcome["status"] == 503, outcome
        assert '"StorageError"' in outcome["text"]
