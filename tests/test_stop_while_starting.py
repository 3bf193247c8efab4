"""``serve`` and ``worker`` stop on SIGTERM or SIGINT at any moment of their start.

Each case starts the real command in a child interpreter that sends itself the signal the first
time a named function of the start is called (a profile hook, which also slows the whole start
down, as a loaded machine does), and requires the process to exit promptly and cleanly. The
window this closes: a SIGTERM that arrived after ``serve`` had put in a handler of its own and
before uvicorn put in its handlers was ignored, and the server then served until killed hard.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import free_port

# The child: python -c STARTER PATH:QUALNAME SIGNUM search2o ARGS...
STARTER = """
import os, sys
target, signum = sys.argv[1], int(sys.argv[2])
path, qualname = target.split(":")
del sys.argv[1:3]
sys.argv[0] = "search2o"

def fire(frame, event, arg):
    code = frame.f_code
    if event == "call" and code.co_qualname == qualname and code.co_filename.endswith(path):
        sys.setprofile(None)
        print(f"sending signal {signum} at {target}", flush=True)
        os.kill(os.getpid(), signum)

sys.setprofile(fire)
from search2o.cli import main
main()
"""

TERM, INT = signal.SIGTERM, signal.SIGINT

# Every phase of serve's start, in order: the command's entry, its handlers going in, the
# checks, the app and its database, the printed URL, uvicorn's config, run, load and startup,
# and the first turn of its loop.
SERVE_POINTS = [
    ("search2o/cli/server.py:serve", TERM),
    ("search2o/stop_signals.py:_handling", INT),
    ("search2o/cli/server.py:_check_port_free", TERM),
    ("search2o/api/app.py:create_app", INT),
    ("search2o/storage/db.py:Database.upgrade", TERM),
    ("search2o/cli/server.py:_prepare", TERM),
    ("search2o/cli/server.py:_uvicorn_config", INT),
    ("uvicorn/server.py:Server.run", TERM),
    ("uvicorn/config.py:Config.load", TERM),
    ("uvicorn/server.py:Server.startup", INT),
    ("uvicorn/server.py:Server.main_loop", TERM),
]

WORKER_POINTS = [
    ("search2o/cli/worker.py:worker", TERM),
    ("search2o/stop_signals.py:_handling", TERM),
    ("search2o/cli/common.py:open_runtime", INT),
    ("search2o/jobs/kinds.py:open_job_queue", TERM),
    ("search2o/jobs/queue.py:JobQueue.run_worker", INT),
    ("search2o/jobs/queue.py:JobQueue.start_consumer", TERM),
]

# Before the command's handlers are in (its first line, and the call that puts them in) the
# default action applies: SIGTERM ends the process, SIGINT raises KeyboardInterrupt, which the
# CLI turns into exit code 130. Either way the process ends.
BEFORE_HANDLERS = (":serve", ":worker", "stop_signals.py:_handling")
DEFAULT_CODES = {130, -signal.SIGTERM}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEARCH2O_")}
    env.update(SEARCH2O_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1", NO_COLOR="1")
    return env


def _run_until_stopped(
    tmp_path: Path, point: str, signum: int, *args: str
) -> subprocess.CompletedProcess[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", STARTER, point, str(int(signum)), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(tmp_path),
    )
    try:
        out, _ = child.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        child.kill()
        out, _ = child.communicate()
        pytest.fail(f"still running 90 s after {signal.Signals(signum).name} at {point}:\n{out}")
    return subprocess.CompletedProcess(child.args, child.returncode, out, "")


CASES = [("serve", point, signum) for point, signum in SERVE_POINTS] + [
    ("worker", point, signum) for point, signum in WORKER_POINTS
]
LAST_LINE = {"serve": "search2o stopped", "worker": "worker stopped"}


@pytest.mark.parametrize(
    ("command", "point", "signum"), CASES, ids=[f"{c}-{p}" for c, p, _ in CASES]
)
def test_serve_and_worker_stop_on_a_signal_at_any_point_of_their_start(
    tmp_path: Path, command: str, point: str, signum: int
) -> None:
    args = ("serve", "--port", str(free_port())) if command == "serve" else ("worker",)
    done = _run_until_stopped(tmp_path, point, signum, *args)
    assert f"sending signal {int(signum)} at {point}" in done.stdout, done.stdout
    if point.endswith(BEFORE_HANDLERS):
        assert done.returncode in DEFAULT_CODES, done.stdout
    else:
        assert done.returncode == 0, done.stdout
        assert done.stdout.rstrip().endswith(LAST_LINE[command]), done.stdout
    assert "Traceback" not in done.stdout, done.stdout
