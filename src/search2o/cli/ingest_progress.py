"""Progress of ``search2o ingest``: a bar on a terminal, plain lines otherwise.

On a terminal (stderr), a Rich bar shows files done of the total, chunks written, chunks per
second and the time left. Elsewhere (a log, CI, a pipe), a plain line is printed at most every
:data:`PLAIN_EVERY_S` seconds and once at the end, so a long run can be followed in a log
without a screen of control characters::

    ingesting: 40/162 files, 310 chunks, 5.2 chunks/s, about 2m10s left

The time left assumes the remaining files take as long each as those done so far.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from search2o.cli.common import SafeConsole
from search2o.knowledge.ingest import IngestOutcome

__all__ = ["PLAIN_EVERY_S", "IngestProgress"]

PLAIN_EVERY_S = 10.0
"""Seconds between two plain progress lines (no terminal)."""


def _duration(seconds: float) -> str:
    """``75`` -> ``"1m15s"``; ``3700`` -> ``"1h01m"``."""
    whole = round(seconds)
    if whole >= 3600:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    if whole >= 60:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole}s"


class IngestProgress:
    """Follows one ingest: :meth:`total` once the files are known, :meth:`done` per file.

    Args:
        console: where progress goes (:data:`~search2o.cli.common.err_console`: it removes
            control characters from file names); a terminal gets the bar.

    """

    def __init__(self, console: SafeConsole) -> None:
        self.console = console
        self.files = 0
        self.chunks = 0
        self._total: int | None = None
        self._started = time.monotonic()
        self._printed = self._started
        self._bar = Progress(
            TextColumn("[bold]ingesting"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("files, {task.fields[chunks]} chunks, {task.fields[rate]} chunks/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        self._task = self._bar.add_task("", total=None, chunks=0, rate="0.0")

    def __enter__(self) -> IngestProgress:
        self._bar.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._bar.__exit__(kind, value, traceback)
        if kind is None and not self.console.is_terminal and self.files:
            self.console.print(self.line(), highlight=False, soft_wrap=True)

    def total(self, count: int) -> None:
        """Set the number of files the run will go through."""
        self._total = count
        self._bar.update(self._task, total=count)

    def done(self, outcome: IngestOutcome) -> None:
        """Count one file's outcome; print a plain line when one is due."""
        self.files += 1
        if outcome.status in ("added", "updated"):
            self.chunks += outcome.chunks
        name = outcome.source.rsplit("/", 1)[-1]
        self._bar.update(
            self._task, advance=1, description=name, chunks=self.chunks, rate=f"{self.rate():.1f}"
        )
        now = time.monotonic()
        if not self.console.is_terminal and now - self._printed >= PLAIN_EVERY_S:
            self._printed = now
            self.console.print(self.line(), highlight=False, soft_wrap=True)

    def rate(self) -> float:
        """Chunks written per second so far."""
        return self.chunks / max(time.monotonic() - self._started, 1e-6)

    def line(self) -> str:
        """``ingesting: 40/162 files, 310 chunks, 5.2 chunks/s, about 2m10s left``."""
        total = "?" if self._total is None else str(self._total)
        text = f"ingesting: {self.files}/{total} files, {self.chunks} chunks, "
        text += f"{self.rate():.1f} chunks/s"
        if self._total is not None and 0 < self.files < self._total:
            elapsed = time.monotonic() - self._started
            text += f", about {_duration(elapsed / self.files * (self._total - self.files))} left"
        return text
