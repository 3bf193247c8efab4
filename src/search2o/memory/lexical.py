r"""The lexical half of memory search: keyed term hashes and a normalised BM25 score.

A memory's terms are never stored in plain text. Each term is replaced by a keyed hash,
BLAKE2b with an 8-byte digest (RFC 7693, keyed mode) under a key derived from the user's data
key (HKDF-SHA256, RFC 5869, :meth:`search2o.crypto.vault.Sealer.derive`). Without the KEK a
stored hash cannot be tested against a guessed word, and the same word hashes differently for
two users, so hashes cannot be matched across users either. What the hashes do show is which
memories of one user share a term and how often: less than the embedding vectors beside them
already show (``docs/memory.md``, "What is stored in the clear").

Terms are the query engine's: NFKC-folded, lower-cased ``\w+`` words without stop words,
Snowball English stems; runs of CJK characters become character bigrams (a lone character
stays itself), and emoji (Unicode category ``So``) are terms of their own, so a question in
Chinese, Japanese or Korean matches a memory in the same language.

The score is BM25 (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and
Beyond", eq. 3.15; k1 = 1.5, b = 0.75 as in Lucene) over the user's memories, divided by the
score a memory matching every query term would reach at saturation, ``sum(idf x (k1 + 1))``,
where a query term held by no memory counts with the highest IDF. So the share is in
``[0, 1)``: 0 when no query term occurs, near 1 when the memory holds all of the query's
(distinct) terms, and a query whose words mostly occur nowhere scores low everywhere.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import snowballstemmer

from search2o.storage.lexical import STOP_WORDS

__all__ = [
    "K1",
    "B",
    "bm25_shares",
    "decode_hashes",
    "encode_hashes",
    "holds_any",
    "term_hashes",
    "terms",
]

K1 = 1.5
"""BM25 term-frequency saturation (Lucene's default)."""

B = 0.75
"""BM25 length normalisation (Lucene's default)."""

_CJK = "\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff"
_RUNS = re.compile(f"[{_CJK}]+|[^{_CJK}]+")
_CJK_RUN = re.compile(f"[{_CJK}]")
_WORD = re.compile(r"\w+")
_STEMMER = snowballstemmer.stemmer("english")
_HASH = np.dtype("<u8")


def terms(text: str) -> list[str]:
    """Return the terms of ``text`` in order, repeated as often as they occur (see module doc)."""
    out: list[str] = []
    normal = unicodedata.normalize("NFKC", text).lower()
    for word in _WORD.findall(normal):
        for run in _RUNS.findall(word):
            if _CJK_RUN.match(run):
                out.extend(
                    [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
                )
            else:
                words = [w for w in run.split("_") if w and w not in STOP_WORDS]
                out.extend(_STEMMER.stemWords(words))
    out.extend(ch for ch in normal if unicodedata.category(ch) == "So")
    return out


def term_hashes(key: bytes, words: Sequence[str]) -> npt.NDArray[np.uint64]:
    """Return the keyed 64-bit hashes of ``words``, shape ``(len(words),)``, same order.

    Args:
        key: 16 to 64 bytes (BLAKE2b's key size), the user's derived term key.

    """
    digests = b"".join(
        hashlib.blake2b(word.encode("utf-8"), key=key, digest_size=8).digest() for word in words
    )
    return np.frombuffer(digests, dtype=_HASH).astype(np.uint64)


def encode_hashes(hashes: npt.NDArray[np.uint64]) -> bytes:
    """Return the stored form of a memory's term hashes: little-endian ``uint64``s, sorted."""
    return np.sort(hashes).astype(_HASH).tobytes()


def decode_hashes(blob: bytes) -> npt.NDArray[np.uint64]:
    """Inverse of :func:`encode_hashes`."""
    return np.frombuffer(blob, dtype=_HASH).astype(np.uint64)


def bm25_shares(stored: Sequence[bytes], query: npt.NDArray[np.uint64]) -> npt.NDArray[np.float32]:
    """Return each memory's BM25 share of the query, shape ``(len(stored),)``, in ``[0, 1)``.

    Args:
        stored: each memory's :func:`encode_hashes` blob; together they are the corpus.
        query: the query's term hashes (repeats count once).

    """
    score, upper = _bm25(stored, query)
    if upper > 0 and math.isfinite(upper):
        return (score / upper).astype(np.float32)
    return np.zeros(len(stored), dtype=np.float32)


def holds_any(stored: Sequence[bytes], wanted: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
    """Return whether each memory holds at least one of the ``wanted`` hashes, shape ``(n,)``."""
    n = len(stored)
    if n == 0 or wanted.size == 0:
        return np.zeros(n, dtype=bool)
    lengths = np.fromiter((len(blob) // _HASH.itemsize for blob in stored), np.int64, count=n)
    flat = np.frombuffer(b"".join(stored), dtype=_HASH)
    owner = np.repeat(np.arange(n), lengths)
    found = np.zeros(n, dtype=bool)
    found[owner[np.isin(flat, wanted)]] = True
    return found


def _bm25(
    stored: Sequence[bytes], query: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.float64], float]:
    """Return each memory's BM25 score and the saturation bound ``sum(idf x (k1 + 1))``."""
    n = len(stored)
    wanted = np.unique(query)
    if n == 0 or wanted.size == 0:
        return np.zeros(n, dtype=np.float64), 0.0
    lengths = np.fromiter((len(blob) // _HASH.itemsize for blob in stored), np.int64, count=n)
    flat = np.frombuffer(b"".join(stored), dtype=_HASH)
    owner = np.repeat(np.arange(n), lengths)
    hit = np.isin(flat, wanted)
    cells = owner[hit] * wanted.size + np.searchsorted(wanted, flat[hit])
    tf = np.bincount(cells, minlength=n * wanted.size).reshape(n, wanted.size).astype(np.float64)
    df = np.count_nonzero(tf, axis=0)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    average = float(lengths.mean()) or 1.0
    norm = K1 * (1 - B + B * lengths / average)
    score = (idf * tf * (K1 + 1) / (tf + norm[:, None])).sum(axis=1)
    return score, float((idf * (K1 + 1)).sum())
