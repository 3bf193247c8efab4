"""CLI commands for surfaces: service tokens and linked accounts (``search2o surfaces ...``).

Link codes for a user are ``search2o users link-code EMAIL`` (:mod:`search2o.cli.accounts`).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from search2o import accounts
from search2o.cli.common import console, handle_errors, open_runtime, print_json, print_plain
from search2o.surfaces import identity

__all__ = ["surfaces_app"]

surfaces_app = typer.Typer(
    help="Service tokens of surfaces (Slack, Telegram ...) and the accounts linked on them.",
    no_args_is_help=True,
)


@surfaces_app.command("token")
@handle_errors
def surfaces_token(
    surface: Annotated[str, typer.Argument(help="The surface, e.g. slack.")],
    name: Annotated[str, typer.Option(help="What the token is for.")] = "",
) -> None:
    """Issue a service token of SURFACE (printed once, stored hashed).

    It is no user: it acts only for accounts linked on SURFACE (X-Search2o-Act-As:
    user:<workspace>:<id>) or as the surface's shared-channel principal (shared:<workspace>),
    never with admin rights. Revoke it with `search2o tokens revoke PREFIX`.
    """
    with open_runtime() as runtime, runtime.database.session() as session:
        token = accounts.issue_surface_token(session, surface, name)
    print_plain(token)


@surfaces_app.command("identities")
@handle_errors
def surfaces_identities(
    surface: Annotated[str | None, typer.Option(help="Only this surface.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List linked accounts: surface, workspace, external id, user, how they were linked."""
    with open_runtime() as runtime, runtime.database.session() as session:
        found = identity.list_identities(session, surface)
    rows = [
        {
            "surface": i.surface,
            "workspace": i.workspace,
            "external_user_id": i.external_user_id,
            "email": i.email,
            "linked_by": i.linked_by,
            "created_at": i.created_at.isoformat(),
        }
        for i in found
    ]
    if as_json:
        print_json(rows)
        return
    table = Table()
    for column in ("surface", "workspace", "external id", "user", "linked by", "linked"):
        table.add_column(column)
    for i in found:
        table.add_row(
            i.surface,
            i.workspace,
            i.external_user_id,
            i.email,
            i.linked_by,
            f"{i.created_at:%Y-%m-%d %H:%M}",
        )
    console.print(table)


@surfaces_app.command("unlink")
@handle_errors
def surfaces_unlink(
    surface: Annotated[str, typer.Argument(help="The surface, e.g. slack.")],
    workspace: Annotated[str, typer.Argument(help="The workspace/team id, e.g. T0123ABCD.")],
    external_user_id: Annotated[str, typer.Argument(help="The account's id, e.g. U0456EFGH.")],
) -> None:
    """Unlink an account: the surface can no longer act for its user."""
    with open_runtime() as runtime, runtime.database.session() as session:
        gone = identity.unlink(session, surface, workspace, external_user_id)
    console.print(
        f"unlinked {gone.surface} account {gone.workspace}:{gone.external_user_id} "
        f"from {gone.email}",
        highlight=False,
    )
