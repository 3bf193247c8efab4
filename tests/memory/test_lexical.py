"""The lexical half of memory search: terms, keyed hashes, the BM25 share; the embedded text."""

from __future__ import annotations

import numpy as np
import pytest

from search2o.crypto.envelope import new_data_key
from search2o.crypto.vault import Sealer
from search2o.errors import InputError
from search2o.memory.lexical import (
    bm25_shares,
    decode_hashes,
    encode_hashes,
    holds_any,
    term_hashes,
    terms,
)
from search2o.memory.ranking import best, embedding_text, vector_literal
from search2o.memory.temporal import asks_when, time_terms

KEY = b"k" * 32


def corpus(*texts: str) -> list[bytes]:
    return [encode_hashes(term_hashes(KEY, terms(t))) for t in texts]


def share(query: str, *texts: str) -> list[float]:
    return bm25_shares(corpus(*texts), term_hashes(KEY, terms(query))).tolist()


def test_terms_stem_drop_stop_words_and_split_cjk_and_emoji() -> None:
    assert terms("The user prefers flying with KLM") == ["user", "prefer", "fli", "klm"]
    assert terms("用户喜欢绿茶") == ["用户", "户喜", "喜欢", "欢绿", "绿茶"]
    assert terms("loves 🍣 sushi") == ["love", "sushi", "🍣"]
    assert terms("preferred_airline") == ["prefer", "airlin"]
    assert terms("the of and") == []


def test_hashes_are_keyed_and_round_trip() -> None:
    words = terms("The user prefers to fly KLM")
    ours = term_hashes(KEY, words)
    assert ours.shape == (len(words),) and ours.dtype == np.uint64
    assert term_hashes(KEY, words).tolist() == ours.tolist()
    assert not set(term_hashes(b"o" * 32, words).tolist()) & set(ours.tolist())
    assert sorted(decode_hashes(encode_hashes(ours)).tolist()) == sorted(ours.tolist())


def test_the_share_is_zero_without_a_shared_term_and_below_one() -> None:
    assert share("quantum chromodynamics", "The user drinks black coffee", "KLM") == [0.0, 0.0]
    full, half, none = share("coffee black", "black coffee", "coffee tea", "green tea")
    assert 0 < half < full < 1 and none == 0.0
    # a query whose other words occur nowhere scores lower than one fully matched
    (partial,) = share("coffee zeppelin", "black coffee")
    (whole,) = share("coffee", "black coffee")
    assert partial < whole
    assert share("", "black coffee") == [0.0]
    assert bm25_shares([], term_hashes(KEY, ["x"])).shape == (0,)


def test_rarer_terms_and_repeats_weigh_more() -> None:
    common, rare = share("coffee leiden", "coffee", "leiden", "coffee", "coffee")[:2]
    assert rare > common
    once, twice = share("tea", "tea and bread", "tea tea and bread")
    assert twice > once


def test_the_label_is_embedded_only_when_it_carries_words() -> None:
    assert embedding_text("preferred_airline", "KLM") == "preferred airline: KLM"
    assert embedding_text("D1-3", "Hi there") == "Hi there"
    assert embedding_text("q2", "Hi") == "Hi"
    assert embedding_text("note.3", "Hi") == "note 3: Hi"


def test_best_keeps_the_threshold_the_limit_and_ties_by_id() -> None:
    ids = np.array([5, 3, 9, 1], dtype=np.int64)
    scores = np.array([0.5, 0.9, 0.5, 0.1], dtype=np.float32)
    assert best(ids, scores, 2, 0.2) == [(3, pytest.approx(0.9)), (5, pytest.approx(0.5))]
    assert best(ids, scores, 10, 0.2) == [
        (3, pytest.approx(0.9)),
        (5, pytest.approx(0.5)),
        (9, pytest.approx(0.5)),
    ]
    assert best(ids, scores, 3, 0.95) == []


def test_derived_keys_differ_by_purpose_scope_and_owner() -> None:
    key = new_data_key()
    base = Sealer("user:1", 1, key)
    derived = {
        base.derive("memory-terms"),
        base.derive("other"),
        Sealer("user:2", 1, key).derive("memory-terms"),
        Sealer("user:1", 2, key).derive("memory-terms"),
    }
    assert len(derived) == 4 and all(len(k) == 32 for k in derived)
    assert base.derive("memory-terms") == Sealer("user:1", 1, key).derive("memory-terms")


def test_holds_any_finds_the_memories_with_one_of_the_hashes() -> None:
    blobs = corpus("we went there yesterday", "a lovely trip", "next week then")
    found = holds_any(blobs, term_hashes(KEY, list(time_terms())))
    assert found.tolist() == [True, False, True]
    assert holds_any(blobs, term_hashes(KEY, [])).tolist() == [False, False, False]


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("When did Caroline go to the support group?", True),
        ("how long ago was her 18th birthday?", True),
        ("What year did they move?", True),
        ("  Since when has he worked there?", True),
        ("What did Caroline paint?", False),
        ("Where do they live when it rains?", False),
    ],
)
def test_asks_when_recognises_questions_for_a_time(question: str, asks: bool) -> None:
    assert asks_when(question) is asks


def test_the_query_vector_literal_gives_back_every_float32_and_refuses_nan() -> None:
    vector = np.random.default_rng(3).standard_normal(384).astype(np.float32) * 0.05
    literal = vector_literal(vector)
    assert literal.startswith("[") and literal.endswith("]")
    back = np.array([float(x) for x in literal[1:-1].split(",")], dtype=np.float32)
    assert np.array_equal(back, vector)
    for bad in (np.nan, np.inf):
        with pytest.raises(InputError, match="query"):
            vector_literal(np.array([0.1, bad], dtype=np.float32))
