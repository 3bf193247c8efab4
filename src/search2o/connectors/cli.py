"""``search2o sources``: add, list, show, update, sync and remove sources (docs/connectors.md).

``sources add KIND NAME`` has one sub-command per installed connector kind, its options made
from the connector's settings model (a list field takes a singular, repeatable option:
``groups`` is ``--group``), plus ``--every`` (the schedule) and ``--SECRET-env VAR`` for each
secret the connector needs (read from the environment, never from the command line).
``sources sync NAME`` runs the sync in this process with a progress bar on a terminal (plain
lines otherwise) and ends with ``N added, N updated, N deleted, N unchanged, N failed``.
"""

from __future__ import annotations

import inspect
import json
import os
import typing
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from search2o.cli.common import console, err_console, handle_errors, open_runtime, print_json
from search2o.connectors.contract import Connector
from search2o.connectors.registry import connector_kinds
from search2o.connectors.report import SyncCounts, SyncReport
from search2o.connectors.sources import SourceInfo, parse_schedule
from search2o.connectors.wiring import sources_of, sync_engine
from search2o.errors import InputError

__all__ = ["sources_app"]

sources_app = typer.Typer(
    help="Sources kept in sync: folders, sites, wikis, drives (docs/connectors.md).",
    no_args_is_help=True,
)
add_app = typer.Typer(help="Add a source of one kind: `sources add KIND NAME [options]`.")
sources_app.add_typer(add_app, name="add", no_args_is_help=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
EVERY_HELP = "Sync every 90s/30m/1h/1d, or manual (the default)."


def _option_name(field: str, annotation: Any) -> str:
    """Return the option of ``field``: ``groups`` (a list) is ``--group``."""
    name = field.replace("_", "-")
    if typing.get_origin(annotation) is list and name.endswith("s"):
        name = name[:-1]
    return f"--{name}"


def _add_command(kind: str, cls: type[Connector]) -> Any:
    """Build ``sources add KIND``'s command from ``cls.Settings`` (see the module docstring)."""
    fields = cls.Settings.model_fields
    params = [
        inspect.Parameter(
            "name",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            annotation=Annotated[str, typer.Argument(help="The source's name (e.g. handbook).")],
        )
    ]
    for field, info in fields.items():
        option = _option_name(field, info.annotation)
        help_text = info.description or field.replace("_", " ")
        if info.annotation is bool:
            annotation: Any = Annotated[bool, typer.Option(option, help=help_text)]
            default: Any = bool(info.default)
        elif typing.get_origin(info.annotation) is list:
            annotation = Annotated[
                list[str] | None, typer.Option(option, help=f"{help_text} (repeatable)")
            ]
            default = None
        else:
            annotation = Annotated[str | None, typer.Option(option, help=help_text)]
            default = None
        params.append(
            inspect.Parameter(
                field, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
            )
        )
    for secret in cls.credential_fields:
        params.append(
            inspect.Parameter(
                f"{secret}_env",
                inspect.Parameter.KEYWORD_ONLY,
                annotation=Annotated[
                    str | None,
                    typer.Option(
                        f"--{secret.replace('_', '-')}-env",
                        help=f"Environment variable that holds the {secret} (never the value).",
                    ),
                ],
                default=None,
            )
        )
    params.append(
        inspect.Parameter(
            "every",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[str | None, typer.Option("--every", help=EVERY_HELP)],
            default=None,
        )
    )

    @handle_errors
    def add(**values: Any) -> None:
        name = values.pop("name")
        schedule = parse_schedule(values.pop("every"), "--every")
        credentials: dict[str, str] = {}
        for secret in cls.credential_fields:
            variable = values.pop(f"{secret}_env")
            if variable is not None:
                credentials[secret] = _from_env(variable, f"--{secret}-env")
        settings = {k: v for k, v in values.items() if v is not None}
        if kind == "folder" and "path" in settings:  # a relative path means from here
            settings["path"] = str(Path(settings["path"]).expanduser().resolve())
        with open_runtime() as runtime:
            info = sources_of(runtime).add(name, kind, settings, credentials, schedule)
        console.print(
            f"source {info.name} ({info.kind}) added; sync it with `search2o sources sync "
            f"{info.name}`",
            soft_wrap=True,
            highlight=False,
        )

    add.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    add.__annotations__ = {p.name: p.annotation for p in params}
    add.__doc__ = (cls.__doc__ or f"Add a {kind} source.").strip().splitlines()[0]
    return add


def register_add_commands() -> None:
    """Give ``sources add`` one command per installed connector kind."""
    for kind, cls in sorted(connector_kinds().items()):
        add_app.command(kind)(_add_command(kind, cls))


@sources_app.command("list")
@handle_errors
def sources_list(as_json: JsonOpt = False) -> None:
    """List the sources with their documents, last success and last error."""
    with open_runtime() as runtime:
        found = sources_of(runtime).all()
    if as_json:
        print_json([info.to_json() for info in found])
        return
    table = Table(title=f"{len(found)} source(s)")
    for column in ("name", "kind", "status", "documents", "schedule", "last success", "error"):
        table.add_column(column, overflow="fold")
    for info in found:
        table.add_row(
            info.name,
            info.kind,
            info.status,
            str(info.documents),
            _schedule(info.schedule_s),
            _when(info.last_success_at),
            info.last_error or "",
        )
    console.print(table)


@sources_app.command("show")
@handle_errors
def sources_show(
    name: Annotated[str, typer.Argument(help="The source's name.")], as_json: JsonOpt = False
) -> None:
    """Show one source: settings, schedule, state, the last sync's counts and progress."""
    with open_runtime() as runtime:
        info = sources_of(runtime).get(name)
    if as_json:
        print_json(info.to_json())
        return
    _print_source(info)


@sources_app.command("sync")
@handle_errors
def sources_sync(
    name: Annotated[str, typer.Argument(help="The source's name.")],
    full: Annotated[
        bool, typer.Option("--full", help="List everything, even with a changes feed.")
    ] = False,
    allow_mass_delete: Annotated[
        bool,
        typer.Option(
            "--allow-mass-delete",
            help="Delete even more than connectors.max_delete_share of its documents.",
        ),
    ] = False,
) -> None:
    """Sync one source now, in this process; exit 1 if it did not fully succeed."""
    with open_runtime() as runtime:
        engine = sync_engine(runtime)
        report = _run_sync(engine, name, full, allow_mass_delete)
    if report.resumed:
        err_console.print(
            "resuming the sync that stopped before it ended: the counts cover the whole sync",
            highlight=False,
        )
    console.print(report.counts.line(), highlight=False)
    if report.error is not None:
        err_console.print(f"error: {report.error}", soft_wrap=True, highlight=False)
        raise typer.Exit(1)


@sources_app.command("update")
@handle_errors
def sources_update(
    name: Annotated[str, typer.Argument(help="The source's name.")],
    setting: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help='FIELD=VALUE, a JSON value or plain text (repeatable), e.g. groups=["hr"].',
        ),
    ] = None,
    every: Annotated[str | None, typer.Option("--every", help=EVERY_HELP)] = None,
    secret_env: Annotated[
        list[str] | None,
        typer.Option("--secret-env", help="SECRET=VAR: read a secret from VAR (repeatable)."),
    ] = None,
) -> None:
    """Change a source's settings, schedule or secrets (access changes apply at its next sync)."""
    settings = dict(_pair(item, "--set", json_value=True) for item in setting or [])
    credentials: dict[str, str] | None = None
    if secret_env:
        credentials = {}
        for item in secret_env:
            secret, variable = _pair(item, "--secret-env")
            credentials[secret] = _from_env(str(variable), "--secret-env")
    with open_runtime() as runtime:
        info = sources_of(runtime).update(
            name,
            settings=settings or None,
            credentials=credentials,
            schedule_s=parse_schedule(every, "--every") if every is not None else "keep",
        )
    console.print(f"source {info.name} updated", highlight=False)


