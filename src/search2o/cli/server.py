"""CLI commands that run things: ``serve``, ``demo`` and ``db``.

``serve`` runs one HTTP process, or with ``--workers N`` (``serve.workers``) N uvicorn worker
processes on one socket; each builds its app with the factory
``search2o.api.app:create_app``, which reads its settings from the environment, so this
command writes the options it was given there first (``SEARCH2O_HOST``, ``SEARCH2O_PORT``,
``SEARCH2O_DATA_DIR``, ``SEARCH2O_DATABASE_URL``, ``SEARCH2O_INSECURE_LOCAL_MODE``). On SIGTERM
(or Ctrl-C) every process drains (``serve.drain_s``, see :mod:`search2o.api.app`) and the
command exits 0.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from search2o.accounts import (
    LOCAL_MODE_TOKEN_NAME,
    get_user,
    local_mode_token,
    revoke_named_tokens,
)
from search2o.cli.chat import print_turn
from search2o.cli.common import console, err_console, handle_errors, open_runtime, settings
from search2o.cli.knowledge import run_ingest
from search2o.config import Settings, server_url
from search2o.errors import InputError, NotFoundError
from search2o.knowledge.access import AccessList
from search2o.netpolicy import is_loopback_host
from search2o.observability.metrics import MULTIPROC_ENV
from search2o.runtime import Runtime
from search2o.stop_signals import StartupStopped, StopGuard, stop_guard

__all__ = ["SERVE_EPILOG", "db_app", "demo", "serve"]

db_app = typer.Typer(help="Database schema: migrate and inspect.", no_args_is_help=True)

DEMO_FOLDER = "demo"
"""The demo's own data folder, inside the configured data folder."""

# One conversation over this repository's docs/: a question, an elliptical follow-up, thanks
# (answered without searching) and a question the docs cannot answer ("not found").
DEMO_TURNS = (
    "How do I keep a document visible only to one group?",
    "and what happens when I ingest the same file again?",
    "thanks!",
    "What is the wifi password of the Paris office?",
)


SERVE_EPILOG = (
    "Environment: SEARCH2O_SERVE__WORKERS (--workers), SEARCH2O_INSECURE_LOCAL_MODE "
    "(--insecure-local-mode), SEARCH2O_HOST (--host), SEARCH2O_PORT (--port)."
)
"""``serve --help``'s last paragraph: the environment variables of its options, full width."""

IngestOpt = Annotated[
    list[Path] | None,
    typer.Option("--ingest", help="Ingest this file or folder before serving (repeatable)."),
]


@handle_errors
def serve(
    ingest: IngestOpt = None,
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="TCP port (default 8000).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="HTTP worker processes, 1-64 (default serve.workers, 1); more than one needs "
            "PostgreSQL.",
            show_default=False,
        ),
    ] = None,
    insecure_local_mode: Annotated[
        bool,
        typer.Option(
            "--insecure-local-mode",
            help="Serve local single-user mode (no token, everyone is the local admin) on a "
            "non-loopback address anyway.",
        ),
    ] = False,
) -> None:
    """Run the HTTP API (OpenAPI docs at /docs); print its URL and, in local mode, a token.

    Local mode is refused beyond loopback (exit 2) unless --insecure-local-mode is given.
    SIGTERM drains: responses in flight get serve.drain_s seconds, then the command exits 0.
    SIGTERM or Ctrl-C while it starts ends the start where it is, and the command exits 0.
    """
    with stop_guard() as guard, contextlib.suppress(StartupStopped):
        _serve(guard, ingest, host, port, workers, insecure_local_mode)
    console.print("search2o stopped", soft_wrap=True)


def _serve(
    guard: StopGuard,
    ingest: list[Path] | None,
    host: str | None,
    port: int | None,
    workers: int | None,
    insecure_local_mode: bool,
) -> None:
    """Check the options, prepare, and serve until a stop (see :func:`serve`).

    Raises:
        InputError: a bad option (field named).
        StartupStopped: a stop signal arrived before serving began.

    """
    chosen = settings(host=host, port=port, insecure_local_mode=insecure_local_mode or None)
    problem = chosen.local_mode_problem()
    if problem is not None:
        raise InputError("host", problem)
    count = workers or chosen.serve.workers
    if count > 1 and not chosen.resolved_database_url.startswith("postgresql"):
        raise InputError(
            "--workers",
            f"{count} worker processes need PostgreSQL (SEARCH2O_DATABASE_URL="
            "postgresql+psycopg://...); SQLite serves one process: use --workers 1",
        )
    for path in ingest or []:
        if not path.exists():
            raise InputError("ingest", f"{path} does not exist")
    _check_port_free(chosen.host, chosen.port)
    if count == 1:
        _serve_one(guard, chosen, ingest)
        return
    with Runtime(chosen) as runtime:  # migrations, ingestion and tokens, once
        _prepare(runtime, chosen, ingest)
    _export(chosen)
    with _metrics_folder():
        _serve_many(guard, chosen, count)


