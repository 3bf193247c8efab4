"""CLI commands of the Knowledge Store: ingest, search, documents, reindex."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from search2o.cli.common import (
    INT32_MAX,
    console,
    err_console,
    handle_errors,
    open_runtime,
    print_json,
)
from search2o.cli.ingest_progress import IngestProgress
from search2o.knowledge.access import AccessList
from search2o.knowledge.ingest import IngestOutcome, IngestSummary
from search2o.knowledge.search import SearchResult
from search2o.runtime import Runtime

__all__ = ["documents_app", "ingest", "print_hits", "reindex", "run_ingest", "search"]

# A reindex batch is embedded and written in one transaction: beyond this it holds more
# vectors in memory than it saves in round trips (384 floats x 10,000 = 15 MB).
MAX_BATCH = 10_000

documents_app = typer.Typer(help="List and delete ingested documents.", no_args_is_help=True)

GroupOpt = Annotated[
    list[str] | None,
    typer.Option("--group", "-g", help="Only members of this group may read (repeatable)."),
]
UserOpt = Annotated[
    list[str] | None,
    typer.Option("--user", "-u", help="Only this user may read (email, repeatable)."),
]
AsOpt = Annotated[
    str | None, typer.Option("--as", help="Act as this user (email); default: the local user.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def run_ingest(runtime: Runtime, paths: list[Path], access: AccessList) -> IngestSummary:
    """Ingest ``paths``, showing progress; print skipped files and one summary line.

    Progress is :class:`~search2o.cli.ingest_progress.IngestProgress` on stderr; a file whose
    access list changed is printed too.
    """
    with IngestProgress(err_console) as progress:

        def on_file(outcome: IngestOutcome) -> None:
            progress.done(outcome)
            if outcome.access_before is not None:
                before = ", ".join(outcome.access_before) or "everyone"
                now = ", ".join(sorted(access.entries())) or "everyone"
                err_console.print(
                    Text.assemble(
                        ("access changed", "yellow"), f" {outcome.source}: {before} -> {now}"
                    ),
                    soft_wrap=True,
                )
            if outcome.status == "skipped":
                err_console.print(
                    Text.assemble(("skipped", "yellow"), f" {outcome.source}: {outcome.reason}"),
                    soft_wrap=True,
                )

        summary = runtime.knowledge.ingest_paths(paths, access, on_file, progress.total)
    console.print(summary.line(), highlight=False)
    return summary


@handle_errors
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to ingest.")],
    group: GroupOpt = None,
    user: UserOpt = None,
) -> None:
    """Ingest files and folders (Markdown, text, HTML, PDF, DOCX) into the Knowledge Store.

    Unchanged files are skipped by content hash; changed ones replace their chunks.
    """
    access = AccessList.build(group or [], user or [])
    with open_runtime() as runtime:
        run_ingest(runtime, paths, access)


def print_hits(result: SearchResult, as_json: bool) -> None:
    """Print search hits as a table (with timings) or as JSON."""
    if as_json:
        payload = {
            "hits": [asdict(h) for h in result.hits],
            "embed_ms": round(result.embed_ms, 2),
            "search_ms": round(result.search_ms, 2),
        }
        print_json(payload)
        return
    if not result.hits:
        console.print("no results")
        return
    table = Table(show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("document")
    table.add_column("text")
    for rank, hit in enumerate(result.hits, start=1):
        where = Path(hit.source).name
        if hit.heading_path:
            where += "\n" + " > ".join(hit.heading_path)
        flat = " ".join(hit.text.split())
        snippet = flat if len(flat) <= 300 else flat[:297] + "..."
        table.add_row(str(rank), f"{hit.score:.4f}", where, snippet)
    console.print(table)
    console.print(
        f"{len(result.hits)} hits; query embedding {result.embed_ms:.1f} ms, "
        f"search {result.search_ms:.1f} ms",
        highlight=False,
    )


@handle_errors
def search(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    k: Annotated[
        int, typer.Option("--k", "-k", min=1, max=1000, help="Number of results (1..1000).")
    ] = 5,
    as_user: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Search the Knowledge Store (hybrid: meaning + keywords), under a user's access rights."""
    with open_runtime() as runtime:
        principal = runtime.principal_for(as_user)
        # Load the model first so the printed embedding time is the query's, not the load's.
        runtime.embedder.embed(["warm-up"])
        print_hits(runtime.knowledge.search(principal, query, k), as_json)


@documents_app.command("list")
@handle_errors
def documents_list(as_user: AsOpt = None, as_json: JsonOpt = False) -> None:
    """List the documents a user may see (admins see all)."""
    with open_runtime() as runtime:
        docs = runtime.knowledge.list_documents(runtime.principal_for(as_user))
    if as_json:
        print_json([asdict(d) for d in docs])
        return
    table = Table()
    for column in ("id", "title", "source", "chunks", "access"):
        table.add_column(column)
    for d in docs:
        table.add_row(
            str(d.id), d.title, d.source, str(d.chunk_count), ", ".join(d.access) or "everyone"
        )
    console.print(table)


@documents_app.command("delete")
@handle_errors
def documents_delete(
    document_id: Annotated[
        int, typer.Argument(min=1, max=INT32_MAX, help="Document id, as listed.")
    ],
    as_user: AsOpt = None,
) -> None:
    """Delete a document with its chunks and vectors (admins only)."""
    with open_runtime() as runtime:
        info = runtime.knowledge.delete_document(runtime.principal_for(as_user), document_id)
    console.print(f"deleted document {info.id} ({info.source}, {info.chunk_count} chunks)")


@handle_errors
def reindex(
    batch_size: Annotated[
        int,
        typer.Option(min=1, max=MAX_BATCH, help="Chunks embedded per transaction."),
    ] = 256,
) -> None:
    """Re-embed every chunk with the configured embedding model (after a model change)."""
    progress = Progress(console=err_console, transient=True, disable=not err_console.is_terminal)
    with open_runtime() as runtime, progress:
        task = progress.add_task("re-embedding", total=None)
        count, seconds = runtime.knowledge.reindex(
            batch_size,
            on_total=lambda total: progress.update(task, total=total),
            on_batch=lambda n: progress.update(task, advance=n),
        )
    console.print(f"re-embedded {count} chunks in {seconds:.1f} s")
