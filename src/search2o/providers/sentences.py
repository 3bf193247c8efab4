"""Sentences of retrieved passages, and which of them answer a question best.

Used by the built-in extractive chat model. A sentence's score is the cosine similarity of its
embedding to the query's, plus a keyword bonus: the IDF-weighted share of the question's own
content words (Porter-stemmed, Snowball stop words removed) that the sentence contains, with
IDF computed over the candidate sentences as in BM25 (Robertson & Zaragoza, "The Probabilistic
Relevance Framework: BM25 and Beyond", 2009: ``ln((N - df + 0.5) / (df + 0.5) + 1)``). The bonus
lets "how many can roll over?" prefer the sentence that says "rolls over" to one that only
shares the carried-over subject ("vacation days"), and "less than a year" prefer the sentence
with the rare word "less" to ones that only say "year" — as extractive QA baselines mix lexical
overlap with semantic similarity (Yang et al., "WikiQA", EMNLP 2015, word-count features).
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import snowballstemmer

from search2o.providers.embeddings import Embedder
from search2o.storage.lexical import STOP_WORDS

__all__ = ["ScoredSentence", "SentenceScorer", "content_stems", "split_sentences"]

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKUP = re.compile(r"[*_`#>|]+")
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9$])")
_SINGLE_LINE = re.compile(r"^\s*(?:#|\|)")
_BLOCK_START = re.compile(r"^\s*(?:[-+*•]\s|\d+[.)]\s|#|\||>)")
_BULLET = re.compile(r"^\s*(?:[-+•]|\d+[.)])\s+")
_WORD = re.compile("[a-z0-9$%]+(?:['\u2019][a-z]+)?")
_MIN_WORDS = 4
_ABBREVIATION = re.compile(
    r"(?:\b(?:e\.g|i\.e|etc|vs|approx|incl|Mr|Mrs|Ms|Dr|Prof|St|No|Fig|U\.S)\.)$", re.IGNORECASE
)


_LOCAL = threading.local()


def _stemmer() -> snowballstemmer.Stemmer:
    # A Snowball stemmer keeps state while it stems: one per thread (turns run concurrently).
    stemmer: snowballstemmer.Stemmer | None = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:
        stemmer = _LOCAL.stemmer = snowballstemmer.stemmer("porter")
    return stemmer


def content_stems(text: str, *, compounds: bool = False) -> set[str]:
    """Return the Porter stems of ``text``'s words that are not Snowball English stop words.

    A contraction counts as its first part ("i've" is "i", a stop word; "company's" is "company").
    With ``compounds``, each pair of adjacent words also counts as one closed compound (the
    first word's stem joined to the second word), so "cooling down" matches "cooldown" and
    "work day" matches "workday".
    """
    words = [re.split("['\u2019]", w)[0] for w in _WORD.findall(text.lower())]
    words = [w for w in words if w]
    stems = set(_stemmer().stemWords([w for w in words if w not in STOP_WORDS]))
    if compounds and len(words) > 1:
        joined = [a + b for a, b in zip(_stemmer().stemWords(words), words[1:], strict=False)]
        stems.update(_stemmer().stemWords(joined))
    return stems


def _segments(text: str) -> list[str]:
    """Join hard-wrapped lines; a segment starts at a blank line, bullet, heading or table row."""
    segments: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        starts_block = not line.strip() or _BLOCK_START.match(line) is not None
        if starts_block and current:
            segments.append(" ".join(current))
            current = []
        if line.strip():
            current.append(line.strip())
        if _SINGLE_LINE.match(line) and current:  # a heading or table row stands alone
            segments.append(" ".join(current))
            current = []
    if current:
        segments.append(" ".join(current))
    return segments


def _balance(sentence: str) -> str:
    """Drop a bracket left open or closed by the split: "(Kandji is ...)" cut in two."""
    if sentence.count("(") < sentence.count(")") and sentence.endswith(")"):
        sentence = sentence[:-1]
    if sentence.count("(") > sentence.count(")") and sentence.startswith("("):
        sentence = sentence[1:]
    return sentence


def split_sentences(text: str) -> list[str]:
    """Split passage text into readable sentences, Markdown links and emphasis removed.

    Hard-wrapped lines are joined first (a paragraph, bullet, heading or table row is one
    segment); segments are split at sentence ends (``.``, ``!``, ``?`` before a capital or
    digit); bullets lose their marker; pieces under four words (headings, fragments) are
    dropped. Returns sentences in text order (questions included: see :class:`SentenceScorer`).
    """
    sentences: list[str] = []
    for segment in _segments(_LINK.sub(r"\1", text)):
        plain = _MARKUP.sub("", _BULLET.sub("", segment))
        pieces: list[str] = []
        for piece in _SPLIT.split(plain):
            # "e.g. Kandji" is not a sentence end: glue the piece back to the one before.
            if pieces and _ABBREVIATION.search(pieces[-1]):
                pieces[-1] = f"{pieces[-1]} {piece}"
            else:
                pieces.append(piece)
        for piece in pieces:
            line = _balance(re.sub(r"\s+", " ", piece).strip())
            if len(line.split()) >= _MIN_WORDS:
                sentences.append(line)
    return sentences


@dataclass(frozen=True)
class ScoredSentence:
    """A sentence of the passage with key ``passage``, at ``position``, with its ``score``."""

    passage: int
    position: int
    text: str
    score: float


class SentenceScorer:
    """Scores sentences against a query with an embedder and a keyword bonus.

    Questions are never returned; the sentence right after a question in the same passage
    scores at least as high as the question (FAQ answers).

    Args:
        embedder: any :class:`Embedder` (unit-length rows, so a dot product is the cosine).
        keyword_weight: weight of the keyword share (0..1) added to the cosine (-1..1).
        cache_size: sentence vectors kept between calls (document text, not user data).

    """

    def __init__(
        self, embedder: Embedder, *, keyword_weight: float = 0.35, cache_size: int = 8192
    ) -> None:
        self._embedder = embedder
        self._weight = keyword_weight
        self._cache: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # turns of several requests share the cache

    def _vectors(self, texts: list[str]) -> npt.NDArray[np.float32]:
        with self._lock:
            known = {t: self._cache[t] for t in texts if t in self._cache}
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            known.update(zip(missing, self._embedder.embed(missing), strict=True))
        with self._lock:
            for text in texts:
                self._cache[text] = known[text]
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        if not texts:
            return np.zeros((0, self._embedder.dimension), np.float32)
        return np.vstack([known[t] for t in texts])

    def score(
        self, query: str, question: str, passages: list[tuple[int, str]]
    ) -> list[ScoredSentence]:
        """Score every sentence of ``passages`` (``(key, text)`` pairs), best first.

        A sentence that appears more than once (the same text in several passages) is
        returned once, at its best score.

        Args:
            query: the self-contained search query (embedded for the cosine).
            question: the user's own words (their content words give the keyword bonus).
            passages: passage texts, each with a key the caller chooses (returned as
                :attr:`ScoredSentence.passage`).

        Raises:
            ProviderError: the embedder failed.

        """
        sentences = [
            (number, position, text)
            for number, body in passages
            for position, text in enumerate(split_sentences(body))
        ]
        if not sentences:
            return []
        query_vector = self._embedder.embed([query])[0]
        cosines = self._vectors([text for _, _, text in sentences]) @ query_vector
        asked = content_stems(question) or content_stems(query)
        stems = [content_stems(text, compounds=True) for _, _, text in sentences]
        count = len(sentences)
        idf = {
            term: math.log((count - df + 0.5) / (df + 0.5) + 1)
            for term in asked
            for df in [sum(term in s for s in stems)]
        }
        total = sum(idf.values())
        scores = []
        for cosine, have in zip(cosines, stems, strict=True):
            share = sum(idf[t] for t in asked & have) / total if total else 0.0
            scores.append(float(cosine) + self._weight * share)
        # A question in a passage (a FAQ) is not an answer, but the sentence after it is the
        # answer to it: that sentence gets the question's score when it is higher.
        scored = []
        for index, (number, position, text) in enumerate(sentences):
            if text.endswith("?"):
                continue
            score = scores[index]
            before = sentences[index - 1] if index else None
            if before is not None and before[0] == number and before[2].endswith("?"):
                score = max(score, scores[index - 1])
            scored.append(ScoredSentence(number, position, text, score))
        best: dict[str, ScoredSentence] = {}
        for sentence in sorted(scored, key=lambda s: -s.score):
            best.setdefault(sentence.text, sentence)
        return list(best.values())