def _serve_one(guard: StopGuard, chosen: Settings, ingest: list[Path] | None) -> None:
    """Serve in this process; the app's runtime closes when the server ends or never starts."""
    from search2o.api.app import create_app

    app = create_app(chosen)
    runtime = app.state.runtime
    try:
        _prepare(runtime, chosen, ingest)
        # Load the embedding model while the server starts, not on the first search.
        threading.Thread(target=lambda: runtime.embedder.embed(["warm-up"]), daemon=True).start()
        server = _uvicorn_server(app, chosen, 1)
    except BaseException:
        runtime.close()  # the app's lifespan, which would close it, never ran
        raise
    # From here a stop asks the server to exit: before uvicorn installs its own handlers, while
    # they are in (uvicorn's), and when uvicorn hands back the signals it caught.
    guard.serving(lambda: setattr(server, "should_exit", True))
    server.run()


def _serve_many(guard: StopGuard, chosen: Settings, count: int) -> None:
    """Serve ``count`` worker processes on one socket under uvicorn's supervisor.

    The supervisor installs its own handlers when it is made (uvicorn ``Multiprocess``) and
    queues what arrives until its loop handles it, so no signal is lost from then on.
    """
    from uvicorn.supervisors import Multiprocess

    config = _uvicorn_config("search2o.api.app:create_app", chosen, count)
    sock = config.bind_socket()
    try:
        supervisor = Multiprocess(config, sockets=[sock])
        guard.serving(supervisor.should_exit.set)
        supervisor.run()
    finally:
        sock.close()


def _prepare(runtime: Runtime, chosen: Settings, ingest: list[Path] | None) -> None:
    """Ingest what ``--ingest`` names; print the URL and what the auth mode means."""
    if ingest:
        run_ingest(runtime, list(ingest), AccessList())
    console.print(f"search2o at {server_url(chosen)}  (API docs: /docs)", soft_wrap=True)
    if chosen.auth_mode == "local":
        with runtime.database.session() as session:
            token = local_mode_token(session, chosen.local_user_email)
        console.print(
            "local single-user mode: no token needed; clients that send one may use "
            f"{token} (local mode only: a token-mode server refuses it)",
            soft_wrap=True,
        )
        if chosen.insecure_local_mode and not is_loopback_host(chosen.host):
            err_console.print(
                f"warning: --insecure-local-mode: every client that reaches {chosen.host} acts "
                "as the local admin without a token",
                soft_wrap=True,
            )
    else:
        # A token printed by an earlier local-mode start must not carry local admin rights
        # into token mode. Where local mode never ran there is no local user, and none is made:
        # a tokenless admin would count as an admin, so the real last admin could be removed.
        with runtime.database.session() as session:
            try:
                user = get_user(session, chosen.local_user_email)
            except NotFoundError:
                revoked = 0
            else:
                revoked = revoke_named_tokens(session, user, LOCAL_MODE_TOKEN_NAME)
        console.print(
            "token mode: every request needs `Authorization: Bearer <token>` "
            "(search2o users add EMAIL prints one)"
            + (f"; {revoked} local-mode serve token(s) revoked" if revoked else ""),
            soft_wrap=True,
        )


def _export(chosen: Settings) -> None:
    """Write what the worker processes' factory must see into this process's environment."""
    os.environ.update(
        {
            "SEARCH2O_HOST": chosen.host,
            "SEARCH2O_PORT": str(chosen.port),
            "SEARCH2O_DATA_DIR": str(chosen.data_dir),
            "SEARCH2O_DATABASE_URL": chosen.resolved_database_url,
            "SEARCH2O_INSECURE_LOCAL_MODE": str(chosen.insecure_local_mode).lower(),
        }
    )


