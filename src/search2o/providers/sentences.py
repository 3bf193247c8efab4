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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import snowballstemmer

from search2o.providers.embeddings import Embedder
from search2o.storage.lexical import STOP_WORDS

__all__ = ["ScoredSentence", "SentenceScorer", "content_stems", "split_sentences"]

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
# Markdown markup, and only markup: what a sentence quotes keeps every character of content
# ("knowledge.max_k", "SEARCH2O_DATA_DIR", "<data_dir>/search2o.db", "a -> b", "C# and F#").
_QUOTE = re.compile(r"^\s*(?:>\s?)+")  # blockquote markers, at the start of a line only
_HEADING = re.compile(r"^\s*#{1,6}(?:\s+|$)")  # "# Title" (not "#1" or "C#")
_HEADING_END = re.compile(r"\s+#+\s*$")  # the optional closing "##" of a heading
_FENCE = re.compile(r"^\s*(?:```|~~~)")  # a code fence line: a boundary, not text
_RULE = re.compile(r"^\s*(?:(?:[-*_]\s*){3,}|=+\s*)$")  # thematic break, setext underline
_TABLE_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")  # |---|:--:|
_CODE = re.compile(r"(?<![`\\])(`+)(?!`)(.+?)(?<!`)\1(?!`)")  # `code`, ``co`de``
_ESCAPE = re.compile(r"\\([*_`|#>])")  # \* \_ \` \| \# \> are the literal characters
# Emphasis: a run of one to three "*" or "_" opening before a word and closing after one, not
# inside a word: "**bold**", "_em_", "***both***"; never the "_" of max_k or SEARCH2O_DATA_DIR,
# nor "2 * 3 * 4" or "*.md". A lone dunder name ("__init__") is taken for the name, not bold.
_EMPHASIS = (
    re.compile(r"(?<![\w*])(\*{1,3})(?=[^\s*])(.+?)(?<=[^\s*])\1(?![\w*])"),
    re.compile(r"(?<![\w_])(?!__[^\W_]+__(?![\w_]))(_{1,3})(?=[^\s_])(.+?)(?<=[^\s_])\1(?![\w_])"),
)
_KEPT = 0xF0000  # private-use code points standing for text the markup rules must not touch
_KEPT_MARK = re.compile("[\U000f0000-\U0010fffd]")  # planes 15 and 16
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9$])")
_BLOCK_START = re.compile(r"^\s*(?:[-+*•]\s|\d+[.)]\s|\|)")
_BULLET = re.compile(r"^\s*(?:[-+*•]|\d+[.)])\s+")
_WORD = re.compile("[a-z0-9$%]+(?:['\u2019][a-z]+)?")
_NEGATIVE = re.compile("n['\u2019]t$")  # "didn't", "isn\u2019t", "won't"
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

    A contraction counts as its first part ("i've" is "i", a stop word; "company's" is "company");
    a negative one ("didn't", "isn't") counts as none.
    With ``compounds``, each pair of adjacent words also counts as one closed compound (the
    first word's stem joined to the second word), so "cooling down" matches "cooldown" and
    "work day" matches "workday".
    """
    found = _WORD.findall(text.lower())
    # A negative contraction is an auxiliary and "not", both stop words: "didn't" is no
    # content word (split at the apostrophe it would be "didn", which no stop list holds).
    words = [re.split("['\u2019]", w)[0] for w in found if not _NEGATIVE.search(w)]
    words = [w for w in words if w]
    stems = set(_stemmer().stemWords([w for w in words if w not in STOP_WORDS]))
    if compounds and len(words) > 1:
        joined = [a + b for a, b in zip(_stemmer().stemWords(words), words[1:], strict=False)]
        stems.update(_stemmer().stemWords(joined))
    return stems


def _is_table_delimiter(line: str) -> bool:
    return "|" in line and _TABLE_DELIMITER.match(line) is not None


_Kind = Literal["text", "table", "header", "code"]
_CELL = "\x1f"  # stands for a table row's cell pipe until the row is split into cells
# A table row of at most this many words is one sentence ("Setting: a; Default: 32"); a longer
# one (a rubric's paragraphs per level) is one sentence per cell, each under its column.
_ROW_WORDS = 30


def _segments(text: str) -> list[tuple[str, _Kind]]:
    """Join hard-wrapped lines into segments, each with its kind; line markup removed.

    A segment starts at a blank line, bullet, heading, table row, blockquote or code fence; a
    heading or table row stands alone. Blockquote, heading and bullet markers go (at the start
    of a line only); fences, thematic breaks and table delimiter rows are boundaries, dropped.
    A table row is a line starting with ``|``, or a line with a ``|`` in a table (the header
    above a delimiter row, the rows below it). The lines of a fenced code block are one
    ``code`` segment, kept verbatim.
    """
    raw = text.splitlines()
    quoted = [_QUOTE.match(line) is not None for line in raw]
    lines = [_QUOTE.sub("", line, count=1) for line in raw]
    segments: list[tuple[str, _Kind]] = []
    current: list[str] = []
    kind: _Kind = "text"

    def flush() -> None:
        if current:
            segments.append((" ".join(current), kind))
            current.clear()

    in_table = False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            flush()
            kind = "text" if kind == "code" else "code"
            continue
        if kind == "code":
            if line.strip():
                current.append(line.strip())
            continue
        if _RULE.match(line) or _is_table_delimiter(line):
            flush()
            in_table = _is_table_delimiter(line)
            continue
        if not line.strip():
            flush()
            in_table = False
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        table = (
            line.lstrip().startswith("|")
            or (in_table and "|" in line)
            or _is_table_delimiter(following)
        )
        in_table = in_table and table
        heading = _HEADING.match(line)
        entering_quote = quoted[index] and not (index and quoted[index - 1])
        if table or heading or entering_quote or _BLOCK_START.match(line):
            flush()
        line = _HEADING_END.sub("", line[heading.end() :]) if heading else _BULLET.sub("", line)
        if table or heading:  # a heading or table row stands alone
            if line.strip():
                row: _Kind = "header" if _is_table_delimiter(following) else "table"
                segments.append((line.strip(), row if table else "text"))
            continue
        current.append(line.strip())
    flush()
    return segments


def _plain(text: str, kind: _Kind = "text") -> str:
    """Return ``text`` with its inline Markdown markup removed and its content kept verbatim.

    Inline code keeps its content and loses its backticks (a stray backtick, left by a cut
    chunk, goes too); a link keeps its text; emphasis markers go where they wrap text at word
    boundaries; in a table row the cell pipes become :data:`_CELL`. Code spans, escaped characters
    (a backslash before one of ``*_`|#>``) and ``code`` segments (fenced blocks) are kept as
    they are: no rule touches them.
    """
    if kind == "code":
        return text
    kept: list[str] = []

    def keep(value: str) -> str:
        kept.append(value)
        return chr(_KEPT + len(kept) - 1)

    def code(match: re.Match[str]) -> str:
        body = match.group(2)
        if len(body) > 2 and body[0] == body[-1] == " " and body.strip():
            body = body[1:-1]  # CommonMark: "`` `x` ``" is "`x`"
        return keep(body)

    text = _KEPT_MARK.sub(lambda m: keep(m.group()), text)  # (the source's own, kept as well)
    text = _CODE.sub(code, text)
    text = _ESCAPE.sub(lambda m: keep(m.group(1)), text)
    text = _LINK.sub(r"\1", text).replace("`", "")
    if kind in ("table", "header"):
        text = text.replace("|", _CELL)
    for _ in range(3):  # nested emphasis: "**bold _and em_**"
        before = text
        for pattern in _EMPHASIS:
            text = pattern.sub(r"\2", text)
        if text == before:
            break
    return _KEPT_MARK.sub(lambda m: kept[ord(m.group()) - _KEPT], text)


def _balance(sentence: str) -> str:
    """Drop a bracket left open or closed by the split: "(Kandji is ...)" cut in two."""
    if sentence.count("(") < sentence.count(")") and sentence.endswith(")"):
        sentence = sentence[:-1]
    if sentence.count("(") > sentence.count(")") and sentence.startswith("("):
        sentence = sentence[1:]
    return sentence


def split_sentences(text: str) -> list[str]:
    """Split passage text into readable sentences, Markdown markup removed, content kept.

    Hard-wrapped lines are joined first (a paragraph, bullet, heading or table row is one
    segment); segments are split at sentence ends (``.``, ``!``, ``?`` before a capital or
    digit); pieces under four words (headings, fragments) are dropped. Only markup goes (see
    :func:`_segments` and :func:`_plain`): the sentences are quoted to the user, who copies
    setting names, paths and commands from them, so every content character stays ("max_k",
    "<data_dir>", "a -> b"). Returns sentences in text order (questions included: see
    :class:`SentenceScorer`).
    """
    sentences: list[str] = []
    columns: list[str] | None = None  # the header cells of the table being read
    for segment, kind in _segments(text):
        plain = _plain(segment, kind)
        if kind == "header":
            columns = _cells(plain)
            continue
        if kind == "table":
            rows = _row_sentences(_cells(plain), columns)
            if rows is not None:
                sentences.extend(r for r in rows if len(r.split()) >= _MIN_WORDS)
                continue
            plain = plain.replace(_CELL, " ")
        else:
            columns = None
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


def _cells(row: str) -> list[str]:
    """Return the cells of a table row whose pipes are :data:`_CELL`, whitespace collapsed."""
    parts = [" ".join(part.split()) for part in row.split(_CELL)]
    if parts and not parts[0]:
        parts = parts[1:]  # the row's leading pipe
    if parts and not parts[-1]:
        parts = parts[:-1]  # its trailing pipe
    return parts


def _row_sentences(cells: list[str], columns: list[str] | None) -> list[str] | None:
    """Return a table row's sentences, each cell named by its column; ``None`` without header.

    A short row is one sentence of ``column: cell`` pairs ("Setting: max_k; Default: 5"); a
    long one is a sentence per cell after the first, named by its column and the row's first
    cell ("Lead QA Tester (L4), Scope: Leads projects …"), so a quoted cell says what it is.
    ``None`` when there is no header of as many cells (the row is then read as plain text).
    """
    if columns is None or len(columns) != len(cells):
        return None
    if sum(len(cell.split()) for cell in cells) <= _ROW_WORDS:
        pairs = [
            f"{column}: {cell}" if column else cell
            for column, cell in zip(columns, cells, strict=True)
            if cell
        ]
        return ["; ".join(pairs)]
    label = cells[0]
    return [
        f"{column}, {label}: {cell}" if label else f"{column}: {cell}"
        for column, cell in zip(columns[1:], cells[1:], strict=True)
        if cell
    ]


@dataclass(frozen=True)
class ScoredSentence:
    """A sentence of the passage with key ``passage``, at ``position``, with its ``score``.

    ``cosine`` and ``share`` are the two parts of the score (the cosine similarity to the query
    and the IDF-weighted share of the question's content words the sentence holds, 0..1).
    """

    passage: int
    position: int
    text: str
    score: float
    cosine: float = 0.0
    share: float = 0.0


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

    def vectors(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Return the unit embeddings of ``texts`` (rows in order), cached (shape ``(n, dim)``).

        Raises:
            ProviderError: the embedder failed.

        """
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
        self,
        query: str,
        question: str,
        passages: list[tuple[int, str]],
        contexts: Mapping[int, str] | None = None,
    ) -> list[ScoredSentence]:
        """Score every sentence of ``passages`` (``(key, text)`` pairs), best first.

        A sentence that appears more than once (the same text in several passages) is
        returned once, at its best score.

        Args:
            query: the self-contained search query (embedded for the cosine).
            question: the user's own words (their content words give the keyword bonus).
            passages: passage texts, each with a key the caller chooses (returned as
                :attr:`ScoredSentence.passage`).
            contexts: per passage key, the headings of its section ("Health Insurance,
                Medical Insurance"). A sentence is also embedded with them in front, its cosine
                is the better of the two, and their words count as the sentence's for the
                keyword bonus (contextual headers, as in Anthropic's "Contextual Retrieval",
                2024: a sentence often names its subject only in its heading). On the handbook
                sets this raised answer-fact accuracy from 0.731 to 0.798 (dialogues) and from
                0.509 to 0.588 (newcomer).

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
        contexts = contexts or {}
        query_vector = self._embedder.embed([query])[0]
        cosines = self.vectors([text for _, _, text in sentences]) @ query_vector
        if contexts:
            # A sentence read with its section's headings ("Medical Insurance: The company pays
            # 75% of the premium") says what it is about; the better of the two cosines counts.
            framed = [
                f"{contexts[number]}: {text}" if contexts.get(number) else text
                for number, _, text in sentences
            ]
            cosines = np.maximum(cosines, self.vectors(framed) @ query_vector)
        asked = content_stems(question) or content_stems(query)
        stems = [
            content_stems(text, compounds=True) | content_stems(contexts.get(number, ""))
            for number, _, text in sentences
        ]
        count = len(sentences)
        idf = {
            term: math.log((count - df + 0.5) / (df + 0.5) + 1)
            for term in asked
            for df in [sum(term in s for s in stems)]
        }
        total = sum(idf.values())
        scores, shares = [], []
        for cosine, have in zip(cosines, stems, strict=True):
            share = sum(idf[t] for t in asked & have) / total if total else 0.0
            shares.append(share)
            scores.append(float(cosine) + self._weight * share)
        # A question in a passage (a FAQ) is not an answer, but the sentence after it is the
        # answer to it: that sentence gets the question's score when it is higher.
        scored = []
        for index, (number, position, text) in enumerate(sentences):
            if text.endswith("?"):
                continue
            # the parts reported are those of the score kept (the question's, when inherited)
            source = index
            before = sentences[index - 1] if index else None
            if before is not None and before[0] == number and before[2].endswith("?"):
                source = index - 1 if scores[index - 1] > scores[index] else index
            scored.append(
                ScoredSentence(
                    number, position, text, scores[source], float(cosines[source]), shares[source]
                )
            )
        best: dict[str, ScoredSentence] = {}
        for sentence in sorted(scored, key=lambda s: -s.score):
            best.setdefault(sentence.text, sentence)
        return list(best.values())
