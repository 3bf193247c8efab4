"""Helpers the benchmark scripts share: console and log lines, percentiles, verdicts, PostgreSQL.

Scripts run as ``python bench/<name>.py``, so this folder is on ``sys.path`` and they import
``benchkit`` directly.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

console = Console(width=None if os.isatty(1) else 160)


def percentile(values: list[float], q: float) -> float:
    """Return the ``q``-th percentile of ``values`` (NaN when empty)."""
    return float(np.percentile(values, q)) if values else math.nan


def p50_p95(values: list[float]) -> str:
    """Return ``"p50 / p95"`` with two decimals, ``-`` when there are no values."""
    if not values:
        return "-"
    return f"{percentile(values, 50):.2f} / {percentile(values, 95):.2f}"


def log(message: str) -> None:
    """Print a progress line with the time of day."""
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/dim] {message}")


def finish(started: float, json_path: Path | None = None, payload: Any = None) -> None:
    """Write ``payload`` as JSON to ``json_path`` (when given), then log the run's duration.

    Args:
        started: ``time.perf_counter()`` at the start of the run.

    """
    if json_path is not None:
        json_path.write_text(json.dumps(payload, indent=2))
        log(f"results written to {json_path}")
    log(
        f"finished in {(time.perf_counter() - started) / 60:.1f} min; "
        f"load average={load_average()} (other processes share the CPUs)"
    )


def load_average() -> str:
    """Return the 1, 5 and 15 minute load averages (``n/a`` where the OS has none)."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def verdict(ok: bool | None) -> str:
    """Return a coloured PASS / FAIL (``n/a`` for ``None``)."""
    if ok is None:
        return "[yellow]n/a[/yellow]"
    return "[green]PASS[/green]" if ok else "[red]FAIL[/red]"


@contextmanager
def postgres_server(needed: bool) -> Iterator[Any | None]:
    """Start PostgreSQL (pgserver) in a temporary folder; stop it and delete the folder after."""
    if not needed:
        yield None
        return
    try:
        import pgserver
    except ImportError as exc:
        raise SystemExit(
            "PostgreSQL needs the pgserver package: .venv/bin/pip install -e '.[bench]'"
        ) from exc
    folder = tempfile.mkdtemp(prefix="search2o-bench-pg-")
    log(f"starting PostgreSQL (pgserver) in {folder}")
    server = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
        log("PostgreSQL stopped and its folder removed")


def pg_url(server: Any, database: str, driver: str = "postgresql+psycopg") -> str:
    """Return the URL of ``database`` on the pgserver ``server`` with ``driver``."""
    url = make_url(server.get_uri()).set(drivername=driver, database=database)
    return url.render_as_string(hide_password=False)


@contextmanager
def temporary_pg_database(server: Any, label: str) -> Iterator[str]:
    """Create an empty database named ``<label>_<8 hex>``; yield its name; drop it after."""
    name = f"{label}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(pg_url(server, "postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield name
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
