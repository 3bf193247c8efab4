"""The relevance threshold, calibrated on the labelled set, and the hybrid-vs-vector measurement.

Every pair of ``tests/memory/labelled.py`` is scored through the real store (stored, embedded,
hashed, searched on each backend). The table printed here is the one in ``docs/memory.md``:
precision and recall at the configured ``memory.min_score``, the best F1 over a sweep, and the
same for alternatives: other ``memory.lexical_weight`` values (0 = cosine alone), and embedding
the text without its label or behind a meaningless one.
"""

from __future__ import annotations

import pytest

from search2o.memory import MemoryStore
from search2o.runtime import Runtime
from tests.memory.conftest import add_user, store_with
from tests.memory.labelled import HARD_NEGATIVES, MEMORIES, PAIRS, RELEVANT, UNRELATED

pytestmark = pytest.mark.slow

Scores = dict[tuple[str, str], float]
WEIGHTS = (0.0, 0.25, 0.5)


def _metrics(scores: Scores, threshold: float) -> tuple[float, float, float]:
    tp = sum(scores[q, m] >= threshold and relevant for q, m, relevant in PAIRS)
    fp = sum(scores[q, m] >= threshold and not relevant for q, m, relevant in PAIRS)
    positives = sum(relevant for _, _, relevant in PAIRS)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / positives
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def _best(scores: Scores) -> tuple[float, float, float, float]:
    """(best F1, its threshold, recall at precision >= 0.9, recall at precision >= 0.95)."""
    sweep = [(_metrics(scores, t / 100), t / 100) for t in range(0, 101)]
    (_, _, f1), threshold = max(sweep, key=lambda item: (item[0][2], -item[1]))
    r90 = max((m[1] for m, _ in sweep if m[0] >= 0.9), default=0.0)
    r95 = max((m[1] for m, _ in sweep if m[0] >= 0.95), default=0.0)
    return f1, threshold, r90, r95


def _store_scores(runtime: Runtime, stores: list[MemoryStore]) -> list[Scores]:
    """Score every pair through each store: store MEMORIES once, search each query with no cut."""
    me = add_user(runtime)
    items = list(MEMORIES.items())
    for start in range(0, len(items), 8):  # at most 10 labels per agent
        stores[0].store(me, f"profile-{start // 8}", dict(items[start : start + 8]))
    tables: list[Scores] = []
    for memory in stores:
        scores: Scores = {}
        for query in dict.fromkeys(q for q, _, _ in PAIRS):
            hits = memory.search(me, query, limit=100, min_score=-1, touch=False)
            assert len(hits) == len(MEMORIES)
            scores.update({(query, h.label): h.score for h in hits})
        tables.append(scores)
    return tables


def test_the_labelled_set_is_large_and_mixed() -> None:
    assert len(PAIRS) >= 60
    assert len(set(PAIRS)) == len(PAIRS)
    assert all(label in MEMORIES for _, label, _ in PAIRS)
    assert all(relevant for _, _, relevant in RELEVANT)
    assert not any(relevant for _, _, relevant in HARD_NEGATIVES + UNRELATED)
    assert len(RELEVANT) >= 30 and len(HARD_NEGATIVES) >= 10 and len(UNRELATED) >= 30


def test_threshold_calibration_and_the_hybrid_measurement(
    runtime: Runtime, memory: MemoryStore, capsys: pytest.CaptureFixture[str]
) -> None:
    threshold = memory.settings.min_score
    used = memory.settings.lexical_weight
    others = [store_with(runtime, lexical_weight=w) for w in WEIGHTS]
    store, *weighted = _store_scores(runtime, [memory, *others])

    queries = list(dict.fromkeys(q for q, _, _ in PAIRS))
    query_vectors = runtime.embedder.embed(queries)

    def vector_only(texts: list[str]) -> Scores:
        similarity = query_vectors @ runtime.embedder.embed(texts).T
        return {
            (query, label): float(similarity[i, j])
            for i, query in enumerate(queries)
            for j, label in enumerate(MEMORIES)
        }

    text_only = vector_only(list(MEMORIES.values()))
    generic = vector_only([f"note {i}: {text}" for i, text in enumerate(MEMORIES.values())])
    rows = [(f"cosine + {used} x BM25 share, label + text (used)", store)]
    rows += [
        (f"cosine + {w} x BM25 share", scores) for w, scores in zip(WEIGHTS, weighted, strict=True)
    ]
    rows += [
        ("cosine alone, text only", text_only),
        ("cosine alone, 'note N' labels + text", generic),
    ]
    precision, recall, f1 = _metrics(store, threshold)
    positives = sum(relevant for _, _, relevant in PAIRS)
    with capsys.disabled():
        print(f"\n[{runtime.database.backend}] memory relevance on {len(PAIRS)} labelled pairs")
        print(f"({positives} relevant, {len(PAIRS) - positives} not)")
        print(f"memory.min_score = {threshold}: precision {precision:.3f}, recall {recall:.3f}")
        print(f"{'variant':42} {'best F1':>8} {'at':>5} {'R@P>=.90':>9} {'R@P>=.95':>9}")
        for name, scores in rows:
            best_f1, at, r90, r95 = _best(scores)
            print(f"{name:42} {best_f1:8.3f} {at:5.2f} {r90:9.3f} {r95:9.3f}")
        relevant = [store[q, m] for q, m, _ in RELEVANT]
        hard = [store[q, m] for q, m, _ in HARD_NEGATIVES]
        other = [store[q, m] for q, m, _ in UNRELATED]
        quantum = [s for (q, _), s in store.items() if q == "quantum chromodynamics"]
        print(
            f"relevant pairs {min(relevant):.3f}..{max(relevant):.3f}; hard negatives "
            f"{min(hard):.3f}..{max(hard):.3f}; unrelated pairs {min(other):.3f}.."
            f"{max(other):.3f}; 'quantum chromodynamics' vs every memory <= {max(quantum):.3f}"
        )

    # the configured threshold finds every relevant pair, within 0.01 of the best F1
    assert precision >= 0.85 and recall == 1.0
    assert f1 >= _best(store)[0] - 0.01
    # the issue's own example and the unrelated queries
    assert store["which airline do they like?", "preferred_airline"] >= threshold
    unrelated = [s for (q, _), s in store.items() if q == "quantum chromodynamics"]
    assert max(unrelated) < threshold
    assert max(store[q, m] for q, m, _ in UNRELATED) < threshold
    # the decisions documented in docs/memory.md: the label helps; the lexical share costs at
    # most one pair of the best F1 of cosine alone (LoCoMo recall@10 gains 0.11 for it) and
    # finds more at precision >= 0.90
    vector = weighted[WEIGHTS.index(0.0)]
    assert _best(vector)[0] > _best(text_only)[0]
    assert _best(generic)[0] >= _best(text_only)[0] - 0.01  # a meaningless label costs nothing
    assert _best(store)[0] >= _best(vector)[0] - 0.015
    assert _best(store)[2] >= _best(vector)[2]
