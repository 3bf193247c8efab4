"""CLI commands for long-term memories: ``search2o memory list|search|delete``.

They act for the local user, or with ``--user EMAIL`` for that user (an admin at the server's
console). Searching here does not count as a retrieval, and the query is never logged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer
from rich.table import Table

from search2o.cli.common import INT64_MAX, console, handle_errors, open_runtime, print_json
from search2o.errors import InputError

__all__ = ["memory_app"]

memory_app = typer.Typer(
    help="Long-term memories agents keep about a user: list, search, delete.",
    no_args_is_help=True,
)

UserOpt = Annotated[
    str | None,
    typer.Option("--user", help="Act for this user (email); default: the local user."),
]
AgentOpt = Annotated[str | None, typer.Option("--agent", help="Only this agent's memories.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

_OPTIONS = {"agent": "--agent", "label": "--label", "limit": "--limit", "offset": "--offset"}


def _as_option(exc: InputError) -> InputError:
    """Name the command-line option (``--limit``) rather than the API field (``limit``)."""
    return InputError(_OPTIONS.get(exc.field, exc.field), exc.reason)


def _when(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M}" if value else ""


@memory_app.command("list")
@handle_errors
def memory_list(
    user: UserOpt = None,
    agent: AgentOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Most memories to list.")] = 100,
    offset: Annotated[int, typer.Option(min=0, max=INT64_MAX, help="Skip this many first.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """List a user's memories, by agent and label."""
    with open_runtime() as runtime:
        principal = runtime.principal_for(user)
        try:
            rows = runtime.memory.list(principal, agent=agent, limit=limit, offset=offset)
        except InputError as exc:
            raise _as_option(exc) from None
    if as_json:
        items = [
            {
                "agent": r.agent,
                "label": r.label,
                "text": r.text,
                "created_at": r.created_at.isoformat(),
                "last_retrieved_at": r.last_retrieved_at.isoformat()
                if r.last_retrieved_at
                else None,
            }
            for r in rows
        ]
        print_json(items)
        return
    if not rows:
        console.print(f"no memories of {principal.email}")
        return
    table = Table()
    for column in ("agent", "label", "text", "stored", "last retrieved"):
        table.add_column(column, no_wrap=column in ("agent", "label"))
    for r in rows:
        table.add_row(r.agent, r.label, r.text, _when(r.created_at), _when(r.last_retrieved_at))
    console.print(table)


@memory_app.command("search")
@handle_errors
def memory_search(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    user: UserOpt = None,
    agent: AgentOpt = None,
    label: Annotated[str | None, typer.Option("--label", help="Only this label.")] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=1000, help="Most matches (at most memory.max_limit).")
    ] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Find a user's memories by meaning, best first (an unrelated query finds none)."""
    with open_runtime() as runtime:
        principal = runtime.principal_for(user)
        try:
            hits = runtime.memory.search(
                principal, query, agent=agent, label=label, limit=limit, touch=False
            )
        except InputError as exc:
            raise _as_option(exc) from None
    if as_json:
        items = [
            {
                "agent": h.agent,
                "label": h.label,
                "text": h.text,
                "created_at": h.created_at.isoformat(),
                "score": round(h.score, 4),
            }
            for h in hits
        ]
        print_json(items)
        return
    if not hits:
        console.print("no memory is relevant enough")
        return
    table = Table()
    for column in ("score", "agent", "label", "text", "stored"):
        table.add_column(column, no_wrap=column != "text")
    for h in hits:
        table.add_row(f"{h.score:.3f}", h.agent, h.label, h.text, _when(h.created_at))
    console.print(table)


@memory_app.command("delete")
@handle_errors
def memory_delete(
    agent: Annotated[str, typer.Argument(help="The agent that stored it, as listed.")],
    label: Annotated[str, typer.Argument(help="Its label, as listed.")],
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete one memory of a user; it is never returned again."""
    with open_runtime() as runtime:
        principal = runtime.principal_for(user)
        runtime.memory.delete(principal, agent, label)
    if as_json:
        print_json({"deleted": {"agent": agent, "label": label}}, indent=None)
    else:
        console.print(f"deleted {agent}/{label} of {principal.email}")
