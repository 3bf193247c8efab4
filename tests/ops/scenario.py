"""Simulated users against a set of API processes: what the scale test asserts, the bench times.

:func:`seed` makes the population in the database: ``users`` users with tokens in two groups
(``red``, ``blue``), each user with a canary of its own (a random word it alone ever sends) and
each group with a canary document readable by that group only; an admin who defines the
``remember`` agent and uploads. :func:`run_load` then runs one thread per user until a deadline,
each round-robin over the processes (so every follow-up reaches another process than the turn
before it):

* a streamed chat turn through :class:`search2o.client.Client`, and its follow-up elsewhere;
* the ``remember`` agent: it asks (``ask``) on one process, the answer (the user's canary) goes
  to another, the run stores it as a memory and ends;
* a memory search and a knowledge search;

and one uploader thread per group uploads small documents readable by its group. Every answer
(each event of a stream, each JSON body) is scanned for canaries: one the user may not see —
another user's, another group's — is a leak. :func:`check_after` then reads every conversation
back (its user messages are exactly the ones sent, in order) and every upload (whole or absent).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from search2o import accounts
from search2o.client import Client
from search2o.config import Settings
from search2o.errors import Search2oError
from search2o.jobs.kinds import INGEST
from search2o.runtime import Runtime
from search2o.storage.db import Database

GROUPS = ("red", "blue")
REMEMBER = {
    "name": "remember",
    "description": "Asks for a code word and remembers it",
    "functions": {
        "main": {
            "ask": {"question": "Which code word shall I keep?"},
            "set": {"conv.code": "{ result }"},
            "memory.store": {"store": {"code_word": "{ 'My code word is ' + conv.code }"}},
            "end": {"output": "{ 'Kept ' + conv.code }"},
        }
    },
}
CANARY = re.compile(r"k9[ug][a-z0-9]+")
"""Every canary: ``k9u<hex>`` (a user's), ``k9g<hex>`` (a group's)."""

OPERATIONS = ("chat", "follow-up", "agent ask", "agent answer", "memory search", "search", "upload")


@dataclass(frozen=True)
class SimUser:
    """One simulated user: its email, token, group and canary."""

    index: int
    email: str
    token: str
    group: str
    canary: str


@dataclass
class Population:
    """Who takes part: the users, each group's canary, the admin's token."""

    users: list[SimUser]
    group_canary: dict[str, str]
    admin_token: str

    def allowed(self, user: SimUser | None) -> set[str]:
        """The canaries ``user`` may see (the admin, ``None``, may see every group's)."""
        if user is None:
            return set(self.group_canary.values())
        return {user.canary, self.group_canary[user.group]}


@dataclass
class Results:
    """What a load run saw: latencies per operation, statuses, failures, leaks, what to recheck."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    own: Counter[str] = field(default_factory=Counter)  # answers holding a canary they may see
    conversations: dict[str, tuple[SimUser, list[str]]] = field(default_factory=dict)
    uploads: dict[str, tuple[str, str]] = field(default_factory=dict)
    wall_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, operation: str, took_s: float, status: int) -> None:
        """Count one finished operation."""
        with self.lock:
            self.seconds[operation].append(took_s)
            self.statuses[status] += 1

    def fail(self, what: str) -> None:
        """Keep one failure (at most 50 are kept, every one is counted as status 0)."""
        with self.lock:
            self.statuses[0] += 1
            if len(self.failures) < 50:
                self.failures.append(what)

    @property
    def server_errors(self) -> int:
        """Responses with a 5xx status."""
        return sum(n for status, n in self.statuses.items() if status >= 500)


def _canary(kind: str) -> str:
    return f"k9{kind}{secrets.token_hex(5)}"


def seed(data_dir: Path, database_url: str, users: int) -> Population:
    """Create ``users`` users (alternating groups), their tokens and an admin.

    Opening a runtime on ``data_dir`` first migrates the database and makes the data folder's
    key, so the processes started after it share one key instead of racing to make their own.
    """
    made: list[SimUser] = []
    settings = Settings(data_dir=data_dir, database_url=database_url, auth_mode="token")
    with Runtime(settings) as runtime, runtime.database.session() as session:
        admin = accounts.create_user(session, "admin@example.com", is_admin=True)
        admin_token = accounts.issue_token(session, admin, "load")
        for n in range(users):
            group = GROUPS[n % len(GROUPS)]
            email = f"user{n:03d}@example.com"
            row = accounts.create_user(session, email, groups=[group])
            made.append(
                SimUser(n, email, accounts.issue_token(session, row, "load"), group, _canary("u"))
            )
    return Population(made, {g: _canary("g") for g in GROUPS}, admin_token)


def prepare(urls: list[str], population: Population) -> None:
    """Define the agent, upload each group's canary document and warm every process up.

    The first search of a process loads its embedding model; doing it here keeps that out of
    the measured run.
    """
    admin = {"Authorization": f"Bearer {population.admin_token}"}
    put = httpx.put(f"{urls[0]}/v1/agents/remember", json=REMEMBER, headers=admin, timeout=60)
    assert put.status_code in (200, 201), put.text

    def upload(group: str) -> httpx.Response:
        canary = population.group_canary[group]
        body = f"# Team {group}\n\nThe launch code of team {group} is {canary}.\n".encode()
        return httpx.post(
            f"{urls[0]}/v1/documents?wait=120",
            files=[("files", (f"team-{group}.md", body, "text/markdown"))],
            data={"groups": [group]},
            headers=admin,
            timeout=150,
        )

    def warm(url: str) -> httpx.Response:
        return httpx.post(
            f"{url}/v1/search", json={"query": "launch code"}, headers=admin, timeout=180
        )

    # In parallel: each process (and a worker) loads its model at the same time.
    with ThreadPoolExecutor(len(urls) + len(GROUPS)) as pool:
        warmed = [pool.submit(warm, url) for url in urls]
        uploaded = [pool.submit(upload, group) for group in GROUPS]
    for future in warmed:
        assert future.result().status_code == 200, future.result().text
    for future in uploaded:
        assert future.result().status_code == 201, future.result().text


class _Session:
    """One user's view of the processes: a client and an httpx client per process."""

    def __init__(
        self, urls: list[str], user: SimUser, population: Population, results: Results
    ) -> None:
        self.user = user
        self.allowed = population.allowed(user)
        self.results = results
        self.clients = [Client(url, user.token, timeout=120) for url in urls]
        self.http = [
            httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {user.token}"}, timeout=120
            )
            for url in urls
        ]

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for http in self.http:
            http.close()

    def scan(self, operation: str, text: str) -> None:
        found = set(CANARY.findall(text))
        with self.results.lock:
            for leaked in found - self.allowed:
                self.results.leaks.append(f"{self.user.email} saw {leaked} in {operation}")
            if found & self.allowed:
                self.results.own[operation] += 1

    def chat(
        self,
        operation: str,
        at: int,
        message: str,
        conversation: str | None = None,
        agent: str | None = None,
    ) -> Any:
        """A streamed answer on process ``at``; return its ``done`` event (None on failure)."""
        started = time.perf_counter()
        client = self.clients[at % len(self.clients)]
        try:
            items = list(client.chat(message, conversation_id=conversation, agent=agent))
        except Search2oError as exc:
            self.results.record(operation, time.perf_counter() - started, _status_of(exc))
            self.results.fail(f"{operation} by {self.user.email}: {type(exc).__name__}: {exc}")
            return None
        took = time.perf_counter() - started
        for item in items:
            self.scan(operation, item.event.model_dump_json())
        last = items[-1].event if items else None
        if last is None or last.kind != "done":
            self.results.record(operation, took, 0)
            self.results.fail(f"{operation} by {self.user.email} ended with {last!r}")
            return None
        self.results.record(operation, took, 200)
        conv = last.conversation_id  # type: ignore[attr-defined]
        with self.results.lock:
            sent = self.results.conversations.setdefault(conv, (self.user, []))[1]
            sent.append(message)
        return last

    def call(self, operation: str, at: int, method: str, path: str, **kwargs: Any) -> Any:
        """One request on process ``at``; return its JSON body when 2xx, else None."""
        started = time.perf_counter()
        http = self.http[at % len(self.http)]
        try:
            response = http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            self.results.fail(f"{operation} by {self.user.email}: {exc!r}")
            return None
        self.results.record(operation, time.perf_counter() - started, response.status_code)
        self.scan(operation, response.text)
        if not response.is_success:
            self.results.fail(f"{operation} {response.status_code}: {response.text[:300]}")
            return None
        return response.json()


