"""CLI commands that run agents: ``search2o agents run NAME "query"`` and ``agents validate``.

Both act as the local user. ``run`` prints the agent's answer (or its question, when the run
waits on ``ask``: answer with ``--conversation ID``); ``validate`` runs a definition file
without storing it and prints the trace of every command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from search2o.agents.definition import DefinitionError, parse_definition
from search2o.cli.agents import agents_app, definition_format, print_problems
from search2o.cli.common import (
    console,
    err_console,
    handle_errors,
    open_runtime,
    print_json,
    printable,
)
from search2o.errors import InputError
from search2o.runtime import Runtime

__all__ = ["agents_run", "agents_validate"]

ConversationOpt = Annotated[
    str | None,
    typer.Option("--conversation", "-c", help="Continue this conversation (answer a question)."),
]
InputOpt = Annotated[
    list[str] | None,
    typer.Option("--input", "-i", help="An input as NAME=VALUE (VALUE is JSON, else text)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the final event as JSON.")]


def _inputs(pairs: list[str] | None) -> dict[str, Any] | None:
    """Parse ``NAME=VALUE`` pairs; a VALUE that is not JSON is taken as text."""
    if not pairs:
        return None
    found: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise InputError("--input", f"{pair!r} is not NAME=VALUE")
        try:
            found[name] = json.loads(raw)
        except ValueError:
            found[name] = raw
    return found


def _finish(runtime: Runtime, events: Any, as_json: bool) -> dict[str, Any]:
    """Print the run's outcome; exit 1 when it failed."""
    last: dict[str, Any] = {}
    conversation = ""
    for event in events:
        if event.kind == "conversation":
            conversation = event.data["conversation_id"]
        last = {"event": event.kind, **event.data}
    if as_json:
        print_json(last)
    elif last.get("event") == "done":
        # soft_wrap: the answer (JSON too) is printed as it is, never cut into lines
        console.print(printable(str(last["text"])), soft_wrap=True)
        if last["status"] == "paused":
            console.print(
                printable(f"(answer with: --conversation {conversation})"),
                style="dim",
                soft_wrap=True,
            )
    if last.get("event") == "error":
        if not as_json:
            err_console.print(printable(f"error: {last['message']}"), soft_wrap=True)
        raise typer.Exit(1)
    return last


@agents_app.command("run")
@handle_errors
def agents_run(
    name: Annotated[str, typer.Argument(help="The stored agent's name.")],
    query: Annotated[str, typer.Argument(help="The message.")],
    conversation: ConversationOpt = None,
    inputs: InputOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a stored agent in a new conversation, or in --conversation (e.g. to answer)."""
    with open_runtime() as runtime:
        me = runtime.local_principal()
        prepared = runtime.chat.prepare(me, query, conversation, agent=name, inputs=_inputs(inputs))
        _finish(runtime, runtime.chat.run_sync(prepared), as_json)


@agents_app.command("validate")
@handle_errors
def agents_validate(
    file: Annotated[
        Path,
        typer.Argument(help="A definition file (JSON or YAML).", exists=True, dir_okay=False),
    ],
    query: Annotated[str, typer.Argument(help="The message.")],
    conversation: ConversationOpt = None,
    inputs: InputOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a definition without storing it or any memory, and print every command's trace."""
    with open_runtime() as runtime:
        try:
            definition = parse_definition(
                file.read_bytes(),
                profiles=list(runtime.settings.chat.profiles),
                fmt=definition_format(file),
            )
        except DefinitionError as exc:
            print_problems(str(file), exc)
            raise typer.Exit(2) from None
        runner = runtime.agent_runner
        prepared = runner.prepare(
            runtime.local_principal(),
            definition,
            query,
            conversation,
            _inputs(inputs),
            validation=True,
        )
        events = list(runner.run_sync(prepared))
        trace = events[-1].data.get("trace", [])
        if not as_json:
            table = Table("function", "command", "arguments", "result", "ms", "error")
            for step in trace:
                table.add_row(
                    *(
                        printable(json.dumps(step[k], ensure_ascii=False, default=str)[:200])
                        if not isinstance(step[k], str)
                        else printable(step[k])
                        for k in ("function", "command", "arguments", "result")
                    ),
                    f"{step['ms']:.2f}",
                    printable(step["error"] or ""),
                )
            console.print(table)
        _finish(runtime, events, as_json)
