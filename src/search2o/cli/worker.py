"""CLI commands of the job queue: ``search2o worker`` and ``search2o jobs list`` / ``show``."""

from __future__ import annotations

import contextlib
import threading
from typing import Annotated

import typer
from rich.table import Table

from search2o.cli.common import (
    console,
    handle_errors,
    open_runtime,
    print_json,
    printable,
    settings,
)
from search2o.errors import InputError
from search2o.extensions import check_extras
from search2o.jobs import JobInfo, find_job, find_jobs
from search2o.jobs.kinds import open_job_queue
from search2o.stop_signals import StartupStopped, stop_guard

__all__ = ["jobs_app", "worker"]

jobs_app = typer.Typer(help="Background jobs: list and inspect.", no_args_is_help=True)


@handle_errors
def worker(
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", help="Consumer threads, 1-64 (default jobs.workers).", show_default=False
        ),
    ] = None,
) -> None:
    """Run background jobs in the foreground until SIGTERM or Ctrl-C.

    On a stop, running jobs get jobs.shutdown_timeout_s to finish, the rest go back to the queue.

    Run any number, on any host, with jobs.backend postgres or redis (sqlite: one host only).
    """
    if workers is not None and not 1 <= workers <= 64:
        raise InputError("--workers", f"must be 1-64, got {workers}")
    check_extras(settings())  # a configured surface without its extra: one line, exit 2
    released: list[str] = []
    # Stopped while starting: nothing ran, nothing to give back.
    with (
        stop_guard() as guard,
        contextlib.suppress(StartupStopped),
        open_runtime() as runtime,
        open_job_queue(runtime) as queue,
    ):
        jobs = runtime.settings.jobs
        count = workers or jobs.workers
        console.print(
            f"worker: {count} thread(s) on the {jobs.backend} job queue "
            f"{jobs.queue_name!r}; stop with Ctrl-C or SIGTERM",
            soft_wrap=True,
        )
        stop = threading.Event()
        guard.serving(stop.set)  # a signal that came first has ended the start already
        released = queue.run_worker(count, stop)
    console.print(
        "worker stopped"
        + (f"; {len(released)} running job(s) given back to the queue" if released else ""),
        soft_wrap=True,
    )


@jobs_app.command("list")
@handle_errors
def jobs_list(
    state: Annotated[
        str | None, typer.Option(help="Only jobs in this state: queued, running, done, failed.")
    ] = None,
    kind: Annotated[str | None, typer.Option(help="Only jobs of this kind.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first (1-1000).")] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List background jobs, newest first."""
    # The ledger alone: listing works while the transport (Redis) is down.
    with open_runtime() as runtime:
        found = find_jobs(runtime.database, state=state, kind=kind, limit=limit)
    if as_json:
        print_json([_as_json(job) for job in found], indent=None)
        return
    table = Table(title=f"{len(found)} job(s)")
    for column in ("id", "kind", "state", "attempts", "created", "error"):
        table.add_column(column, overflow="fold")
    for job in found:
        table.add_row(
            job.id,
            job.kind,
            job.state,
            f"{job.attempts}/{job.max_attempts}",
            job.created_at.isoformat(timespec="seconds"),
            printable(job.error or ""),
        )
    console.print(table)


@jobs_app.command("show")
@handle_errors
def jobs_show(
    job_id: Annotated[str, typer.Argument(help="The job id (32 hex digits).")],
) -> None:
    """Print one job as JSON (state, attempts, progress, result or error, payload)."""
    with open_runtime() as runtime:
        job = find_job(runtime.database, job_id)
    print_json(_as_json(job))


def _as_json(job: JobInfo) -> dict[str, object]:
    """Return what the CLI prints of a job: its public form and what an admin debugs with."""
    return {
        **job.to_public(),
        "payload": job.payload,
        "dedupe_key": job.dedupe_key,
        "owner_id": job.owner_id,
        "run_after": job.run_after.isoformat(),
        "lease_owner": job.lease_owner,
        "lease_expires_at": job.lease_expires_at.isoformat() if job.lease_expires_at else None,
    }
