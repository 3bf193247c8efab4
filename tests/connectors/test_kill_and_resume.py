"""A sync killed with SIGKILL halfway through a 200-file folder resumes to every file once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.test_cli import SCRIPT

FILES = 200


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEARCH2O_")}
    env.update(SEARCH2O_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1", NO_COLOR="1")
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=240, check=False
    )


def _synced(database: Path) -> int:
    if not database.exists():
        return 0
    with sqlite3.connect(database, timeout=5) as db:
        try:
            row = db.execute(
                "SELECT count(*) FROM documents WHERE source_id IS NOT NULL"
            ).fetchone()
        except sqlite3.OperationalError:  # not migrated yet
            return 0
    return int(row[0])


@pytest.mark.slow
def test_a_sync_killed_halfway_resumes_and_ends_with_every_file_once(tmp_path: Path) -> None:
    folder = tmp_path / "wiki"
    folder.mkdir()
    for number in range(FILES):
        (folder / f"page{number:03d}.md").write_text(
            f"# Page {number}\n\nTopic {number}: how team {number} books its weekly room.\n"
        )
    env = _env(tmp_path)
    added = _cli(env, "sources", "add", "folder", "wiki", "--path", str(folder), "--public")
    assert added.returncode == 0, added.stderr
    database = tmp_path / "data" / "search2o.db"
    sync = subprocess.Popen(
        [str(SCRIPT), "sources", "sync", "wiki"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 180
        while _synced(database) < FILES // 3:
            assert sync.poll() is None, (
                f"the sync ended before it could be killed: {sync.returncode}"
            )
            assert time.monotonic() < deadline, "the sync made no progress"
            time.sleep(0.05)
        sync.send_signal(signal.SIGKILL)
    finally:
        if sync.poll() is None:
            sync.kill()
        sync.wait(30)
    killed_at = _synced(database)
    assert FILES // 3 <= killed_at < FILES, f"killed at {killed_at} of {FILES}"
    shown = json.loads(_cli(env, "sources", "show", "wiki", "--json").stdout)
    assert shown["status"] == "interrupted"  # its holder is dead: the next sync takes over

    resumed = _cli(env, "sources", "sync", "wiki")
    assert resumed.returncode == 0, resumed.stderr
    summary = resumed.stdout.strip().splitlines()[-1]
    # The counts go on from the checkpoint (saved every connectors.batch_size = 32 documents):
    # the resumed sync reports the whole sync, less what the kill cut after its last checkpoint.
    added = int(summary.split(" added")[0])
    assert FILES - 32 <= added <= FILES, summary
    assert ", 0 deleted, 0 unchanged, 0 failed" in summary, summary
    assert "resuming" in resumed.stderr
    with sqlite3.connect(database) as db:
        keys = [row[0] for row in db.execute("SELECT source_key FROM documents")]
    assert sorted(keys) == [f"page{n:03d}.md" for n in range(FILES)]  # each once, none missing
    again = _cli(env, "sources", "sync", "wiki")
    assert again.stdout.strip().endswith(
        f"0 added, 0 updated, 0 deleted, {FILES} unchanged, 0 failed"
    ), again.stdout
