"""CLI commands that run things: ``serve``, ``demo`` and ``db``."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from search2o.cli.common import console, handle_errors, open_runtime, settings
from search2o.cli.knowledge import print_hits, run_ingest
from search2o.errors import InputError
from search2o.knowledge.access import AccessList

__all__ = ["db_app", "demo", "serve"]

db_app = typer.Typer(help="Database schema: migrate and inspect.", no_args_is_help=True)

DEMO_QUERIES = (
    "how do I keep a document visible only to one group?",
    "what happens when I ingest a file that did not change?",
)


@handle_errors
def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="TCP port (default 8000).")] = None,
) -> None:
    """Run the HTTP API (OpenAPI docs at /docs)."""
    import uvicorn

    from search2o.api.app import create_app

    chosen = settings(host=host, port=port)
    app = create_app(chosen)
    # Load the embedding model while the server starts, not on the first search.
    runtime = app.state.runtime
    threading.Thread(target=lambda: runtime.embedder.embed(["warm-up"]), daemon=True).start()
    uvicorn.run(app, host=chosen.host, port=chosen.port, log_config=None)


@handle_errors
def demo(
    path: Annotated[Path, typer.Argument(help="Folder to ingest (default: ./docs).")] = Path(
        "docs"
    ),
    query: Annotated[
        list[str] | None, typer.Option("--query", "-q", help="Question to search (repeatable).")
    ] = None,
) -> None:
    """Ingest a folder on the embedded defaults and run searches over it."""
    if not path.exists():
        raise InputError("path", f"{path} does not exist; run from the repository or pass a folder")
    with open_runtime() as runtime:
        console.print(f"data directory: {runtime.settings.data_dir}", highlight=False)
        run_ingest(runtime, [path], AccessList())
        principal = runtime.local_principal()
        for question in query or DEMO_QUERIES:
            console.rule(Text(question, style="bold"))
            print_hits(runtime.knowledge.search(principal, question, 3), as_json=False)


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