def _status_of(exc: Search2oError) -> int:
    from search2o.api.errors import status_for_name

    return status_for_name(type(exc).__name__)


def _user_loop(session: _Session, deadline: float, stop: threading.Event) -> None:
    round_ = 0
    while time.monotonic() < deadline and not stop.is_set():
        try:
            _one_round(session, session.user.index + round_, round_)
        except Exception as exc:  # a failure of its own kind must count, not end the thread
            session.results.fail(f"{session.user.email}: {type(exc).__name__}: {exc}")
        round_ += 1


def _one_round(session: _Session, at: int, round_: int) -> None:
    user = session.user
    first = session.chat("chat", at, f"What is the launch code of my team? ({user.canary})")
    if first is not None:
        session.chat(
            "follow-up",
            at + 1,
            f"and again, for {user.canary} round {round_}?",
            conversation=first.conversation_id,
        )
    asked = session.chat("agent ask", at + 2, "start", agent="remember")
    if asked is not None:
        if asked.status != "paused":
            session.results.fail(f"agent ask by {user.email}: status {asked.status}")
        else:
            answered = session.chat(
                "agent answer", at + 3, user.canary, conversation=asked.conversation_id
            )
            if answered is not None and answered.text != f"Kept {user.canary}":
                session.results.fail(f"agent answer by {user.email}: {answered.text!r}")
    session.call(
        "memory search", at + 1, "POST", "/v1/memories/search", json={"query": "code word"}
    )
    session.call("search", at + 2, "POST", "/v1/search", json={"query": "launch code of the team"})


