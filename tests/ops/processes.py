"""Real search2o processes on loopback: their environment, start, readiness, stop, kill.

What the operations tests and ``bench/load.py`` share to run the native recipe of
docs/deployment.md for real: ``search2o serve`` and ``search2o worker`` subprocesses on one
database, a ``redis-server`` for the job queue, and :class:`Cluster`, which holds a set of them
(API processes on their own ports, workers) and can kill and restart any one. Nothing here
imports pytest at import time, so a bench script can use it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import free_port

SCRIPT = Path(sys.executable).parent / "search2o"
"""The ``search2o`` command of the environment running this code."""


def process_env(data_dir: Path, database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a search2o process: this one's, less any ``SEARCH2O_*``, plus ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEARCH2O_", "PROMETHEUS_"))}
    if env.get("PYTHONPATH"):  # the sources under test, wherever the process starts
        env["PYTHONPATH"] = os.pathsep.join(
            str(Path(part).resolve()) for part in env["PYTHONPATH"].split(os.pathsep)
        )
    env.update(
        SEARCH2O_DATA_DIR=str(data_dir),
        SEARCH2O_DATABASE_URL=database_url,
        SEARCH2O_AUTH_MODE="token",
        SEARCH2O_LOG_FORMAT="json",
        HF_HUB_OFFLINE="1",
        NO_COLOR="1",
    )
    env.update(extra)
    return env


def start(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[str]:
    """Start ``search2o <args>`` with ``env``, its stdout and stderr appended to ``log``."""
    with log.open("a") as out:
        return subprocess.Popen(
            [str(SCRIPT), *args], stdout=out, stderr=subprocess.STDOUT, text=True, env=env
        )


def wait_ready(base_url: str, within_s: float = 90) -> httpx.Response:
    """Poll ``/v1/health/ready`` until it answers 200; fail after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    last: httpx.Response | str = "no answer"
    while time.monotonic() < deadline:
        try:
            last = httpx.get(f"{base_url}/v1/health/ready", timeout=5)
            if last.status_code == 200:
                return last
        except httpx.TransportError as exc:
            last = repr(exc)
        time.sleep(0.25)
    raise AssertionError(f"{base_url} not ready within {within_s} s: {last!r}")


def children(pid: int) -> list[int]:
    """Return the ids of the live processes whose parent is ``pid`` (read from ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after it.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def cmdline(pid: int) -> bytes:
    """The command line of a live process, or ``b""`` once it is gone (or a zombie)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def stop(proc: subprocess.Popen[str], timeout_s: float = 60) -> int:
    """SIGTERM ``proc`` and return its exit status (killed and failed after ``timeout_s``)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"process {proc.pid} did not stop within {timeout_s} s") from None


def kill(proc: subprocess.Popen[str]) -> None:
    """``kill -9`` ``proc`` (SIGKILL: no handler, no drain) and reap it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """Run a ``redis-server`` on a free loopback port without persistence; yield its URL.

    Raises:
        RuntimeError: ``redis-server`` is not installed, or did not answer within 20 s.

    """
    binary = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if binary is None:
        raise RuntimeError(
            "redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)"
        )
    import redis

    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        [
            *(binary, "--port", str(port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no"),
            *("--dir", str(folder), "--logfile", str(folder / "redis.log")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"redis-server did not start: {(folder / 'redis.log').read_text()}"
                    ) from None
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        stop(process, timeout_s=20)


def redis_url_fixture(suite: str) -> Any:
    """A session-scoped ``redis_url`` fixture over :func:`redis_server` for a conftest.

    Each conftest that assigns it gets its own server (pytest scopes a fixture by the conftest
    that defines it); a missing ``redis-server`` fails the test saying ``suite`` needs one.
    """
    import pytest  # here, not at the top: bench/load.py imports this module without pytest

    @pytest.fixture(scope="session")
    def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
        """A real ``redis-server`` on a free loopback port for the session, no persistence."""
        try:
            with redis_server(tmp_path_factory.mktemp("redis")) as url:
                yield url
        except RuntimeError as exc:
            pytest.fail(f"{suite} runs on a real Redis: {exc}")

    return redis_url


@dataclass
class Cluster:
    """API processes (one ``search2o serve`` per port) and ``search2o worker`` processes.

    Every process gets ``env`` (see :func:`process_env`); API process ``i`` listens on
    ``ports[i]`` and logs to ``<logs>/api-<i>.log``, worker ``j`` to ``<logs>/worker-<j>.log``
    (appended across restarts, so a log shows every life of a process).
    """

    env: dict[str, str]
    logs: Path
    apis: list[subprocess.Popen[str] | None] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    workers: list[subprocess.Popen[str] | None] = field(default_factory=list)

    @classmethod
    def of(cls, env: dict[str, str], logs: Path, api_count: int, worker_count: int) -> Cluster:
        """Start ``api_count`` API processes and ``worker_count`` workers (not yet ready)."""
        logs.mkdir(parents=True, exist_ok=True)
        cluster = cls(env, logs)
        cluster.ports = [free_port() for _ in range(api_count)]
        cluster.apis = [None] * api_count
        cluster.workers = [None] * worker_count
        for i in range(api_count):
            cluster.start_api(i)
        for j in range(worker_count):
            cluster.start_worker(j)
        return cluster

    @property
    def urls(self) -> list[str]:
        """The base URL of each API process, in order."""
        return [f"http://127.0.0.1:{port}" for port in self.ports]

    def start_api(self, i: int) -> None:
        """(Re)start API process ``i`` on its port."""
        log = self.logs / f"api-{i}.log"
        port = str(self.ports[i])
        self.apis[i] = start(self.env, log, "serve", "--host", "127.0.0.1", "--port", port)

    def start_worker(self, j: int) -> None:
        """(Re)start worker ``j``."""
        self.workers[j] = start(self.env, self.logs / f"worker-{j}.log", "worker")

    def wait_ready(self, within_s: float = 180) -> None:
        """Wait until every API process answers ready; fail naming the one that did not."""
        deadline = time.monotonic() + within_s
        for i, url in enumerate(self.urls):
            try:
                wait_ready(url, within_s=max(1.0, deadline - time.monotonic()))
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{self.tail(f'api-{i}.log')}") from None

    def tail(self, name: str, chars: int = 3000) -> str:
        """The end of the log ``name`` (for failure messages)."""
        path = self.logs / name
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def close(self) -> None:
        """SIGTERM every process still running (SIGKILL after 60 s) and reap them."""
        for proc in [*self.apis, *self.workers]:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*self.apis, *self.workers]:
            if proc is None:
                continue
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                kill(proc)


def scale_env(data_dir: Path, database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of the scale shape: jobs on Redis, run only by ``search2o worker``.

    A queue name of its own keeps the Redis lists of two runs apart.
    """
    return process_env(
        data_dir,
        database_url,
        SEARCH2O_JOBS__BACKEND="redis",
        SEARCH2O_JOBS__REDIS_URL=redis_url,
        SEARCH2O_JOBS__QUEUE_NAME=f"q{uuid.uuid4().hex[:12]}",
        SEARCH2O_JOBS__SERVER_WORKERS="0",
        **extra,
    )
