"""CLI commands for users, their link codes and API tokens."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table

from search2o import accounts
from search2o.cli.common import (
    confirm,
    console,
    err_console,
    handle_errors,
    open_runtime,
    print_json,
    print_plain,
)
from search2o.config import server_url
from search2o.errors import InputError, NotFoundError
from search2o.signin import LINK_PATH, MAX_LINK_MINUTES, issue_login_link
from search2o.surfaces.identity import issue_link_code
from search2o.surfaces.mcp.settings import mcp_settings, public_url
from search2o.user_admin import UserChange, remove_user, update_user
from search2o.wire.names import DEFAULT_CODE_MINUTES, MAX_CODE_MINUTES

__all__ = ["tokens_app", "users_app"]

users_app = typer.Typer(help="Add, list, change and remove users.", no_args_is_help=True)
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


def _known(email: str) -> InputError:
    # An unknown user is a bad argument of the command (exit 2), as in `users login-link`.
    return InputError("email", f"no user {email.strip().lower()} (see `search2o users list`)")


@users_app.command("set")
@handle_errors
def users_set(
    email: Annotated[str, typer.Argument(help="The user to change.")],
    admin: Annotated[
        bool | None, typer.Option("--admin/--no-admin", help="Make or stop being an admin.")
    ] = None,
    group: Annotated[
        list[str] | None,
        typer.Option(
            "--group", "-g", help="Replace the groups with these (repeatable, as in `users add`)."
        ),
    ] = None,
    groups: Annotated[
        str | None,
        typer.Option(help="Replace the groups: comma-separated, e.g. hr,eng ('' for none)."),
    ] = None,
    plan: Annotated[str | None, typer.Option(help="free or paid.")] = None,
) -> None:
    """Change a user's admin flag, groups or plan; it applies from their next request.

    The last admin cannot be demoted. Groups are given as ``--group`` (repeatable) or as one
    comma-separated ``--groups`` (``''`` clears them), not both.
    """
    if group and groups is not None:
        raise InputError("groups", "give --group (repeatable) or --groups, not both")
    names = group or (None if groups is None else [g for g in groups.split(",") if g.strip()])
    change = UserChange(groups=names, is_admin=admin, plan=plan)
    if change == UserChange():
        raise InputError("options", "give --admin/--no-admin, --group/--groups or --plan")
    with open_runtime() as runtime, runtime.database.session() as session:
        try:
            user = update_user(session, email, change)
        except NotFoundError:
            raise _known(email) from None
        line = (
            f"{user.email}: groups {', '.join(user.groups) or '(none)'}; plan {user.plan}; "
            f"admin {'yes' if user.is_admin else 'no'}"
        )
    console.print(line, highlight=False)


@users_app.command("remove")
@handle_errors
def users_remove(
    email: Annotated[str, typer.Argument(help="The user to remove.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Remove a user with their conversations, memories, tokens and browser sessions.

    Their tokens and sessions stop working at once. The last admin cannot be removed.
    """
    with open_runtime() as runtime:
        with runtime.database.session() as session:
            try:
                address = accounts.get_user(session, email).email  # unknown: before the question
            except NotFoundError:
                raise _known(email) from None
        if not yes:
            confirm(
                f"Remove {address} with their conversations, memories, tokens, browser "
                "sessions and linked accounts?"
            )
        with runtime.database.session() as session:
            remove_user(session, address)
    console.print(f"removed {address}", highlight=False)


@users_app.command("link-code")
@handle_errors
def users_link_code(
    email: Annotated[str, typer.Argument(help="The user the code links an account to.")],
    surface: Annotated[
        str | None, typer.Option(help="Only on this surface (e.g. slack); default: any.")
    ] = None,
    minutes: Annotated[
        int,
        typer.Option(min=1, max=MAX_CODE_MINUTES, help="How long the code stays valid."),
    ] = DEFAULT_CODE_MINUTES,
) -> None:
    """Print a one-time code that links an external account (Slack, Telegram ...) to a user.

    The user types it where the surface asks for it. Only its hash is stored; minting another
    drops the user's earlier unused code.
    """
    with open_runtime() as runtime, runtime.database.session() as session:
        user = accounts.get_user(session, email)
        issued = issue_link_code(session, user.id, surface=surface, minutes=minutes)
    where = f"on {issued.surface}" if issued.surface else "on any surface"
    console.print(
        f"link code of {issued.email} {where}, valid until {issued.expires_at:%Y-%m-%d %H:%M} "
        "UTC (shown once):",
        highlight=False,
    )
    print_plain(issued.code)
    if issued.surface in (None, "telegram"):
        from search2o.surfaces.telegram.surface import deep_link

        link = deep_link(runtime.settings, issued.code)
        if link is not None:
            console.print(f"Telegram: open {link}", highlight=False)


@users_app.command("login-link")
@handle_errors
def users_login_link(
    email: Annotated[str, typer.Argument(help="The user the link signs in.")],
    minutes: Annotated[
        int | None,
        typer.Option(
            min=1, max=MAX_LINK_MINUTES, help="Minutes it stays valid (web.login_link_minutes)."
        ),
    ] = None,
) -> None:
    """Print a one-time link that signs a user in to the Web App (for installs without an IdP).

    It opens a page that shows whom it signs in; the page's button signs in (opening the link
    alone, e.g. by a mail scanner, uses nothing up). It works once, only its hash is stored,
    and it is built on the server's public URL (mcp.public_url, else the address serve
    prints).
    """
    with open_runtime() as runtime, runtime.database.session() as session:
        chosen = runtime.settings
        issued = issue_login_link(session, email, minutes or chosen.web.login_link_minutes)
    console.print(
        f"sign-in link of {issued.email}, valid once until {issued.expires_at:%Y-%m-%d %H:%M} "
        "UTC (shown once):",
        highlight=False,
    )
    print_plain(f"{public_url(chosen)}{LINK_PATH}{issued.value}")
    if mcp_settings(chosen).public_url is None:
        # This command does not know where the server runs: say the address is a guess.
        err_console.print(
            f"note: built on {server_url(chosen)} (serve's host and port as configured here); "
            "set mcp.public_url (SEARCH2O_MCP__PUBLIC_URL) to the address your users open",
            soft_wrap=True,
            highlight=False,
        )


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
    """List tokens by prefix (secrets are never stored).

    Scope "local mode": a token-mode server refuses it; "surface NAME": a surface's service
    token, which acts only for accounts linked on that surface.
    """
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
            _scope(t),
        )
    console.print(table)


def _scope(token: accounts.TokenInfo) -> str:
    if token.surface is not None:
        return f"surface {token.surface}"
    return "local mode" if token.local_only else ""


@tokens_app.command("revoke")
@handle_errors
def tokens_revoke(
    token: Annotated[str, typer.Argument(help="The token, or its prefix as listed.")],
) -> None:
    """Revoke a token; requests carrying it are refused from now on."""
    with open_runtime() as runtime, runtime.database.session() as session:
        info = accounts.revoke_token(session, token)
    owner = info.email or f"the {info.surface} surface"
    console.print(f"revoked {info.prefix} of {owner}", highlight=False)
