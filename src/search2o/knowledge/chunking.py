"""Structure-aware chunking of loaded documents into embedding-sized pieces.

A search hit is only as good as its chunk: it should be small enough for the embedding model
and the chat prompt, and large enough to carry meaning. This module cuts each
:class:`~search2o.knowledge.loaders.Section` separately (a chunk never spans two heading paths),
keeps whole paragraphs together where they fit, falls back to sentences and then words for
oversized paragraphs, and repeats a few trailing sentences of a chunk at the start of the next
one so that context is not lost at the seam.

Sizes are in tokens of the embedding model's tokenizer; the caller passes the counter, so this
module has no model dependency. The counter is called on pieces and sums are used as estimates,
but every emitted chunk's text is counted once more, so ``token_count <= chunk_tokens`` holds
for any counter, additive or not.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from search2o.errors import InputError
from search2o.knowledge.bounds import over_bound
from search2o.knowledge.loaders import LoadedDocument

__all__ = ["Chunk", "chunk_document"]

MIN_CHUNK_TOKENS = 16

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")

# Kinds of pieces: a whole paragraph, one sentence of a paragraph, a fragment of a sentence.
_PARAGRAPH = "paragraph"
_SENTENCE = "sentence"
_FRAGMENT = "fragment"


@dataclass(frozen=True)
class Chunk:
    r"""One embeddable piece of a document.

    Attributes:
        ordinal: 0-based position of the chunk in the document.
        text: the chunk's body text, without any heading prefix; paragraphs are separated by
            ``"\n\n"``, sentences of a split paragraph by ``" "``.
        heading_path: the heading path of the section the chunk comes from.
        token_count: ``count_tokens(text)``, in tokens of the caller's tokenizer; never more
            than the ``chunk_tokens`` the chunk was made with.

    """

    ordinal: int
    text: str
    heading_path: tuple[str, ...]
    token_count: int


@dataclass(frozen=True)
class _Piece:
    """An indivisible unit of packing: ``paragraph`` is the index within the section."""

    paragraph: int
    text: str
    tokens: int
    kind: str


def _render(pieces: Iterable[_Piece]) -> str:
    r"""Join pieces: ``" "`` inside one paragraph, ``"\n\n"`` between paragraphs."""
    groups: list[list[str]] = []
    last_paragraph: int | None = None
    for piece in pieces:
        if groups and piece.paragraph == last_paragraph:
            groups[-1].append(piece.text)
        else:
            groups.append([piece.text])
        last_paragraph = piece.paragraph
    return "\n\n".join(" ".join(group) for group in groups)


class _Counter:
    """Memoising wrapper around the caller's token counter."""

    def __init__(self, count_tokens: Callable[[str], int]) -> None:
        self._count = count_tokens
        self._cache: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        cached = self._cache.get(text)
        if cached is None:
            cached = int(self._count(text))
            self._cache[text] = cached
        return cached


def _split_sentences(text: str) -> list[str]:
    return [sentence for sentence in _SENTENCE_BREAK.split(text.strip()) if sentence]


def _longest_fitting(units: list[str], start: int, sep: str, count: _Counter, limit: int) -> int:
    """Largest ``end`` with ``count(sep.join(units[start:end])) <= limit``; ``start`` if none.

    Binary search, so it needs O(log n) counter calls; every accepted end was counted.
    """
    low, high = start, len(units)  # invariant: units[start:low] fits (or low == start)
    while low < high:
        middle = (low + high + 1) // 2
        if count(sep.join(units[start:middle])) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def _split_sentence(text: str, count: _Counter, limit: int) -> list[str]:
    """Cut an oversized sentence into word runs (characters for giant words) that fit."""
    words = text.split()
    fragments: list[str] = []
    start = 0
    while start < len(words):
        end = _longest_fitting(words, start, " ", count, limit)
        if end > start:
            fragments.append(" ".join(words[start:end]))
            start = end
            continue
        word = words[start]  # a single word above the limit: cut it by characters
        chars = list(word)
        offset = 0
        while offset < len(chars):
            stop = max(_longest_fitting(chars, offset, "", count, limit), offset + 1)
            fragments.append(word[offset:stop])
            offset = stop
        start += 1
    return fragments


