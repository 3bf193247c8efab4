"""The relevance threshold, calibrated on the labelled set, and the vector-vs-hybrid measurement.

Every pair of ``tests/memory/labelled.py`` is scored through the real store (stored, embedded,
searched on each backend). The table printed here is the one in ``docs/memory.md``: precision
and recall at the configured ``memory.min_score``, the best F1 over a sweep, and the same for
two alternatives: embedding the text without its label, and adding a lexical match (the
IDF-weighted share of the query's Porter stems, CJK bigrams and emoji that the memory holds,
as the Query Engine's sentence scorer does) to the cosine.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable

import pytest
import snowballstemmer

from search2o.memory import MemoryStore
from search2o.runtime import Runtime
from search2o.storage.lexical import STOP_WORDS
from tests.memory.conftest import add_user
from tests.memory.labelled import HARD_NEGATIVES, MEMORIES, PAIRS, RELEVANT, UNRELATED

pytestmark = pytest.mark.slow

Scores = dict[tuple[str, str], float]
_CJK = "\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff"
_RUNS = re.compile(f"[{_CJK}]+|[^{_CJK}]+")
_STEMMER = snowballstemmer.stemmer("porter")


def _terms(text: str) -> set[str]:
    """Porter stems (stop words left out), CJK character bigrams and emoji of ``text``."""
    out: set[str] = set()
    normal = unicodedata.normalize("NFKC", text).lower()
    for word in re.findall(r"\w+", normal):
        for run in _RUNS.findall(word):
            if re.match(f"[{_CJK}]", run):
                out.update(
                    [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
                )
            else:
                out.update(
                    _STEMMER.stemWord(w) for w in run.split("_") if w and w not in STOP_WORDS
                )
    out.update(ch for ch in normal if unicodedata.category(ch) == "So")
    return out


def _lexical_share() -> Callable[[str, str], float]:
    """The IDF-weighted share of a query's terms a memory holds (BM25's IDF over MEMORIES)."""
    held = {label: _terms(text) for label, text in MEMORIES.items()}
    n = len(held)

    def idf(term: str) -> float:
        df = sum(term in terms for terms in held.values())
        return math.log((n - df + 0.5) / (df + 0.5) + 1)

    def share(query: str, label: str) -> float:
        wanted = _terms(query)
        total = sum(idf(t) for t in wanted)
        return sum(idf(t) for t in wanted if t in held[label]) / total if total else 0.0

    return share


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


def _store_scores(runtime: Runtime, memory: MemoryStore) -> Scores:
    """Score every pair through the store: store MEMORIES, search each query with no cut."""
    me = add_user(runtime)
    items = list(MEMORIES.items())
    for start in range(0, len(items), 8):  # at most 10 labels per agent
        memory.store(me, f"profile-{start // 8}", dict(items[start : start + 8]))
    scores: Scores = {}
    for query in dict.fromkeys(q for q, _, _ in PAIRS):
        hits = memory.search(me, query, limit=100, min_score=-1, touch=False)
        assert len(hits) == len(MEMORIES)
        scores.update({(query, h.label): h.score for h in hits})
    return scores


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
    store = _store_scores(runtime, memory)

    text_only: Scores = {}
    queries = list(dict.fromkeys(q for q, _, _ in PAIRS))
    query_vectors = runtime.embedder.embed(queries)
    memory_vectors = runtime.embedder.embed(list(MEMORIES.values()))
    similarity = query_vectors @ memory_vectors.T
    for i, query in enumerate(queries):
        for j, label in enumerate(MEMORIES):
            text_only[query, label] = float(similarity[i, j])
    generic: Scores = {}
    numbered = [f"note {i}: {text}" for i, text in enumerate(MEMORIES.values())]
    similarity = query_vectors @ runtime.embedder.embed(numbered).T
    for i, query in enumerate(queries):
        for j, label in enumerate(MEMORIES):
            generic[query, label] = float(similarity[i, j])
    share = _lexical_share()
    hybrid = {w: {k: s + w * share(*k) for k, s in store.items()} for w in (0.1, 0.2, 0.3)}

    rows = [
        ("vector, label + text (used)", store),
        ("vector, text only", text_only),
        ("vector, 'note N' labels + text", generic),
    ]
    rows += [(f"hybrid: cosine + {w} x lexical", scores) for w, scores in hybrid.items()]
    precision, recall, f1 = _metrics(store, threshold)
    positives = sum(relevant for _, _, relevant in PAIRS)
    with capsys.disabled():
        print(f"\n[{runtime.database.backend}] memory relevance on {len(PAIRS)} labelled pairs")
        print(f"({positives} relevant, {len(PAIRS) - positives} not)")
        print(f"memory.min_score = {threshold}: precision {precision:.3f}, recall {recall:.3f}")
        print(f"{'variant':34} {'best F1':>8} {'at':>5} {'R@P>=.90':>9} {'R@P>=.95':>9}")
        for name, scores in rows:
            best_f1, at, r90, r95 = _best(scores)
            print(f"{name:34} {best_f1:8.3f} {at:5.2f} {r90:9.3f} {r95:9.3f}")
        relevant = [store[q, m] for q, m, _ in RELEVANT]
        hard = [store[q, m] for q, m, _ in HARD_NEGATIVES]
        other = [store[q, m] for q, m, _ in UNRELATED]
        quantum = [s for (q, _), s in store.items() if q == "quantum chromodynamics"]
        print(
            f"relevant pairs {min(relevant):.3f}..{max(relevant):.3f}; hard negatives "
            f"{min(hard):.3f}..{max(hard):.3f}; unrelated pairs {min(other):.3f}.."
            f"{max(other):.3f}; 'quantum chromodynamics' vs every memory <= {max(quantum):.3f}"
        )

    # the configured threshold is a best-F1 threshold of the labelled set
    assert precision >= 0.85 and recall >= 0.95
    assert f1 >= _best(store)[0] - 0.01
    # the issue's own example and the unrelated queries
    assert store["which airline do they like?", "preferred_airline"] >= threshold
    unrelated = [s for (q, _), s in store.items() if q == "quantum chromodynamics"]
    assert max(unrelated) < threshold
    assert max(store[q, m] for q, m, _ in UNRELATED) < threshold
    # the decision documented in docs/memory.md: the label helps, lexical matching does not
    assert _best(store)[0] > _best(text_only)[0]
    assert _best(generic)[0] >= _best(text_only)[0] - 0.01  # a meaningless label costs nothing
    for scores in hybrid.values():
        assert _best(scores)[0] <= _best(store)[0] + 0.01
        assert _best(scores)[3] <= _best(store)[3] + 1e-9  # stricter operating points lose