def _upload_loop(
    urls: list[str],
    population: Population,
    group: str,
    results: Results,
    deadline: float,
    stop: threading.Event,
) -> None:
    admin = Population.allowed(population, None)
    headers = {"Authorization": f"Bearer {population.admin_token}"}
    n = 0
    while time.monotonic() < deadline and not stop.is_set():
        name = f"bulletin-{group}-{n:04d}.md"
        text = f"Bulletin {n} of team {group}: {population.group_canary[group]} stays secret."
        body = f"# Bulletin {n}\n\n{text}\n".encode()
        started = time.perf_counter()
        try:
            response = httpx.post(
                f"{urls[n % len(urls)]}/v1/documents",
                files=[("files", (name, body, "text/markdown"))],
                data={"groups": [group]},
                headers=headers,
                timeout=120,
            )
        except httpx.TransportError as exc:
            results.fail(f"upload {name}: {exc!r}")
            continue
        results.record("upload", time.perf_counter() - started, response.status_code)
        if response.status_code != 202:
            results.fail(f"upload {name}: {response.status_code} {response.text[:300]}")
        else:
            with results.lock:
                results.uploads[f"upload:{name}"] = (group, text)
        with results.lock:
            for found in set(CANARY.findall(response.text)) - admin:
                results.leaks.append(f"upload answer held {found}")
        n += 1
        time.sleep(0.5)  # a trickle of uploads beside the users, as an editor publishes


