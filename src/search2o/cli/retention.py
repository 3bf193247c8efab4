"""CLI commands for retention: remove expired conversations now."""

from __future__ import annotations

from typing import Annotated

import typer

from search2o.cli.common import console, handle_errors, open_runtime, print_json
from search2o.query.retention import sweep

__all__ = ["retention_app"]

retention_app = typer.Typer(help="Conversation retention.", no_args_is_help=True)


@retention_app.command("sweep")
@handle_errors
def retention_sweep(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Delete expired conversations, ended browser sessions and spent sign-in links.

    The server also does this every hour.
    """
    with open_runtime() as runtime:
        report = sweep(runtime.database, runtime.vault, runtime.settings.retention)
    if as_json:
        print_json(
            {
                "deleted": report.deleted,
                "by_plan": report.by_plan,
                "sessions": report.sessions,
                "grants": report.grants,
            },
            indent=None,
        )
        return
    plans = ", ".join(f"{plan}: {count}" for plan, count in sorted(report.by_plan.items()))
    console.print(
        f"deleted {report.deleted} expired conversations ({plans or 'no limited plan'}), "
        f"{report.sessions} ended browser sessions, {report.grants} spent sign-in grants"
    )
