"""Grounded-QA evaluation of the Query Engine with the configured chat model (default: built-in).

1. Handbook (over ``../shared/data/handbook``), three sets reported side by side: the shared
   ``../shared/data/handbook-eval/public.jsonl``, this repository's
   ``bench/data/handbook-dialogues.jsonl`` (40 multi-turn conversations) and
   ``bench/data/handbook-newcomer.jsonl`` (40 multi-turn conversations of a new employee,
   written before the built-in model's evidence-bound changes, as a held-out check). Each item
   is one conversation, played turn by turn through ``TurnEngine`` exactly as a user would. Per
   turn type:

   * retrieval hit@3 (grounded turns): a gold file among the documents of the top 3 hits of the
     query the model wrote (from the answer's retrieval trace);
   * answer-fact accuracy (grounded turns): share of facts found in the answer, a fact being a
     list of acceptable lower-case substrings;
   * decision accuracy: grounded and not-found turns searched, ``no_search`` turns did not;
   * not-found accuracy: ``not_found`` turns answered "not found" (:func:`is_not_found`).

2. MTRAG-UN (``../shared/data/mtrag-un``, Katsis et al. 2025, IBM): the corpus is the union of
   every task's gold ``contexts`` (one document per ``document_id``). For each task the earlier
   turns of ``input`` are stored as the conversation's history and the last user turn is run.
   Recall@5 of the model-written query: the share of the task's relevant documents (``qrels``)
   among the first 5 distinct documents its search returns, per turn type (first turn,
   follow-up, clarification). Not-found accuracy on UNANSWERABLE tasks, and how often answerable
   tasks were wrongly answered "not found".

``--calibrate`` also prints, for the built-in model, the best sentence score per turn for
answerable and unanswerable turns and the accuracies each candidate ``chat.not_found_score``
would give (how the default was chosen).

Run from the repository root::

    .venv/bin/python bench/qa_eval.py                 # all sets, about 3 minutes on 2 cores
    .venv/bin/python bench/qa_eval.py --skip-mtrag
    .venv/bin/python bench/qa_eval.py --calibrate
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import track
from rich.table import Table

from search2o.accounts import Principal
from search2o.config import load_settings
from search2o.knowledge.access import AccessList
from search2o.providers.builtin_chat import NOT_FOUND
from search2o.providers.sentences import SentenceScorer
from search2o.query.audit import misplaced_runs
from search2o.query.conversations import append_message, create_conversation
from search2o.runtime import Runtime

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
HANDBOOK_SETS = {
    "handbook-eval/public.jsonl": DATA / "handbook-eval" / "public.jsonl",
    "bench/data/handbook-dialogues.jsonl": Path(__file__).resolve().parent
    / "data"
    / "handbook-dialogues.jsonl",
    "bench/data/handbook-newcomer.jsonl": Path(__file__).resolve().parent
    / "data"
    / "handbook-newcomer.jsonl",
}
console = Console()
# Each searched turn's decision detail with its label, for --dump (fitting the decision).
_DUMPED: list[dict] = []
# What a refusal says, for any model: it cites nothing and says it could not find the answer or
# that the documents do not say (the built-in model's NOT_FOUND and its constraint refusals).
_REFUSAL = re.compile(
    r"could not find|couldn't find|can't find|cannot find|not able to find|no information|"
    r"do(?:es)? not (?:say|mention|cover|contain|have)|don't have|nothing (?:about|on)",
    re.IGNORECASE,
)


def is_not_found(turn: dict) -> bool:
    """Return whether a played turn (see :func:`play`) answered "not found".

    An answer is "not found" when it cites nothing and either its retrieval trace records the
    model's refusal (``decision_detail.answer == "not_found"``, the built-in model) or its text
    says it could not find the answer (any model).
    """
    if turn.get("citations"):
        return False
    detail = (turn.get("trace") or {}).get("decision_detail") or {}
    if detail.get("answer") == "not_found":
        return True
    text = turn.get("text", "")
    return text == NOT_FOUND or _REFUSAL.search(text) is not None


def _events(runtime: Runtime, principal: Principal, text: str, conversation: str | None) -> dict:
    turn: dict[str, Any] = {"tool_calls": [], "citations": []}
    for event in runtime.turns.ask(principal, text, conversation):
        if event.kind == "tool_call":
            turn["tool_calls"].append(event.data)
        elif event.kind in ("conversation", "done", "error"):
            turn.update(event.data, kind=event.kind)
    if turn.get("message_id"):
        turn["trace"] = runtime.conversations.trace(principal, turn["message_id"])
    return turn


def _hit_documents(runtime: Runtime, principal: Principal, query: str, n: int) -> list[str]:
    """Return the sources of the first ``n`` distinct documents a search for ``query`` finds."""
    seen: dict[str, None] = {}
    for hit in runtime.knowledge.search(principal, query, 30).hits:
        seen.setdefault(hit.source, None)
        if len(seen) == n:
            break
    return list(seen)


def _best_sentence(runtime: Runtime, scorer: SentenceScorer, turn: dict, question: str) -> float:
    """The best sentence score the model decided on (its trace), else one computed here."""
    if not turn["tool_calls"]:
        return float("nan")
    detail = (turn.get("trace") or {}).get("decision_detail") or {}
    if detail.get("best_score") is not None:
        return float(detail["best_score"])
    query = turn["tool_calls"][0]["arguments"]["query"]
    principal = runtime.local_principal()
    hits = runtime.knowledge.search(principal, query, runtime.settings.chat.search_k).hits
    scored = scorer.score(query, question, [(i, h.text) for i, h in enumerate(hits)])
    return scored[0].score if scored else float("-inf")


def load_items(path: Path) -> list[dict]:
    """Return the conversations of a handbook evaluation file (one JSON object a line)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def play(runtime: Runtime, item: dict) -> list[dict]:
    """Play one evaluation conversation turn by turn; return each turn's events and trace.

    Each returned dict holds the ``done`` (or ``error``) data (``text``, ``citations``), the
    ``tool_calls`` and the stored retrieval ``trace``, plus ``spec``: the item's turn.
    """
    principal = runtime.local_principal()
    conversation = None
    played = []
    for spec in item["turns"]:
        turn = _events(runtime, principal, spec["user"], conversation)
        conversation = turn["conversation_id"]
        played.append({**turn, "spec": spec})
    return played