@sources_app.command("remove")
@handle_errors
def sources_remove(
    name: Annotated[str, typer.Argument(help="The source's name.")],
    keep_documents: Annotated[
        bool,
        typer.Option("--keep-documents", help="Keep its documents (as if ingested by hand)."),
    ] = False,
) -> None:
    """Remove a source, with its documents unless --keep-documents."""
    with open_runtime() as runtime:
        info, deleted = sources_of(runtime).remove(name, keep_documents)
    kept = "its documents kept" if keep_documents else f"{deleted} document(s) deleted"
    console.print(f"source {info.name} removed; {kept}", highlight=False)


def _run_sync(engine: Any, name: str, full: bool, allow_mass_delete: bool) -> SyncReport:
    """Run one sync with a progress bar (terminal) or a line per phase (otherwise)."""
    terminal = err_console.is_terminal
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not terminal,
    )
    task = progress.add_task("listing", total=None)
    seen: set[str] = set()

    def on_progress(phase: str, counts: SyncCounts, total: int | None) -> None:
        done = counts.fetched + counts.failed
        if terminal:
            progress.update(task, description=phase, total=total, completed=done)
        elif phase not in seen:
            seen.add(phase)
            suffix = f" ({total})" if total is not None else ""
            err_console.print(f"{phase}{suffix}", highlight=False)

    with progress:
        return typing.cast(
            SyncReport,
            engine.sync(
                name, full=full, allow_mass_delete=allow_mass_delete, on_progress=on_progress
            ),
        )


def _from_env(variable: str, field: str) -> str:
    """Return the secret held by the environment variable ``variable``.

    Raises:
        InputError: it is not set or empty (field ``field``).

    """
    value = os.environ.get(variable)
    if not value:
        raise InputError(field, f"environment variable {variable} is not set")
    return value


def _pair(item: str, field: str, json_value: bool = False) -> tuple[str, Any]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise InputError(field, f"{item!r} is not KEY=VALUE")
    if not json_value:
        return key, value
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _schedule(seconds: int | None) -> str:
    if not seconds:
        return "manual"
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"every {seconds // size}{unit}"
    return f"every {seconds}s"


def _when(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "never"


def _print_source(info: SourceInfo) -> None:
    rows = [
        ("name", info.name),
        ("kind", info.kind),
        ("status", info.status),
        ("settings", json.dumps(info.settings, ensure_ascii=False)),
        ("credentials", info.credentials),
        ("schedule", _schedule(info.schedule_s)),
        ("documents", str(info.documents)),
        ("readable by nobody (access not mapped)", str(info.unmapped)),
        ("last started", _when(info.last_started_at)),
        ("last success", _when(info.last_success_at)),
        ("last error", info.last_error or "none"),
        ("next sync", _when(info.next_sync_at)),
    ]
    counts = info.progress if info.status == "running" else info.last_counts
    if counts:
        shown = SyncCounts.of(counts)
        rows.append(("running sync" if info.status == "running" else "last sync", shown.line()))
        rows.append(
            (
                "listed / fetched / embedded chunks",
                f"{shown.listed} / {shown.fetched} / {shown.embedded}",
            )
        )
        rows.append(("time", f"{shown.seconds:.1f} s, {shown.documents_per_s:.1f} documents/s"))
        rows.extend(("failed", reason) for reason in shown.failures)
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        console.print(f"{label.ljust(width)}  {value}", soft_wrap=True, highlight=False)
