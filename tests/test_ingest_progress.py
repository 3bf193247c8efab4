"""search2o ingest's progress: a bar on a terminal, plain lines in a log."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from search2o.cli import ingest_progress
from search2o.cli.common import SafeConsole
from search2o.cli.ingest_progress import IngestProgress
from search2o.knowledge.ingest import IngestOutcome
from tests.test_cli import GOOD_MD, Cli

PLAIN = re.compile(
    r"^ingesting: (\d+)/(\d+) files, (\d+) chunks, \d+\.\d chunks/s(, about (\S+) left)?$"
)


def _outcomes() -> list[IngestOutcome]:
    return [
        IngestOutcome("/kb/a.md", "added", 5),
        IngestOutcome("/kb/b.md", "unchanged", 7),  # nothing written: counts no chunks
        IngestOutcome("/kb/c.md", "updated", 3),
    ]


def test_a_log_gets_plain_lines_with_files_chunks_rate_and_time_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ingest_progress, "PLAIN_EVERY_S", 0.0)
    out = io.StringIO()
    with IngestProgress(SafeConsole(file=out, force_terminal=False, width=200)) as progress:
        progress.total(3)
        for outcome in _outcomes():
            progress.done(outcome)
    lines = out.getvalue().splitlines()
    matches = [PLAIN.match(line) for line in lines]
    assert all(matches), lines
    assert [(m[1], m[2], m[3]) for m in matches if m] == [
        ("1", "3", "5"),
        ("2", "3", "5"),
        ("3", "3", "8"),
        ("3", "3", "8"),  # the last line, on leaving
    ]
    assert matches[0] and matches[0][5] is not None  # time left while files remain
    assert matches[-1] and matches[-1][4] is None  # none once all are done
    assert "\x1b" not in out.getvalue()


def test_a_log_is_not_flooded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_progress, "PLAIN_EVERY_S", 3600.0)
    out = io.StringIO()
    with IngestProgress(SafeConsole(file=out, force_terminal=False, width=200)) as progress:
        progress.total(300)
        for _ in range(100):
            for outcome in _outcomes():
                progress.done(outcome)
    assert out.getvalue().splitlines() == [PLAIN.match(out.getvalue().strip())[0]]  # type: ignore[index]


def test_a_terminal_gets_the_bar_and_no_plain_lines() -> None:
    out = io.StringIO()
    with IngestProgress(SafeConsole(file=out, force_terminal=True, width=200)) as progress:
        progress.total(3)
        for outcome in _outcomes():
            progress.done(outcome)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "3/3 files, 8 chunks" in shown and "chunks/s" in shown
    assert "ingesting: " not in shown


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0s"), (59.6, "1m00s"), (75, "1m15s"), (3700, "1h01m")]
)
def test_time_left_reads_as_people_write_it(seconds: float, text: str) -> None:
    assert ingest_progress._duration(seconds) == text


def test_the_cli_prints_progress_lines_to_stderr_in_a_log(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(ingest_progress, "PLAIN_EVERY_S", 0.0)
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.md").write_text(GOOD_MD)
    (folder / "b.md").write_text("# Canteen\n\nThe canteen opens at noon.\n")
    result = Cli(tmp_path / "data", None).ok("ingest", str(folder))
    progress = [line for line in result.stderr.splitlines() if line.startswith("ingesting: ")]
    assert [PLAIN.match(line)[1] for line in progress] == ["1", "2", "2"], progress  # type: ignore[index]
    assert "2 added" in result.stdout