def handbook(runtime: Runtime, calibrate: bool) -> list[tuple[float, bool]]:
    """Run each handbook set; print a table each; return (best score, answerable) pairs."""
    runtime.knowledge.ingest_paths([DATA / "handbook"], AccessList())
    samples: list[tuple[float, bool]] = []
    for name, path in HANDBOOK_SETS.items():
        samples.extend(_handbook_set(runtime, name, load_items(path), calibrate))
    return samples


def _handbook_set(
    runtime: Runtime, name: str, items: list[dict], calibrate: bool
) -> list[tuple[float, bool]]:
    principal = runtime.local_principal()
    scorer = SentenceScorer(runtime.embedder)
    hits, facts, decisions, not_found, false_nf = [], [], [], [], []
    misplaced: list[bool] = []  # per quoting answer: a run outside its cited section
    quoting = runtime.chat_model.model_id.startswith("builtin/")
    samples: list[tuple[float, bool]] = []
    failures: list[str] = []
    for item in track(items, description=name, console=console):
        for turn in play(runtime, item):
            spec = turn["spec"]
            answer = turn.get("text", "")
            searched = bool(turn["tool_calls"])
            expect = spec["expect"]
            decisions.append(searched == (expect != "no_search"))
            detail = (turn.get("trace") or {}).get("decision_detail")
            if detail and expect != "no_search":
                _DUMPED.append(
                    {
                        "set": name,
                        "answerable": expect == "grounded",
                        "question": spec["user"],
                        "text": answer,
                        "facts": spec.get("facts", []),
                        **detail,
                    }
                )
            if calibrate and expect != "no_search":
                samples.append(
                    (_best_sentence(runtime, scorer, turn, spec["user"]), expect == "grounded")
                )
            if quoting and turn.get("citations"):
                problems = misplaced_runs(runtime.database, answer, turn["citations"])
                misplaced.append(bool(problems))
                failures.extend(f"{item['id']}: misplaced quote {p}" for p in problems)
            if expect == "grounded":
                query = turn["tool_calls"][0]["arguments"]["query"] if searched else ""
                top = _hit_documents(runtime, principal, query, 3) if searched else []
                hit = any(Path(s).name in spec["gold_files"] for s in top)
                hits.append(hit)
                found = [any(a in answer.lower() for a in fact) for fact in spec["facts"]]
                facts.extend(found)
                false_nf.append(is_not_found(turn))
                if not (hit and all(found)):
                    failures.append(f"{item['id']}: {spec['user']!r} -> {answer[:160]!r}")
            elif expect == "not_found":
                ok = is_not_found(turn)
                not_found.append(ok)
                if not ok:
                    failures.append(f"{item['id']}: {spec['user']!r} -> {answer[:160]!r}")
    table = Table(title=f"{name} (built-in model unless configured)")
    for column in ("metric", "value", "n", "target"):
        table.add_column(column)
    table.add_row("retrieval hit@3 (grounded)", f"{_mean(hits):.3f}", str(len(hits)), ">= 0.9")
    table.add_row("answer-fact accuracy", f"{_mean(facts):.3f}", str(len(facts)), ">= 0.9")
    table.add_row(
        "search/no-search decisions", f"{_mean(decisions):.3f}", str(len(decisions)), "1.0"
    )
    table.add_row("not-found accuracy", f"{_mean(not_found):.3f}", str(len(not_found)), ">= 0.9")
    table.add_row(
        "grounded answered 'not found'", f"{_mean(false_nf):.3f}", str(len(false_nf)), "<= 0.05"
    )
    if quoting:
        table.add_row(
            "answers quoting outside their cited section",
            f"{sum(misplaced)}",
            str(len(misplaced)),
            "0",
        )
    console.print(table)
    for failure in failures:
        console.print(f"  miss: {failure}", markup=False)
    return samples


