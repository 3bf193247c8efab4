"""Every test has a time limit: a hang fails fast and says where it hung (pyproject.toml).

A child pytest runs a small file of deliberately hanging tests under the project's own
configuration, with the limit shortened to 2 s, and must fail them with every thread's stack
while the rest of the file still runs, in one process and under pytest-xdist alike.
"""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.conftest import LONG_FILES

ROOT = Path(__file__).resolve().parents[1]

HANGING = """
import socket
import threading


def test_a_lock_never_released():
    stuck = threading.Event()
    threading.Thread(target=stuck.wait, name="server-that-never-answers", daemon=True).start()
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()


def test_a_server_that_never_answers():
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname()) as client:
            client.sendall(b"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
            client.recv(1)


def test_the_run_goes_on_after_a_hang():
    assert True
"""


def test_the_limit_is_configured_for_every_test() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert 60 <= float(options["timeout"]) <= 600
    assert options["timeout_method"] == "signal"  # fixtures tear down: servers stop, no leftover


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["one-process", "xdist"])
def test_a_hanging_test_fails_by_the_limit_with_every_threads_stack(
    tmp_path: Path, workers: list[str]
) -> None:
    (tmp_path / "test_hanging.py").write_text(HANGING)
    started = time.monotonic()
    child = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml")),
            *("--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-o", "timeout=2"),
            *workers,
            str(tmp_path / "test_hanging.py"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    elapsed = time.monotonic() - started
    out = child.stdout + child.stderr
    assert child.returncode == 1, out
    assert "2 failed, 1 passed" in out, out
    assert out.count("Failed: Timeout (>2.0s) from pytest-timeout") >= 2, out
    # Every thread's stack: the thread that waits forever, and where the test itself hung.
    assert "Stack of server-that-never-answers" in out, out
    assert "lock.acquire()" in out and "client.recv(1)" in out, out
    assert elapsed < 60, f"the limit took {elapsed:.0f} s to end two 2-second hangs"


def test_the_long_files_handed_out_first_exist() -> None:
    # tests/conftest.py LONG_FILES: a renamed file would silently lose its place at the front.
    missing = [path for path in LONG_FILES if not (ROOT / path).is_file()]
    assert not missing, f"LONG_FILES names files that do not exist: {missing}"