def _pieces(paragraphs: list[str], count: _Counter, limit: int) -> list[_Piece]:
    """Whole paragraphs where they fit, else their sentences, else sentence fragments."""
    pieces: list[_Piece] = []
    for index, paragraph in enumerate(paragraphs):
        tokens = count(paragraph)
        if tokens <= limit:
            pieces.append(_Piece(index, paragraph, tokens, _PARAGRAPH))
            continue
        for sentence in _split_sentences(paragraph):
            tokens = count(sentence)
            if tokens <= limit:
                pieces.append(_Piece(index, sentence, tokens, _SENTENCE))
                continue
            for fragment in _split_sentence(sentence, count, limit):
                pieces.append(_Piece(index, fragment, count(fragment), _FRAGMENT))
    return pieces


def _overlap(chunk: list[_Piece], count: _Counter, budget: int) -> list[_Piece]:
    """Trailing whole sentences of ``chunk`` totalling at most ``budget`` tokens."""
    taken: list[_Piece] = []
    total = 0
    for piece in reversed(chunk):
        if piece.kind == _FRAGMENT:
            break
        if piece.kind == _SENTENCE:
            sentences = [piece]
        else:
            parts = _split_sentences(piece.text)
            sentences = [_Piece(piece.paragraph, s, count(s), _SENTENCE) for s in parts]
        for sentence in reversed(sentences):
            if total + sentence.tokens > budget:
                taken.reverse()
                return taken
            taken.append(sentence)
            total += sentence.tokens
    taken.reverse()
    return taken


@dataclass
class _Draft:
    """A chunk being packed: ``overlap`` pieces repeat the previous chunk's tail."""

    overlap: list[_Piece]
    new: list[_Piece]
    estimate: int  # tokens: an exact count of a prefix plus the pieces added after it
    exact: bool  # True when ``estimate`` is ``count(render(all pieces))``

    @property
    def pieces(self) -> list[_Piece]:
        return self.overlap + self.new


def _settle(draft: _Draft, queue: deque[_Piece], count: _Counter, limit: int) -> int:
    """Make ``draft`` fit by counting its text; push surplus pieces back onto ``queue``.

    Returns the exact token count of the settled draft.
    """
    tokens = draft.estimate if draft.exact else count(_render(draft.pieces))
    while tokens > limit:
        if len(draft.new) > 1:
            queue.appendleft(draft.new.pop())
        elif draft.overlap:
            draft.overlap.pop(0)
        else:  # a single piece alone: its own count is <= limit unless the counter is erratic
            break
        tokens = count(_render(draft.pieces))
    draft.estimate, draft.exact = tokens, True
    return tokens


def _chunk_section(
    paragraphs: list[str], count: _Counter, limit: int, overlap_tokens: int
) -> list[tuple[str, int]]:
    """Pack one section's paragraphs into ``(text, token_count)`` chunks."""
    queue = deque(_pieces(paragraphs, count, limit))
    done: list[tuple[_Draft, int]] = []
    draft = _Draft(overlap=[], new=[], estimate=0, exact=True)

    def close() -> _Draft:
        """Settle and keep the current draft; start the next one with the overlap."""
        done.append((draft, _settle(draft, queue, count, limit)))
        carried = _overlap(draft.pieces, count, overlap_tokens) if overlap_tokens else []
        return _Draft(carried, [], sum(p.tokens for p in carried), exact=not carried)

    while queue or draft.new:
        if not queue:  # settling may push pieces back, which then go on in a new draft
            draft = close()
            continue
        piece = queue.popleft()
        if not draft.new and not draft.overlap:
            draft.new.append(piece)
            draft.estimate, draft.exact = piece.tokens, True
            continue
        if draft.estimate + piece.tokens <= limit:
            draft.new.append(piece)
            draft.estimate += piece.tokens
            draft.exact = False
            continue
        # The sum says it does not fit; sums overestimate for counters with special tokens.
        exact = count(_render([*draft.pieces, piece]))
        if exact <= limit:
            draft.new.append(piece)
            draft.estimate, draft.exact = exact, True
            continue
        queue.appendleft(piece)
        if draft.new:
            draft = close()
        else:  # only overlap so far: shorten it from the front to make room
            draft.overlap.pop(0)
            draft.estimate = sum(p.tokens for p in draft.overlap)
            draft.exact = not draft.overlap

    chunks = [(_render(d.pieces), tokens) for d, tokens in done]
    # Merge a tiny tail (by its new content, not the overlap) into the previous chunk when the
    # result fits. Packing already counts exactly before closing a chunk, so for counters that
    # never shrink when text grows this is a safety net rather than a common path.
    if len(done) >= 2:
        last = done[-1][0]
        if sum(p.tokens for p in last.new) < limit // 8:
            merged_text = _render([*done[-2][0].pieces, *last.new])
            merged_tokens = count(merged_text)
            if merged_tokens <= limit:
                chunks[-2:] = [(merged_text, merged_tokens)]
    return chunks


