"""CLI commands for agent definitions: ``search2o agents push|list|show|delete``.

They act directly on the runtime as the local admin, like ``search2o memory``. A definition
that breaks rules prints every problem on a line of its own (``PATH: REASON``) to stderr,
exits with code 2 and stores nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from search2o.agents.definition import DefinitionError
from search2o.cli.common import (
    confirm,
    console,
    err_console,
    handle_errors,
    open_runtime,
    print_json,
    printable,
)

__all__ = ["agents_app", "definition_format", "print_problems"]

agents_app = typer.Typer(
    help="Agent definitions: push (store or replace), list, show, delete.",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]

_SUFFIXES = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


def definition_format(path: Path) -> str | None:
    """Return the format a file's suffix names (``.json``, ``.yaml``/``.yml``), else ``None``.

    ``None`` means: try JSON, then YAML.
    """
    return _SUFFIXES.get(path.suffix.lower())


def print_problems(source: str, exc: DefinitionError) -> None:
    """Print a definition's problems to stderr: a heading line, then ``PATH: REASON`` each."""
    count = len(exc.problems)
    heading = printable(f"{source}: {count} problem{'' if count == 1 else 's'}:")
    err_console.print(Text.assemble(("error:", "red"), " ", heading), soft_wrap=True)
    for problem in exc.problems:
        err_console.print(printable(f"{problem.path}: {problem.reason}"), soft_wrap=True)


@agents_app.command("push")
@handle_errors
def agents_push(
    file: Annotated[
        Path,
        typer.Argument(
            help="The definition: JSON (.json) or YAML (.yaml, .yml); other names are tried "
            "as JSON, then YAML.",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    as_json: JsonOpt = False,
) -> None:
    """Check a definition and store it under its name, replacing any stored one."""
    data = file.read_bytes()
    with open_runtime() as runtime:
        try:
            definition, created = runtime.agents.put(
                data, fmt=definition_format(file), admin=runtime.local_principal()
            )
        except DefinitionError as exc:
            print_problems(str(file), exc)
            raise typer.Exit(2) from None
    labels = list(definition.memory_labels)
    functions = list(definition.functions)
    if as_json:
        summary = {
            "name": definition.name,
            "description": definition.description,
            "created": created,
            "memory_labels": labels,
            "functions": functions,
        }
        print_json(summary)
        return
    console.print(printable(f"{'created' if created else 'replaced'} agent {definition.name}"))
    console.print(printable(f"memory labels: {', '.join(labels) or '(none)'}"))
    console.print(printable(f"functions: {', '.join(functions)}"))


@agents_app.command("list")
@handle_errors
def agents_list(as_json: JsonOpt = False) -> None:
    """List the stored agents, by name."""
    with open_runtime() as runtime:
        rows = runtime.agents.list()
    if as_json:
        items = [
            {"name": r.name, "description": r.description, "updated_at": r.updated_at.isoformat()}
            for r in rows
        ]
        print_json(items)
        return
    if not rows:
        console.print("no agents; store one with `search2o agents push FILE`")
        return
    table = Table()
    for column in ("name", "description", "updated"):
        table.add_column(column, no_wrap=column != "description")
    for r in rows:
        table.add_row(printable(r.name), printable(r.description), f"{r.updated_at:%Y-%m-%d %H:%M}")
    console.print(table)


@agents_app.command("show")
@handle_errors
def agents_show(
    name: Annotated[str, typer.Argument(help="The agent's name, as listed.")],
) -> None:
    """Print an agent's stored definition (JSON, as it was pushed)."""
    with open_runtime() as runtime:
        document = runtime.agents.source(name)
    print_json(document)


@agents_app.command("delete")
@handle_errors
def agents_delete(
    name: Annotated[str, typer.Argument(help="The agent's name, as listed.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete an agent and every memory it stored, for every user."""
    with open_runtime() as runtime:
        runtime.agents.source(name)  # a missing agent fails before the question
        if not yes:
            confirm(f"Delete agent {name} and every memory it stored, for every user?")
        count = runtime.agents.delete(name)
    if as_json:
        print_json({"deleted": name, "memories_deleted": count}, indent=None)
    else:
        console.print(
            printable(f"deleted agent {name} and {count} memor{'y' if count == 1 else 'ies'}")
        )
