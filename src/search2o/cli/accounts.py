"""CLI commands for users and API tokens."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table

from search2o import accounts
from search2o.cli.common import console, handle_errors, open_runtime, print_json, print_plain

__all__ = ["tokens_app", "users_app"]

users_app = typer.Typer(help="Add and list users.", no_args_is_help=True)
tokens_app = typer.Typer(help="Issue, list and revoke API tokens.", no_args_is_help=True)


@users_app.command("add")
@handle_errors
def users_add(
    email: Annotated[str, typer.Argument(help="The user's email (their identity).")],
    group: Annotated[
        list[str] | None, typer.Option("--group", "-g", help="Group membership (repeatable).")
    ] = None,
    admin: Annotated[bool, typer.Option("--admin", help="May manage users and documents.")] = False,
    name: Annotated[str, typer.Option(help="Display name.")] = "",
    plan: Annotated[str, typer.Option(help="free or paid.")] = "free",
) -> None:
    """Add a user and print their first API token (shown once, stored hashed)."""
    with open_runtime() as runtime, runtime.database.session() as session:
        user = accounts.create_user(
            session, email, display_name=name, groups=group or [], is_admin=admin, plan=plan
        )
        token = accounts.issue_token(session, user, "created with the user")
    console.print(f"added {user.email}; API token (shown once):", highlight=False)
    print_plain(token)


@users_app.command("list")
@handle_errors
def users_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List users with their groups, plan and admin flag."""
    with open_runtime() as runtime, runtime.database.session() as session:
        users = accounts.list_users(session)
    if as_json:
        rows = [
            {
                "email": u.email,
                "name": u.display_name,
                "groups": u.groups,
                "plan": u.plan,
                "admin": u.is_admin,
            }
            for u in users
        ]
        print_json(rows)
        return
    table = Table()
    for column in ("email", "name", "groups", "plan", "admin"):
        table.add_column(column)
    for u in users:
        admin = "yes" if u.is_admin else ""
        table.add_row(u.email, u.display_name, ", ".join(u.groups), u.plan, admin)
    console.print(table)


@tokens_app.command("issue")
@handle_errors
def tokens_issue(
    email: Annotated[str, typer.Argument(help="Owner of the new token.")],
    name: Annotated[str, typer.Option(help="What the token is for.")] = "",
) -> None:
    """Issue another API token for a user (printed once)."""
    with open_runtime() as runtime, runtime.database.session() as session:
        token = accounts.issue_token(session, accounts.get_user(session, email), name)
    print_plain(token)


@tokens_app.command("list")
@handle_errors
def tokens_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List tokens by prefix (secrets are never stored); scope "local mode": token-mode refuses."""
    with open_runtime() as runtime, runtime.database.session() as session:
        tokens = accounts.list_tokens(session)
    if as_json:
        print_json([asdict(t) for t in tokens])
        return
    table = Table()
    # The prefix is what `tokens revoke` takes: never wrapped or cut.
    table.add_column("prefix", no_wrap=True, min_width=12)
    for column in ("user", "name", "created", "last used", "state", "scope"):
        table.add_column(column)
    for t in tokens:
        table.add_row(
            t.prefix,
            t.email,
            t.name,
            f"{t.created_at:%Y-%m-%d %H:%M}",
            f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "",
            "revoked" if t.revoked else "active",
            "local mode" if t.local_only else "",
        )
    console.print(table)


@tokens_app.command("revoke")
@handle_errors
def tokens_revoke(
    token: Annotated[str, typer.Argument(help="The token, or its prefix as listed.")],
) -> None:
    """Revoke a token; requests carrying it are refused from now on."""
    with open_runtime() as runtime, runtime.database.session() as session:
        info = accounts.revoke_token(session, token)
    console.print(f"revoked {info.prefix} of {info.email}", highlight=False)
