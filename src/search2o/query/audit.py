"""Audit a quoting answer: every quoted run is made of its cited section's sentences.

The built-in model quotes; its answer is runs of sentences, each closed by the citation of the
section they come from (``… [1] … [2]``), a run opened by its section's heading when the
sentences do not name it ("Medical Insurance: The company pays 75% …"), and the answer by a
verdict read from a heading ("Yes. OK: …"). :func:`misplaced_runs` checks that claim against
the stored chunks: a sentence cited under the wrong section, or text that no cited chunk holds,
is reported. Used by the tests and by ``bench/qa_eval.py`` over every answer of an evaluation
run; a real model paraphrases, so only quoting answers can be audited this way.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select

from search2o.providers.sentences import split_sentences
from search2o.storage.db import Database
from search2o.storage.models import Chunk

__all__ = ["misplaced_runs", "quoted_runs"]

_MARKER = re.compile(r"\s*\[(\d+)\]")
_VERDICT = re.compile(r"^(?:Yes|No)\.\s+")


def quoted_runs(text: str) -> list[tuple[str, int]]:
    """Return ``(quoted text, citation number)`` for each run ``text`` closes with ``[n]``.

    A leading verdict ("Yes. ", "No. ") is not part of the first run.
    """
    text = _VERDICT.sub("", text, count=1)
    runs, start = [], 0
    for marker in _MARKER.finditer(text):
        runs.append((text[start : marker.start()].strip(), int(marker.group(1))))
        start = marker.end()
    return runs


def misplaced_runs(database: Database, text: str, citations: list[dict[str, Any]]) -> list[str]:
    """Return the runs of ``text`` that are not made only of their cited section's sentences.

    Args:
        database: where the cited chunks are stored.
        text: the answer as shown (citations renumbered for the reader).
        citations: the answer's citations (``number``, ``chunk_ids``, ``heading_path``), as the
            ``done`` event and ``GET /v1/conversations/{id}`` give them.

    Returns:
        One line per misplaced run: the run, its citation's heading path and what is left of
        it once the cited chunks' sentences and its own heading are taken out. Empty when every
        run checks (or the answer quotes nothing).

    """
    by_number = {c["number"]: c for c in citations}
    problems = []
    for quoted, number in quoted_runs(text):
        citation = by_number.get(number)
        if citation is None:
            problems.append(f"{quoted!r}: [{number}] is not a citation of the answer")
            continue
        path = list(citation.get("heading_path") or [])
        heading = f"{path[-1]}:" if path else None  # a run may open with its section's heading
        if heading and quoted.startswith(heading):
            quoted = quoted.removeprefix(heading)
        with database.session() as session:
            chunks = list(
                session.scalars(select(Chunk).where(Chunk.id.in_(citation.get("chunk_ids") or [])))
            )
        if not chunks or any(list(c.heading_path or []) != path for c in chunks):
            problems.append(f"{quoted!r}: [{number}] does not name chunks of section {path}")
            continue
        known = {s for c in chunks for s in split_sentences(c.text)}
        leftover = quoted
        for sentence in sorted((s for s in known if s in quoted), key=len, reverse=True):
            leftover = leftover.replace(sentence, "")
        if leftover.strip():
            problems.append(f"{quoted!r} under {path}: {leftover.strip()!r} is not from it")
    return problems