def run_load(
    urls: list[str], population: Population, seconds: float, users: list[SimUser] | None = None
) -> Results:
    """Run every user (or ``users``) and the uploaders for ``seconds``; return what they saw.

    A user's round in progress at the deadline finishes, so the run takes a little longer.
    """
    results = Results()
    stop = threading.Event()
    # Clients first: making hundreds of them takes a while, and is not part of the run.
    sessions = [_Session(urls, u, population, results) for u in (users or population.users)]
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=_user_loop, args=(s, deadline, stop)) for s in sessions]
    threads += [
        threading.Thread(
            target=_upload_loop, args=(urls, population, group, results, deadline, stop)
        )
        for group in GROUPS
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    finally:
        stop.set()
        for session in sessions:
            session.close()
    results.wall_s = time.perf_counter() - started
    return results


def wait_for_jobs(database_url: str, within_s: float, kind: str = INGEST) -> int:
    """Wait until no job of ``kind`` is queued or running; return how many still are after
    ``within_s`` (periodic kinds are left out: a tick may always have one queued)."""
    from sqlalchemy import func, select

    from search2o.storage.job_models import Job

    deadline = time.monotonic() + within_s
    database = Database(database_url)
    try:
        while True:
            with database.session() as session:
                left = int(
                    session.scalar(
                        select(func.count())
                        .select_from(Job)
                        .where(Job.kind == kind, Job.state.in_(("queued", "running")))
                    )
                    or 0
                )
            if left == 0 or time.monotonic() > deadline:
                return left
            time.sleep(0.5)
    finally:
        database.close()


def check_after(url: str, population: Population, results: Results) -> list[str]:
    """Read back every conversation and upload; return the problems found (empty: none).

    * a conversation holds exactly the user messages sent to it, in the order sent, each
      followed by its answer;
    * an upload is absent, or present with its whole text.
    """
    problems: list[str] = []
    tokens = {u.email: u.token for u in population.users}
    with httpx.Client(base_url=url, timeout=120) as http:
        for conversation, (user, sent) in results.conversations.items():
            got = http.get(
                f"/v1/conversations/{conversation}",
                headers={"Authorization": f"Bearer {tokens[user.email]}"},
            )
            if got.status_code != 200:
                problems.append(f"conversation {conversation}: {got.status_code}")
                continue
            messages = got.json()["messages"]
            said = [m["text"] for m in messages if m["role"] == "user"]
            roles = [m["role"] for m in messages]
            if said != sent:
                problems.append(f"conversation {conversation}: {said!r} != sent {sent!r}")
            if roles != ["user", "assistant"] * len(sent):
                problems.append(f"conversation {conversation}: roles {roles}")
        admin = {"Authorization": f"Bearer {population.admin_token}"}
        listed = http.get("/v1/documents", headers=admin)
        assert listed.status_code == 200, listed.text
        documents = {d["source"]: d for d in listed.json()}
        reader = {u.group: {"Authorization": f"Bearer {u.token}"} for u in population.users}
        for source, (group, text) in results.uploads.items():
            document = documents.get(source)
            if document is None:
                continue  # absent is allowed: never half there
            # Read as a member of the group: the text is served under the reader's rights.
            whole = http.get(f"/v1/documents/{document['id']}/text", headers=reader[group])
            if (
                whole.status_code != 200
                or text not in whole.json()["text"]
                or document["chunk_count"] < 1
            ):
                problems.append(f"upload {source} is not whole: {whole.text[:300]}")
    return problems


def table(
    results: Results, on: Callable[[list[float], float], float]
) -> dict[str, dict[str, float]]:
    """Per operation: count, throughput (per second of wall time) and p50/p95/p99 in seconds.

    ``on(values, q)`` is the percentile function (``benchkit.percentile``).
    """
    out: dict[str, dict[str, float]] = {}
    for operation in OPERATIONS:
        values = results.seconds.get(operation, [])
        out[operation] = {
            "count": len(values),
            "per_s": len(values) / results.wall_s if results.wall_s else 0.0,
            "p50": on(values, 50),
            "p95": on(values, 95),
            "p99": on(values, 99),
        }
    return out