def _mtrag_corpus(folder: Path, limit: int | None) -> None:
    """Write the gold contexts of the first ``limit`` tasks (all: ``None``) as Markdown files."""
    seen = set()
    for line in (DATA / "mtrag-un" / "reference.jsonl").read_text().splitlines()[:limit]:
        for context in json.loads(line)["contexts"]:
            doc_id = context["document_id"]
            if doc_id in seen:
                continue
            seen.add(doc_id)
            title = context.get("title") or doc_id
            (folder / f"{doc_id}.md").write_text(f"# {title}\n\n{context['text']}\n")


def _qrels() -> dict[str, set[str]]:
    relevant: dict[str, set[str]] = defaultdict(set)
    for path in (DATA / "mtrag-un" / "qrels").glob("*.tsv"):
        for row in path.read_text().splitlines()[1:]:
            query_id, corpus_id, score = row.split("\t")
            if float(score) > 0:
                relevant[query_id].add(corpus_id)
    return relevant


def _seed(runtime: Runtime, principal: Principal, turns: list[dict]) -> str | None:
    if not turns:
        return None
    with runtime.database.session() as session:
        conversation, sealer = create_conversation(
            session, runtime.vault, principal, turns[0]["text"][:80]
        )
        for turn in turns:
            role = "user" if turn["speaker"] == "user" else "assistant"
            append_message(session, conversation, sealer, role=role, text=turn["text"])
        return conversation.id