@contextmanager
def _metrics_folder() -> Iterator[None]:
    """Give the worker processes a shared, empty Prometheus multiprocess folder.

    prometheus-client's docs ("Multiprocess Mode") require it wiped between runs: one given in
    ``PROMETHEUS_MULTIPROC_DIR`` is emptied of its ``*.db`` files, else a temporary one is made
    and removed at the end.
    """
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        for stale in Path(given).glob("*.db"):
            stale.unlink()
        yield
        return
    folder = tempfile.mkdtemp(prefix="search2o-metrics-")
    os.environ[MULTIPROC_ENV] = folder
    try:
        yield
    finally:
        os.environ.pop(MULTIPROC_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


def _uvicorn_config(app: object, chosen: Settings, workers: int) -> Any:
    """Build the ``uvicorn.Config`` of ``serve``: ``app`` an ASGI app or a factory's path.

    Draining and worker health checks follow ``serve.drain_s`` and
    ``serve.worker_healthcheck_s``; logging is ours (``log_config=None``).
    """
    import uvicorn

    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=chosen.host,
        port=chosen.port,
        workers=workers,
        factory=workers > 1,
        log_config=None,
        timeout_graceful_shutdown=chosen.serve.drain_s,
        timeout_worker_healthcheck=chosen.serve.worker_healthcheck_s,
    )


def _uvicorn_server(app: object, chosen: Settings, workers: int) -> Any:
    """Build a ``uvicorn.Server`` on :func:`_uvicorn_config`; ``run()`` serves until a stop."""
    import uvicorn

    return uvicorn.Server(_uvicorn_config(app, chosen, workers))


def _check_port_free(host: str, port: int) -> None:
    """Refuse to start when the address is taken, before printing a URL that would not work.

    Raises:
        InputError: another process listens on ``host:port`` (field ``port``).

    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise InputError("port", f"cannot listen on {host}:{port}: {exc.strerror}") from exc


@handle_errors
def demo(
    path: Annotated[Path, typer.Argument(help="Folder to ingest (default: ./docs).")] = Path(
        "docs"
    ),
    question: Annotated[
        list[str] | None,
        typer.Option("--question", "-q", help="A turn of the demo conversation (repeatable)."),
    ] = None,
) -> None:
    """Ingest a folder on the embedded defaults and hold a short conversation about it.

    The demo keeps to a data folder of its own (``demo/`` in the data folder, SQLite), so its
    documents never mix with the knowledge base you ingest into; it says where it left them.
    """
    if not path.exists():
        raise InputError("path", f"{path} does not exist; run from the repository or pass a folder")
    own = settings().data_dir / DEMO_FOLDER
    chosen = settings(data_dir=own, database_url=f"sqlite:///{own / 'search2o.db'}")
    with Runtime(chosen) as runtime:
        console.print(
            f"data directory: {own} (the demo's own: your knowledge base is not touched)",
            soft_wrap=True,
            highlight=False,
        )
        run_ingest(runtime, [path], AccessList())
        principal = runtime.local_principal()
        conversation: str | None = None
        for text in question or DEMO_TURNS:
            console.rule(Text(text, style="bold"))
            last = print_turn(
                runtime.chat.run_sync(runtime.chat.prepare(principal, text, conversation))
            )
            conversation = last.get("conversation_id", conversation)
        console.print(
            f"\nContinue this conversation with `search2o --data-dir {own} chat`, or run "
            f"`search2o --data-dir {own} serve` and open the Web App at "
            f"{server_url(runtime.settings)}/ (`search2o ingest PATH` and `search2o serve` "
            "use your own data folder)",
            soft_wrap=True,
            highlight=False,
        )


@db_app.command("upgrade")
@handle_errors
def db_upgrade() -> None:
    """Apply every pending migration (also done at each start)."""
    with open_runtime(migrate=False) as runtime:
        before = runtime.database.current_revision()
        runtime.database.upgrade()
        after = runtime.database.current_revision()
    console.print(f"database {runtime.database.describe()}: {before or 'blank'} -> {after}")


@db_app.command("current")
@handle_errors
def db_current() -> None:
    """Print the applied migration revision."""
    with open_runtime(migrate=False) as runtime:
        revision = runtime.database.current_revision()
        console.print(revision or "blank (no migration applied; run `search2o db upgrade`)")