def chunk_document(
    document: LoadedDocument,
    count_tokens: Callable[[str], int],
    *,
    chunk_tokens: int = 200,
    overlap_tokens: int = 40,
    max_chunks: int | None = None,
) -> list[Chunk]:
    """Cut a loaded document into chunks of at most ``chunk_tokens`` tokens.

    Each section is chunked on its own, so a chunk never spans two heading paths. Whole
    paragraphs are packed greedily; a paragraph above the limit is split into sentences, and a
    sentence above the limit into runs of words. When a section needs several chunks, each
    chunk after the first starts with the previous chunk's trailing whole sentences, totalling
    at most ``overlap_tokens``. A section's last chunk whose new text is under
    ``chunk_tokens // 8`` tokens is merged into the chunk before it when the result fits.

    Args:
        document: the output of :func:`~search2o.knowledge.loaders.load_document`.
        count_tokens: returns the number of tokens of a text in the embedding model's
            tokenizer; called on paragraphs, sentences and candidate chunk texts (memoised).
        chunk_tokens: the maximum tokens per chunk; at least 16.
        overlap_tokens: the maximum tokens repeated from the previous chunk; from 0 to less
            than ``chunk_tokens // 2``.
        max_chunks: the most chunks the document may make (``knowledge.
            max_chunks_per_document``); chunking stops at the first section that passes it.

    Returns:
        Chunks in document order with ordinals 0..n-1; deterministic for the same input and
        counter. Every ``token_count`` is ``count_tokens(text) <= chunk_tokens``.

    Raises:
        InputError: ``chunk_tokens`` below 16 (field ``chunk_tokens``), or ``overlap_tokens``
            negative or not below ``chunk_tokens // 2`` (field ``overlap_tokens``), or the
            document makes more than ``max_chunks`` chunks (field ``document``).

    """
    if chunk_tokens < MIN_CHUNK_TOKENS:
        raise InputError("chunk_tokens", f"must be at least {MIN_CHUNK_TOKENS}, got {chunk_tokens}")
    if not 0 <= overlap_tokens < chunk_tokens // 2:
        raise InputError(
            "overlap_tokens",
            f"must be at least 0 and below chunk_tokens // 2 = {chunk_tokens // 2}, "
            f"got {overlap_tokens}",
        )
    count = _Counter(count_tokens)
    chunks: list[Chunk] = []
    for section in document.sections:
        paragraphs = [p.strip() for p in _PARAGRAPH_BREAK.split(section.text) if p.strip()]
        for text, tokens in _chunk_section(paragraphs, count, chunk_tokens, overlap_tokens):
            chunks.append(
                Chunk(
                    ordinal=len(chunks),
                    text=text,
                    heading_path=section.heading_path,
                    token_count=tokens,
                )
            )
        if max_chunks is not None and len(chunks) > max_chunks:
            raise over_bound(
                "document", "max_chunks_per_document", f"it makes more than {max_chunks} chunks"
            )
    return chunks
