"""CLI commands that talk: ``chat`` (interactive, streamed) and ``ask`` (one turn).

Both go through the chat service (:mod:`search2o.chat`), like the API: a message that answers
an agent's waiting question goes to that agent, and Ctrl-C stops the answer (its part so far
is kept as ``interrupted``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.text import Text

from search2o.accounts import Principal
from search2o.cli.common import (
    console,
    err_console,
    handle_errors,
    open_runtime,
    print_json,
    printable,
)
from search2o.cli.knowledge import AsOpt
from search2o.errors import InputError, Search2oError
from search2o.events import Event
from search2o.runtime import Runtime

__all__ = ["ask", "chat", "print_turn"]

HELP = (
    "commands: /new (start a new conversation), /list, /open ID, /rate up|down|clear "
    "(the last answer), /help, /quit"
)


def print_turn(events: Iterator[Event]) -> dict[str, Any]:
    """Stream a turn's answer to the terminal, then its sources; return the last event's data.

    Tool calls print as dim lines (``searching: <query>``); citations as ``[n] title — path``.
    """
    citations: list[dict[str, Any]] = []
    last: dict[str, Any] = {}
    for event in events:
        if event.kind == "tool_call":
            query = event.data["arguments"].get("query", "")
            console.print(Text(printable(f"{event.data['name']}: {query}"), style="dim"))
        elif event.kind == "delta":
            console.print(printable(event.data["text"]), end="", soft_wrap=True)
        elif event.kind == "citation":
            citations.append(event.data)
        elif event.kind in ("conversation", "done", "error"):
            last.update(event.data, kind=event.kind)
    console.print()
    for c in citations:
        sections = "; ".join(" > ".join(h) for h in c.get("headings") or [c["heading_path"]] if h)
        where = f"{c['source']} > {sections}" if sections else c["source"]
        console.print(Text(printable(f"[{c['number']}] {c['title']} — {where}"), style="cyan"))
    if last.get("kind") == "error":
        err_console.print(Text.assemble(("error:", "red"), " ", str(last.get("message", ""))))
    return last


@handle_errors
def ask(
    question: Annotated[str, typer.Argument(help="The question (one turn).")],
    conversation: Annotated[
        str | None, typer.Option("--conversation", "-c", help="Continue this conversation id.")
    ] = None,
    as_user: AsOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the turn's events as JSON.")
    ] = False,
) -> None:
    """Ask one question: stream the answer with its sources (a new conversation by default)."""
    with open_runtime() as runtime:
        principal = runtime.principal_for(as_user)
        prepared = runtime.chat.prepare(principal, question, conversation)
        if as_json:
            events = [{"event": e.kind, "data": e.data} for e in runtime.chat.run_sync(prepared)]
            print_json(events)
            failed = events[-1]["event"] == "error"
        else:
            last = print_turn(runtime.chat.run_sync(prepared))
            failed = last.get("kind") == "error"
            console.print(Text(f"conversation {last.get('conversation_id')}", style="dim"))
    if failed:
        raise typer.Exit(1)


def _list(runtime: Runtime, principal: Principal) -> None:
    rows = runtime.conversations.list_conversations(principal, 20)
    if not rows:
        console.print("no conversations yet")
    for row in rows:
        pin = "* " if row.pinned else "  "
        console.print(f"{pin}{row.id}  {row.last_used_at:%Y-%m-%d %H:%M}  {printable(row.title)}")


def _command(runtime: Runtime, principal: Principal, line: str, state: dict[str, Any]) -> bool:
    """Run one slash command; return False to quit."""
    name, _, arg = line.partition(" ")
    arg = arg.strip()
    if name in ("/quit", "/exit", "/q"):
        return False
    if name == "/new":
        state["conversation"] = None
        console.print("new conversation: it starts with your next message")
    elif name == "/list":
        _list(runtime, principal)
    elif name == "/open":
        if not arg:
            raise InputError("id", "give a conversation id: /open ID (see /list)")
        info = runtime.conversations.get(principal, arg)
        state["conversation"] = info.id
        console.print(f"opened: {printable(info.title)}")
        for message in runtime.conversations.messages(principal, info.id)[-4:]:
            console.print(Text(printable(f"{message.role}: {message.text}"), style="dim"))
    elif name == "/rate":
        ratings: dict[str, Any] = {"up": "up", "down": "down", "clear": None}
        if arg not in ratings:
            raise InputError("rating", "use /rate up, /rate down or /rate clear")
        if state.get("answer") is None:
            raise InputError("rating", "no answer to rate yet in this session")
        runtime.conversations.rate(principal, state["answer"], ratings[arg])
        console.print(f"rated {arg}")
    else:
        console.print(HELP)
    return True


@handle_errors
def chat(
    as_user: AsOpt = None,
    new: Annotated[bool, typer.Option("--new", help="Start a new conversation.")] = False,
) -> None:
    """Chat in the terminal, continuing your last conversation (type /help for commands)."""
    with open_runtime() as runtime:
        principal = runtime.principal_for(as_user)
        latest = None if new else runtime.conversations.latest(principal)
        state: dict[str, Any] = {"conversation": latest.id if latest else None, "answer": None}
        if latest is not None:
            console.print(f"continuing: {printable(latest.title)}  (/new starts another; /help)")
        else:
            console.print("new conversation  (/help for commands, Ctrl-D to leave)")
        while True:
            try:
                line = console.input("> ").strip()
            except (EOFError, KeyboardInterrupt):
                console.print()
                return
            if not line:
                continue
            try:
                if line.startswith("/"):
                    if not _command(runtime, principal, line, state):
                        return
                    continue
                prepared = runtime.chat.prepare(principal, line, state["conversation"])
                last = print_turn(runtime.chat.run_sync(prepared))
                state["conversation"] = last.get("conversation_id", state["conversation"])
                state["answer"] = last.get("message_id")
            except Search2oError as exc:
                err_console.print(Text.assemble(("error:", "red"), " ", exc.message))
            except KeyboardInterrupt:
                console.print()
                err_console.print("interrupted: the partial answer was kept")
