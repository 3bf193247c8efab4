"""Shared fixtures: one parametrised database fixture over SQLite and PostgreSQL, and the real
built-in embedding model loaded once per test session.

PostgreSQL 16 with pgvector comes from the PyPI package ``pgserver`` (no system install),
started once per session in a temporary directory; each test gets a fresh database of its own.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from search2o.config import Settings
from search2o.providers.embeddings import BuiltinEmbedder
from search2o.runtime import Runtime
from search2o.storage.db import Database

# The shared data lies beside the repository (../shared/data), on developer machines and in CI.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
HANDBOOK = SHARED_DATA / "handbook"

os.environ.setdefault("HF_HUB_OFFLINE", "1")


_LOGGERS = ("search2o", "search2o.api", "uvicorn", "uvicorn.error", "uvicorn.access")


def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux ``ip_local_port_range``; IANA's 49152-65535
    elsewhere, RFC 6335 section 6)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49152, 65535


#: Ports at or above 10,000 that browsers refuse to load (``net::ERR_UNSAFE_PORT``): the
#: Fetch standard's "bad port" list, https://fetch.spec.whatwg.org/#port-blocking.
_BAD_PORTS = frozenset({10080})


def _port_candidates() -> Iterator[int]:
    """Ports below the ephemeral range, a share of its own for each pytest-xdist worker.

    ``bind(0)`` and outgoing connections take their ports from the ephemeral range, so a port
    picked there can be taken again (by another worker's PostgreSQL client, say) between the
    probe and the server's ``bind``: ``EADDRINUSE``. Below that range the kernel hands out
    nothing by itself, each worker owns a disjoint slice, and a slice is walked in order so a
    port is not handed out twice while thousands remain.
    """
    low = 10_000
    high = min(_ephemeral_ports()[0], 65_536)
    if high - low < 1_000:  # an unusual range: fall back to what the kernel picks
        high = low
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), 1)
    index = int(worker) if worker.isdigit() else 0
    size = (high - low) // count
    start = low + (index % count) * size
    while size > 0:
        yield from (port for port in range(start, start + size) if port not in _BAD_PORTS)


_PORTS = _port_candidates()


def free_port() -> int:
    """Return a TCP port free on loopback now, from this worker's slice below the ephemeral
    range; if none of 1,000 tries is free, the kernel's pick (which another process may take)."""
    for _, port in zip(range(1_000), _PORTS, strict=False):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:  # no slice of our own: the kernel's pick
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """The CLI and ``create_app`` configure logging process-wide; put it back after each test."""
    saved = {
        name: (lg.handlers[:], lg.level, lg.propagate, lg.disabled)
        for name in _LOGGERS
        for lg in [logging.getLogger(name)]
    }
    yield
    for name, (handlers, level, propagate, disabled) in saved.items():
        lg = logging.getLogger(name)
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate = propagate
        lg.disabled = disabled


@pytest.fixture(autouse=True)
def _signal_handlers_are_given_back(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test (or the command it runs in-process) must leave SIGINT and SIGTERM as it found them.

    A leaked handler silently turns Ctrl-C off for every later test in the same process.
    """
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    after = {signum: signal.getsignal(signum) for signum in before}
    for signum, handler in before.items():
        signal.signal(signum, handler)  # put it back, so one leak fails one test only
    leaked = [signal.Signals(n).name for n in before if after[n] is not before[n]]
    assert not leaked, f"{request.node.nodeid} left its own handler for {', '.join(leaked)}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A PostgreSQL server for the whole session (pgserver), removed at the end."""
    import pgserver

    folder = tempfile.mkdtemp(prefix="search2o-pg-")
    server = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def _pg_url(server: Any, database: str) -> str:
    url = make_url(server.get_uri()).set(drivername="postgresql+psycopg", database=database)
    return url.render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A URL of a blank database on each backend (a fresh PostgreSQL database per test)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('db') / 'search2o.db'}"
        return
    server = request.getfixturevalue("pg_server")
    name = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(_pg_url(server, "postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield _pg_url(server, name)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    """An open, migrated database on each backend."""
    db = Database(database_url)
    try:
        yield db
    finally:
        db.close()


class MemoEmbedder(BuiltinEmbedder):
    """The real built-in model with a per-session memo, so the same text is embedded once."""

    _memo: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            for t, v in zip(missing, super().embed(missing), strict=True):
                self._memo[t] = v
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([self._memo[t] for t in texts])


@pytest.fixture(scope="session")
def embedder() -> MemoEmbedder:
    """The built-in all-MiniLM-L6-v2 embedder (real weights, loaded once)."""
    return MemoEmbedder()


@pytest.fixture
def settings(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Settings:
    """Settings on a temporary data directory and the parametrised database."""
    return Settings(data_dir=tmp_path_factory.mktemp("data"), database_url=database_url)


@pytest.fixture
def runtime(settings: Settings, embedder: MemoEmbedder) -> Iterator[Runtime]:
    """A runtime on each backend sharing the session's embedder."""
    rt = Runtime(settings, embedder=embedder)
    try:
        yield rt
    finally:
        rt.close()


@functools.cache
def handbook_files() -> list[Path]:
    """The 16 Markdown files of the shared handbook."""
    return sorted(HANDBOOK.glob("*.md"))


@pytest.fixture
def token_runtime(settings: Settings, embedder: MemoEmbedder) -> Iterator[Runtime]:
    """A runtime whose settings say ``auth_mode=token``, sharing the session's embedder."""
    rt = Runtime(settings.model_copy(update={"auth_mode": "token"}), embedder=embedder)
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture
def token_api(token_runtime: Runtime) -> Iterator[Any]:
    """The API in ``auth_mode=token`` on loopback: every request needs a bearer token."""
    from search2o.api.app import create_app
    from tests.api.test_api import serve

    with serve(create_app(token_runtime.settings, runtime=token_runtime)) as client:
        yield client


@pytest.fixture
def cli(tmp_path: Path, database_url: str) -> Any:
    """The ``search2o`` command in a subprocess on a fresh data folder (``tests.test_cli.Cli``)."""
    from tests.test_cli import Cli

    return Cli(tmp_path / "data", database_url)


@pytest.fixture
def same_runtime(tmp_path: Path, database_url: str, embedder: MemoEmbedder) -> Iterator[Runtime]:
    """A runtime on the CLI's data folder (same keyring) and database."""
    rt = Runtime(Settings(data_dir=tmp_path / "data", database_url=database_url), embedder=embedder)
    try:
        yield rt
    finally:
        rt.close()


_MAIN_CONFIG: list[pytest.Config] = []


# The test files that take longest, longest first (``--durations`` of full runs on 2 cores).
LONG_FILES = (
    "tests/api/test_schemathesis.py",  # ~12 min: four fuzzing runs
    "tests/test_bench_smoke.py",  # ~10 min: every bench at a tiny size
    "tests/test_gates.py",  # ~4-6 min: mypy over the whole package
    "tests/ops/test_faults.py",
    "tests/test_cli.py",
    "tests/ops/test_scale.py",
    "tests/connectors/test_kill_and_resume.py",
    "tests/query/test_cited_sections.py",
    "tests/knowledge/test_isolation.py",
    "tests/ops/test_deploy.py",
)


BROWSER_WAIT_MS = 15_000
"""How long a browser test's ``expect`` waits for the page (a run once missed Playwright's 5 s)."""


def pytest_configure(config: pytest.Config) -> None:
    """Keep the main process's configuration; hand out the longest test files first.

    ``-n 2 --dist loadfile`` gives each worker whole files, by default the files with the
    most tests first (xdist's ``loadscopereorder``), which left a file of two long tests (mypy)
    for the end, alone on one worker, minutes after the other had finished. Longest first
    (Graham, "Bounds on multiprocessing timing anomalies", 1969) ends both workers together:
    the reordering is turned off and :func:`pytest_collection_modifyitems` puts
    :data:`LONG_FILES` first.
    """
    if not hasattr(config, "workerinput"):
        _MAIN_CONFIG.append(config)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    try:  # the browser tests' waits: 15 s, not Playwright's 5, on a machine busy elsewhere
        from playwright.sync_api import expect

        expect.set_options(timeout=BROWSER_WAIT_MS)
    except ImportError:  # pragma: no cover - the dev extra installs it
        pass


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the tests of :data:`LONG_FILES` to the front, in that order (a stable sort)."""
    rank = {path: position for position, path in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Name a failure the moment it happens, not only in the summary at the end.

    A run stopped by its time bound (``.ci/run``) never prints the summary, so without this
    line its failures would be lost. Under xdist the main process reports its workers' tests.
    """
    if not (report.failed and _MAIN_CONFIG):
        return
    reporter = _MAIN_CONFIG[0].pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_line(f"FAILED NOW {report.nodeid} ({report.when})")
