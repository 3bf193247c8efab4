"""The ``search2o`` command (Typer): one module per command group."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from search2o import extensions
from search2o.cli import (
    accounts,
    agent_runs,  # noqa: F401 - registers `agents run` and `agents validate`
    agents,
    chat,
    keys,
    knowledge,
    memory,
    retention,
    server,
    state,
    surfaces,
    worker,
)
from search2o.cli.common import OneLineUsageErrors, set_global_options

__all__ = ["app", "main"]

app = typer.Typer(
    name="search2o",
    help=(
        "search2o: conversations with your company's knowledge.\n\n"
        "Start with `search2o demo`, then `search2o ingest PATH` and `search2o chat`. "
        "Settings come from SEARCH2O_* environment variables and an optional search2o.toml."
    ),
    # Environment variable names go in the epilog, which spans the terminal: in an option's
    # help cell (a narrow column at 80 columns) Rich cuts a long name with an ellipsis.
    epilog=(
        "Environment: SEARCH2O_DATA_DIR (--data-dir), SEARCH2O_DATABASE_URL (--database-url); "
        "every setting: docs/configuration.md."
    ),
    no_args_is_help=True,
    cls=OneLineUsageErrors,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _global(
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Data folder (SQLite file, keys)."),
    ] = None,
    database_url: Annotated[
        str | None,
        typer.Option(help="SQLAlchemy URL, e.g. postgresql+psycopg://..."),
    ] = None,
) -> None:
    set_global_options(data_dir, database_url)


app.command(rich_help_panel="Knowledge")(knowledge.ingest)
app.command(rich_help_panel="Knowledge")(knowledge.search)
app.command(rich_help_panel="Knowledge")(knowledge.reindex)
app.add_typer(knowledge.documents_app, name="documents", rich_help_panel="Knowledge")
app.command(rich_help_panel="Chat")(chat.chat)
app.command(rich_help_panel="Chat")(chat.ask)
app.command(rich_help_panel="Run")(server.demo)
app.command(rich_help_panel="Run", epilog=server.SERVE_EPILOG)(server.serve)
app.command(rich_help_panel="Run")(worker.worker)
app.add_typer(server.db_app, name="db", rich_help_panel="Admin")
app.add_typer(accounts.users_app, name="users", rich_help_panel="Admin")
app.add_typer(accounts.tokens_app, name="tokens", rich_help_panel="Admin")
app.add_typer(keys.keys_app, name="keys", rich_help_panel="Admin")
app.add_typer(retention.retention_app, name="retention", rich_help_panel="Admin")
app.add_typer(state.state_app, name="state", rich_help_panel="Admin")
app.add_typer(worker.jobs_app, name="jobs", rich_help_panel="Admin")
app.add_typer(surfaces.surfaces_app, name="surfaces", rich_help_panel="Admin")
app.add_typer(memory.memory_app, name="memory", rich_help_panel="Chat")
app.add_typer(agents.agents_app, name="agents", rich_help_panel="Agents")
for _extension in extensions.discover():  # surfaces' and connectors' commands
    if _extension.add_commands is not None:
        _extension.add_commands(app)


def main() -> None:
    """Entry point of the ``search2o`` console script."""
    app()
