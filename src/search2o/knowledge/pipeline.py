"""Ingesting many files: reading ahead of the model, and one model call across small files.

:func:`ingest_paths` (``search2o ingest``, ``KnowledgeStore.ingest_paths``) runs
:func:`ingest_files`: a reader thread reads, hashes, loads and chunks the next files (at most
``AHEAD`` files ahead, so memory stays bounded) while the calling thread embeds, and a writer
thread stores the group embedded before, so parsing and storing overlap the model. The texts
of consecutive documents are embedded in one call, up to ``GROUP_TEXTS`` (the model sorts a
call's texts by length into its batches, so a folder of small files fills whole batches with
little padding instead of one short batch per file); a group is also sent as soon as it fills
one model batch and the next file is not read yet, so the model never waits for the reader.
Each document is still stored in its own transaction (at most one group is being written
while the next is embedded), and outcomes come back in file order, from the writer thread.

A group whose model call fails is retried one document at a time, so a bad document fails
alone, as it would without grouping (its reason says where it failed).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

from search2o.errors import IndexMismatchError
from search2o.knowledge.access import AccessList
from search2o.knowledge.ingest import Ingestor, IngestOutcome, IngestSummary, Prepared, iter_files
from search2o.knowledge.reuse import Embedded, embed_reusing

__all__ = ["AHEAD", "GROUP_TEXTS", "ingest_files", "ingest_paths"]

log = logging.getLogger("search2o.knowledge")

AHEAD = 8
"""Files the reader thread prepares ahead of the model."""

GROUP_TEXTS = 256
"""Most texts (chunks) embedded in one call across documents."""


def ingest_paths(
    ingestor: Ingestor,
    paths: list[Path],
    access: AccessList,
    on_file: Callable[[IngestOutcome], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> IngestSummary:
    """Ingest files and folders; each file is identified by its absolute path.

    Args:
        on_file: called after each file with its outcome (progress bars, logs), in order.
        on_total: called once with the number of files found.

    Raises:
        InputError: a path does not exist (checked before anything is written).
        IndexMismatchError: stored vectors come from another embedding model.

    """
    started = time.perf_counter()
    files = list(iter_files(paths))
    if on_total is not None:
        on_total(len(files))
    summary = IngestSummary()

    def outcome(done: IngestOutcome) -> None:
        summary.outcomes.append(done)
        if on_file is not None:
            on_file(done)

    ingest_files(ingestor, files, access, outcome)
    summary.seconds = time.perf_counter() - started
    return summary


def ingest_files(
    ingestor: Ingestor,
    files: Iterable[Path],
    access: AccessList,
    on_outcome: Callable[[IngestOutcome], None],
) -> None:
    """Ingest ``files`` under ``access``, calling ``on_outcome`` for each, in order.

    Raises:
        IndexMismatchError: stored vectors come from another embedding model (nothing more
            is written; what was stored before stays).

    """
    batch = int(getattr(ingestor.embedder, "batch_size", 32))
    pending = iter(files)
    group: list[IngestOutcome | Prepared] = []
    texts = 0
    with (
        ThreadPoolExecutor(1, thread_name_prefix="search2o-ingest-read") as reader,
        ThreadPoolExecutor(1, thread_name_prefix="search2o-ingest-write") as writer,
    ):
        window: deque[Future[IngestOutcome | Prepared]] = deque()
        writing: Future[None] | None = None

        def fill() -> None:
            while len(window) < AHEAD and (file := next(pending, None)) is not None:
                window.append(reader.submit(ingestor.prepare_file, file, access))

        def hand_over(work: Callable[[], None]) -> None:
            """Give ``work`` to the writer once the previous group is written (order kept)."""
            nonlocal writing
            if writing is not None:
                writing.result()  # raises what the writer met (IndexMismatchError)
            writing = writer.submit(work)

        try:
            fill()
            while window:
                item = window.popleft().result()
                fill()
                if not isinstance(item, Prepared) and not group:
                    hand_over(partial(on_outcome, item))  # nothing waits for the model
                    continue
                group.append(item)
                texts += len(item.texts) if isinstance(item, Prepared) else 0
                waiting = bool(window) and not window[0].done()
                if texts >= GROUP_TEXTS or not window or (waiting and texts >= batch):
                    embedded = _embed(ingestor, group)
                    hand_over(partial(_store, ingestor, group, embedded, on_outcome))
                    group, texts = [], 0
            if writing is not None:
                writing.result()
        finally:
            for future in window:
                future.cancel()


def _embed(ingestor: Ingestor, group: list[IngestOutcome | Prepared]) -> Embedded | None:
    """Embed the new texts of the group's documents in one call; ``None`` if that failed."""
    documents = [item for item in group if isinstance(item, Prepared)]
    if not documents:
        return None
    try:
        return embed_reusing(
            ingestor.database, ingestor.embedder, [t for d in documents for t in d.texts]
        )
    except IndexMismatchError:
        raise
    except Exception as exc:  # find the bad one: each document on its own (in _store)
        log.info("ingest.group_failed", extra={"fields": {"error": type(exc).__name__}})
        return None


def _store(
    ingestor: Ingestor,
    group: list[IngestOutcome | Prepared],
    embedded: Embedded | None,
    on_outcome: Callable[[IngestOutcome], None],
) -> None:
    """Store each document of the group (in the writer thread) and report the group in order.

    ``embedded`` ``None``: the group call failed, so each document is embedded on its own.
    """
    start = 0
    credited: set[str] = set()
    for item in group:
        if not isinstance(item, Prepared):
            on_outcome(item)
            continue
        if embedded is None:
            on_outcome(
                ingestor.guarded(item.source, item.stage, partial(ingestor.embed_store, item))
            )
            continue
        end = start + len(item.texts)
        hashes = embedded.hashes[start:end]
        mine = {h for h in hashes if h in embedded.fresh} - credited
        credited |= mine
        store = partial(ingestor.store, item, embedded.vectors[start:end], hashes, len(mine))
        start = end
        on_outcome(ingestor.guarded(item.source, item.stage, store))
