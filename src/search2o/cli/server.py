"""CLI commands that run things: ``serve``, ``demo`` and ``db``."""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from search2o.accounts import (
    LOCAL_MODE_TOKEN_NAME,
    ensure_user,
    local_mode_token,
    revoke_named_tokens,
)
from search2o.cli.chat import print_turn
from search2o.cli.common import console, err_console, handle_errors, open_runtime, settings
from search2o.cli.knowledge import run_ingest
from search2o.errors import InputError
from search2o.knowledge.access import AccessList
from search2o.netpolicy import is_loopback_host

__all__ = ["db_app", "demo", "serve"]

db_app = typer.Typer(help="Database schema: migrate and inspect.", no_args_is_help=True)

# One conversation over this repository's docs/: a question, an elliptical follow-up, thanks
# (answered without searching) and a question the docs cannot answer ("not found").
DEMO_TURNS = (
    "How do I keep a document visible only to one group?",
    "and what happens when I ingest the same file again?",
    "thanks!",
    "What is the wifi password of the Paris office?",
)


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
    insecure_local_mode: Annotated[
        bool,
        typer.Option(
            "--insecure-local-mode",
            help="Serve local single-user mode (no token, everyone is the local admin) on a "
            "non-loopback address anyway. Env: SEARCH2O_INSECURE_LOCAL_MODE.",
        ),
    ] = False,
) -> None:
    """Run the HTTP API (OpenAPI docs at /docs); print its URL and, in local mode, a token.

    Local mode is refused beyond loopback (exit 2) unless --insecure-local-mode is given.
    """
    import uvicorn

    from search2o.api.app import create_app

    chosen = settings(host=host, port=port, insecure_local_mode=insecure_local_mode or None)
    problem = chosen.local_mode_problem()
    if problem is not None:
        raise InputError("host", problem)
    for path in ingest or []:
        if not path.exists():
            raise InputError("ingest", f"{path} does not exist")
    _check_port_free(chosen.host, chosen.port)
    app = create_app(chosen)
    runtime = app.state.runtime
    if ingest:
        run_ingest(runtime, list(ingest), AccessList())
    # Load the embedding model while the server starts, not on the first search.
    threading.Thread(target=lambda: runtime.embedder.embed(["warm-up"]), daemon=True).start()
    shown = "localhost" if chosen.host in ("127.0.0.1", "::1") else chosen.host
    console.print(f"search2o at http://{shown}:{chosen.port}  (API docs: /docs)", soft_wrap=True)
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
        # into token mode.
        with runtime.database.session() as session:
            user = ensure_user(session, chosen.local_user_email, is_admin=True)
            revoked = revoke_named_tokens(session, user, LOCAL_MODE_TOKEN_NAME)
        console.print(
            "token mode: every request needs `Authorization: Bearer <token>` "
            "(search2o users add EMAIL prints one)"
            + (f"; {revoked} local-mode serve token(s) revoked" if revoked else ""),
            soft_wrap=True,
        )
    uvicorn.run(app, host=chosen.host, port=chosen.port, log_config=None)


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
    """Ingest a folder on the embedded defaults and hold a short conversation about it."""
    if not path.exists():
        raise InputError("path", f"{path} does not exist; run from the repository or pass a folder")
    with open_runtime() as runtime:
        console.print(f"data directory: {runtime.settings.data_dir}", highlight=False)
        run_ingest(runtime, [path], AccessList())
        principal = runtime.local_principal()
        conversation: str | None = None
        for text in question or DEMO_TURNS:
            console.rule(Text(text, style="bold"))
            last = print_turn(
                runtime.chat.run_sync(runtime.chat.prepare(principal, text, conversation))
            )
            conversation = last.get("conversation_id", conversation)
        settings_ = runtime.settings
        shown = "localhost" if settings_.host in ("127.0.0.1", "::1") else settings_.host
        console.print(
            "\nContinue this conversation with `search2o chat`, or run `search2o serve` and "
            f"open the Web App at http://{shown}:{settings_.port}/",
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
