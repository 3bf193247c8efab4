"""The built-in model over the handbook: every quoted sentence sits in the section it cites.

A citation stands for one section of a document (``search2o.query.citations.section_key``), so
its heading is the heading of the sentences it supports — never the heading of a better-ranked
chunk of the same document (the "Not OK" heading on a sentence of the "OK" list).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from search2o.knowledge.access import AccessList
from search2o.query.audit import misplaced_runs, quoted_runs
from search2o.runtime import Runtime
from tests.conftest import HANDBOOK, handbook_files
from tests.query.test_turn import done, engine

BENCH_DATA = Path(__file__).resolve().parents[2] / "bench" / "data"
EVALUATION_SETS = (
    HANDBOOK.parent / "handbook-eval" / "public.jsonl",
    BENCH_DATA / "handbook-dialogues.jsonl",
    BENCH_DATA / "handbook-newcomer.jsonl",
)


def check_sections(runtime: Runtime, final: dict[str, Any]) -> None:
    """Every run of the answer is made of the sentences of the section it cites."""
    assert quoted_runs(final["text"]), final["text"]
    assert misplaced_runs(runtime.database, final["text"], final["citations"]) == []


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


def test_a_run_with_a_sentence_of_another_section_is_reported(runtime: Runtime) -> None:
    runtime.knowledge.ingest_paths(handbook_files(), AccessList())
    final = done(engine(runtime).ask(runtime.local_principal(), "Is there a coworking stipend?"))
    check_sections(runtime, final)
    stitched = final["text"].replace(" [1]", " The company pays 100% of the premium. [1]", 1)
    [problem] = misplaced_runs(runtime.database, stitched, final["citations"])
    assert "The company pays 100% of the premium." in problem
    unknown = misplaced_runs(runtime.database, final["text"] + " Made up. [9]", final["citations"])
    assert unknown == ["'Made up.': [9] is not a citation of the answer"]


@pytest.mark.slow
def test_every_answer_of_the_evaluation_sets_quotes_its_cited_sections(runtime: Runtime) -> None:
    """Every turn of the three handbook sets of bench/qa_eval.py, played as conversations."""
    if runtime.database.engine.dialect.name != "sqlite":
        pytest.skip("the sections are the same on PostgreSQL; the test above covers it")
    runtime.knowledge.ingest_paths(handbook_files(), AccessList())
    me, checked = runtime.local_principal(), 0
    for path in EVALUATION_SETS:
        for line in path.read_text().splitlines():
            conversation = None
            for turn in json.loads(line)["turns"] if line.strip() else []:
                final = done(engine(runtime).ask(me, turn["user"], conversation))
                conversation = final["conversation_id"]
                problems = misplaced_runs(runtime.database, final["text"], final["citations"])
                assert problems == [], (turn["user"], problems)
                checked += bool(final["citations"])
    assert checked >= 150
