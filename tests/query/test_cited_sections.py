"""The built-in model over the handbook: every quoted sentence sits in the section it cites.

A citation stands for one section of a document (``search2o.query.citations.section_key``), so
its heading is the heading of the sentences it supports — never the heading of a better-ranked
chunk of the same document (the "Not OK" heading on a sentence of the "OK" list).
"""

from __future__ import annotations

import json
import re
from typing import Any

from sqlalchemy import select

from search2o.knowledge.access import AccessList
from search2o.providers.sentences import split_sentences
from search2o.runtime import Runtime
from search2o.storage.models import Chunk
from tests.conftest import HANDBOOK, handbook_files
from tests.query.test_turn import done, engine

_MARKER = re.compile(r"\s*\[(\d+)\]")
_VERDICT = re.compile(r"^(?:Yes|No)\.\s+")


def quoted_runs(text: str) -> list[tuple[str, int]]:
    """``(quoted text, shown citation number)`` for each run the answer closes with ``[n]``."""
    runs, start = [], 0
    for marker in _MARKER.finditer(text):
        runs.append((text[start : marker.start()].strip(), int(marker.group(1))))
        start = marker.end()
    return runs


def check_sections(runtime: Runtime, final: dict[str, Any]) -> None:
    """Every sentence of every run is a sentence of the chunks of the citation it closes with.

    A run may open with its own section's heading ("OK: …"), and the answer with a verdict read
    from it ("Yes."); any other text fails.
    """
    by_number = {c["number"]: c for c in final["citations"]}
    runs = quoted_runs(_VERDICT.sub("", final["text"], count=1))
    assert runs, final["text"]
    for quoted, number in runs:
        citation = by_number[number]
        heading = f"{citation['heading_path'][-1]}:" if citation["heading_path"] else None
        if heading and quoted.startswith(heading):
            quoted = quoted.removeprefix(heading)
        with runtime.database.session() as session:
            chunks = list(session.scalars(select(Chunk).where(Chunk.id.in_(citation["chunk_ids"]))))
        assert chunks and all(c.heading_path == citation["heading_path"] for c in chunks)
        known = {s for c in chunks for s in split_sentences(c.text)}
        sentences = [s for s in known if s in quoted]
        # the run is made of the cited chunks' sentences, and nothing else
        leftover = quoted
        for sentence in sorted(sentences, key=len, reverse=True):
            leftover = leftover.replace(sentence, "")
        assert not leftover.strip(), (quoted, citation["heading_path"])


def test_a_yes_from_the_ok_list_is_cited_under_ok(runtime: Runtime) -> None:
    runtime.knowledge.ingest_paths(handbook_files(), AccessList())
    events = engine(runtime).ask(runtime.local_principal(), "Can I give paid talks at conferences?")
    final = done(events)
    assert "fine as long as" in final["text"]  # the "OK" list item on paid talks
    assert final["text"].startswith("Yes. OK: ")  # the verdict its heading gives
    cited = [c["heading_path"][-1] for c in final["citations"]]
    assert "OK" in cited and "Not OK" not in cited
    check_sections(runtime, final)


def test_every_quoted_sentence_sits_in_the_section_it_cites(runtime: Runtime) -> None:
    runtime.knowledge.ingest_paths(handbook_files(), AccessList())
    items = [
        json.loads(line)
        for line in (HANDBOOK.parent / "handbook-eval" / "public.jsonl").read_text().splitlines()
        if line.strip()
    ]
    me = runtime.local_principal()
    answered = 0
    for item in items:
        final = done(engine(runtime).ask(me, item["turns"][0]["user"]))
        if final["citations"]:
            check_sections(runtime, final)
            answered += 1
    assert answered >= len(items) // 2