def mtrag(runtime: Runtime, limit: int | None, calibrate: bool) -> list[tuple[float, bool]]:
    """Run the MTRAG-UN set; print its table; return (best score, answerable) pairs."""
    principal = runtime.local_principal()
    with tempfile.TemporaryDirectory() as folder:
        _mtrag_corpus(Path(folder), limit)
        started = time.perf_counter()
        summary = runtime.knowledge.ingest_paths([Path(folder)], AccessList())
        console.print(f"MTRAG-UN corpus: {summary.line()} ({time.perf_counter() - started:.0f} s)")
    relevant = _qrels()
    scorer = SentenceScorer(runtime.embedder)
    recall: dict[str, list[float]] = defaultdict(list)
    unanswerable, false_nf, searched = [], [], []
    by_collection: dict[str, list[bool]] = defaultdict(list)
    samples: list[tuple[float, bool]] = []
    tasks = [
        json.loads(line)
        for line in (DATA / "mtrag-un" / "reference.jsonl").read_text().splitlines()
    ]
    for task in track(tasks[:limit], description="MTRAG-UN tasks", console=console):
        history, last = task["input"][:-1], task["input"][-1]
        kind = task["Multi-Turn"][0] if task["Multi-Turn"] != ["N/A"] else "First turn"
        if not history:
            kind = "First turn"
        turn = _events(runtime, principal, last["text"], _seed(runtime, principal, history))
        searched.append(bool(turn["tool_calls"]))
        answerability = task["answerability"][0]
        collection = task.get("Collection", "?")
        gold = relevant.get(task["task_id"], set())
        if gold:
            docs = []
            if turn["tool_calls"]:
                query = turn["tool_calls"][0]["arguments"]["query"]
                docs = [Path(s).stem for s in _hit_documents(runtime, principal, query, 5)]
            recall[kind].append(len(gold & set(docs)) / len(gold))
            recall["all"].append(len(gold & set(docs)) / len(gold))
        if answerability == "UNANSWERABLE":
            unanswerable.append(is_not_found(turn))
            by_collection[f"unanswerable {collection}"].append(is_not_found(turn))
        elif answerability == "ANSWERABLE":
            false_nf.append(is_not_found(turn))
            by_collection[f"answerable {collection}"].append(is_not_found(turn))
        detail = (turn.get("trace") or {}).get("decision_detail")
        if detail and answerability in ("UNANSWERABLE", "ANSWERABLE"):
            _DUMPED.append(
                {
                    "set": f"mtrag-{collection}",
                    "answerable": answerability == "ANSWERABLE",
                    "question": last["text"],
                    "text": turn.get("text", ""),
                    **detail,
                }
            )
        if calibrate and answerability in ("UNANSWERABLE", "ANSWERABLE"):
            score = _best_sentence(runtime, scorer, turn, last["text"])
            samples.append((score, answerability == "ANSWERABLE"))
    table = Table(title=f"MTRAG-UN ({len(tasks[:limit])} tasks; corpus = union of contexts)")
    for column in ("metric", "value", "n", "target"):
        table.add_column(column)
    for kind in ("First turn", "Follow-up", "Clarification", "all"):
        table.add_row(
            f"recall@5 of written query: {kind}",
            f"{_mean(recall[kind]):.3f}",
            str(len(recall[kind])),
            "" if kind in ("First turn", "all") else "within 0.03 of first turn",
        )
    table.add_row("searched (any turn)", f"{_mean(searched):.3f}", str(len(searched)), "")
    table.add_row(
        "not-found accuracy (UNANSWERABLE)",
        f"{_mean(unanswerable):.3f}",
        str(len(unanswerable)),
        ">= 0.85",
    )
    table.add_row(
        "ANSWERABLE answered 'not found'", f"{_mean(false_nf):.3f}", str(len(false_nf)), "<= 0.10"
    )
    # Per collection: a decision calibrated on one collection must hold on the other.
    for key in sorted(by_collection):
        table.add_row(
            f"  answered 'not found': {key}",
            f"{_mean(by_collection[key]):.3f}",
            str(len(by_collection[key])),
            "",
        )
    console.print(table)
    return samples


def _mean(values: list[Any]) -> float:
    return statistics.fmean(values) if values else float("nan")


def print_calibration(name: str, samples: list[tuple[float, bool]]) -> None:
    """Print the accuracy of answering vs "not found" at candidate thresholds."""
    scores = [(s, a) for s, a in samples if s == s]  # drop NaN (turns that did not search)
    if not scores:
        return
    table = Table(title=f"not-found threshold calibration: {name} (best sentence score)")
    for column in ("threshold", "answerable kept", "unanswerable refused", "balanced acc."):
        table.add_column(column)
    for step in range(30, 71, 5):
        threshold = step / 100
        kept = [s >= threshold for s, a in scores if a]
        refused = [s < threshold for s, a in scores if not a]
        balanced = (_mean(kept) + _mean(refused)) / 2
        table.add_row(
            f"{threshold:.2f}", f"{_mean(kept):.3f}", f"{_mean(refused):.3f}", f"{balanced:.3f}"
        )
    console.print(table)


def main() -> int:
    """Run the evaluation; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-handbook", action="store_true")
    parser.add_argument("--skip-mtrag", action="store_true")
    parser.add_argument("--mtrag-limit", type=int, default=None, help="first N tasks only")
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument(
        "--dump",
        type=Path,
        default=None,
        help="write each searched turn's decision detail, question and answer here (JSON lines)",
    )
    args = parser.parse_args()
    if not DATA.is_dir():
        console.print(f"data folder {DATA} not found (the repository sits beside shared/)")
        return 2
    if not args.skip_handbook:
        with (
            tempfile.TemporaryDirectory() as data_dir,
            Runtime(load_settings(data_dir=Path(data_dir))) as runtime,
        ):
            samples = handbook(runtime, args.calibrate)
            if args.calibrate:
                print_calibration("handbook", samples)
    if not args.skip_mtrag:
        with (
            tempfile.TemporaryDirectory() as data_dir,
            Runtime(load_settings(data_dir=Path(data_dir))) as runtime,
        ):
            samples = mtrag(runtime, args.mtrag_limit, args.calibrate)
            if args.calibrate:
                print_calibration("MTRAG-UN", samples)
    if args.dump is not None:
        args.dump.write_text("".join(json.dumps(row) + "\n" for row in _DUMPED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
