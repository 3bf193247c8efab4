from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from search2o.errors import InputError
from search2o.knowledge.chunking import Chunk, chunk_document
from search2o.knowledge.loaders import LoadedDocument, Section, load_document

HANDBOOK = Path("/work/shared/data/handbook/benefits-and-perks.md")


def words(text: str) -> int:
    return len(text.split())


def doc(*sections: Section) -> LoadedDocument:
    return LoadedDocument(title="t", media_type="text/plain", sections=sections)


def sentence(n: int, size: int = 5) -> str:
    """A sentence of exactly ``size`` words, unique by ``n``."""
    return " ".join([f"s{n}w{i}" for i in range(size - 1)] + [f"end{n}."])


def paragraph(first: int, count: int, size: int = 5) -> str:
    return " ".join(sentence(first + i, size) for i in range(count))


def check_invariants(chunks: list[Chunk], count: Callable[[str], int], limit: int) -> None:
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text
        assert chunk.text == chunk.text.strip()
        assert chunk.token_count == count(chunk.text)
        assert chunk.token_count <= limit


# ------------------------------------------------------------------------------------------
# Parameters
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"chunk_tokens": 15}, "chunk_tokens"),
        ({"chunk_tokens": 0}, "chunk_tokens"),
        ({"chunk_tokens": 100, "overlap_tokens": -1}, "overlap_tokens"),
        ({"chunk_tokens": 100, "overlap_tokens": 50}, "overlap_tokens"),
        ({"chunk_tokens": 16, "overlap_tokens": 8}, "overlap_tokens"),
    ],
)
def test_bad_parameters(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(InputError) as info:
        chunk_document(doc(Section((), "text")), words, **kwargs)
    assert info.value.field == field


def test_bad_chunk_tokens_message() -> None:
    with pytest.raises(InputError) as info:
        chunk_document(doc(Section((), "text")), words, chunk_tokens=10, overlap_tokens=0)
    assert info.value.reason == "must be at least 16, got 10"


def test_boundary_parameters_are_accepted() -> None:
    chunks = chunk_document(doc(Section((), "text")), words, chunk_tokens=16, overlap_tokens=7)
    assert chunks == [Chunk(0, "text", (), 1)]
    assert chunk_document(doc(Section((), "a b")), words, chunk_tokens=16, overlap_tokens=0)


# ------------------------------------------------------------------------------------------
# Packing
# ------------------------------------------------------------------------------------------


def test_small_section_is_one_chunk_with_paragraphs_kept() -> None:
    text = "First paragraph here.\n\nSecond one.\n\n* a list\n* of items"
    chunks = chunk_document(doc(Section(("A", "B"), text)), words)
    assert chunks == [Chunk(0, text, ("A", "B"), words(text))]


def test_whole_paragraphs_are_packed_greedily() -> None:
    paragraphs = [paragraph(10 * i, 2) for i in range(5)]  # 10 words each
    chunks = chunk_document(
        doc(Section((), "\n\n".join(paragraphs))), words, chunk_tokens=25, overlap_tokens=0
    )
    assert [c.text for c in chunks] == [
        "\n\n".join(paragraphs[0:2]),
        "\n\n".join(paragraphs[2:4]),
        paragraphs[4],
    ]
    assert [c.token_count for c in chunks] == [20, 20, 10]


def test_chunks_never_span_sections() -> None:
    sections = (
        Section(("One",), "alpha beta gamma."),
        Section(("Two",), "delta epsilon."),
        Section(("Two", "Sub"), "zeta."),
    )
    chunks = chunk_document(doc(*sections), words, chunk_tokens=100, overlap_tokens=10)
    assert [(c.heading_path, c.text) for c in chunks] == [
        (("One",), "alpha beta gamma."),
        (("Two",), "delta epsilon."),
        (("Two", "Sub"), "zeta."),
    ]
    assert [c.ordinal for c in chunks] == [0, 1, 2]


def test_large_paragraph_is_split_into_sentences() -> None:
    text = paragraph(0, 10)  # 10 sentences of 5 words
    chunks = chunk_document(doc(Section((), text)), words, chunk_tokens=20, overlap_tokens=0)
    check_invariants(chunks, words, 20)
    assert [c.text for c in chunks] == [paragraph(0, 4), paragraph(4, 4), paragraph(8, 2)]
    for chunk in chunks:  # whole sentences only
        assert chunk.text.endswith(".")
        assert re.match(r"s\d+w0 ", chunk.text)


def test_giant_sentence_is_split_by_words() -> None:
    text = " ".join(f"w{i}" for i in range(50))  # one 50-word "sentence"
    chunks = chunk_document(doc(Section((), text)), words, chunk_tokens=16, overlap_tokens=4)
    check_invariants(chunks, words, 16)
    # Fragments are not sentences, so nothing overlaps and every word appears exactly once.
    assert " ".join(c.text for c in chunks) == text
    assert [c.token_count for c in chunks] == [16, 16, 16, 2]


def test_giant_word_is_split_by_characters() -> None:
    def chars(text: str) -> int:
        return len(text)

    text = "x" * 40
    chunks = chunk_document(doc(Section((), text)), chars, chunk_tokens=16, overlap_tokens=0)
    check_invariants(chunks, chars, 16)
    assert "".join(c.text for c in chunks) == text


def test_small_paragraph_after_large_one_stays_separate_paragraph() -> None:
    big = paragraph(0, 6)  # 30 words
    small = "Closing remark here."
    chunks = chunk_document(
        doc(Section((), f"{big}\n\n{small}")), words, chunk_tokens=20, overlap_tokens=0
    )
    check_invariants(chunks, words, 20)
    assert chunks[-1].text == f"{paragraph(4, 2)}\n\n{small}"


# ------------------------------------------------------------------------------------------
# Overlap
# ------------------------------------------------------------------------------------------


def test_overlap_repeats_trailing_sentences() -> None:
    text = paragraph(0, 12)  # 60 words, 12 sentences
    chunks = chunk_document(doc(Section(("S",), text)), words, chunk_tokens=20, overlap_tokens=9)
    check_invariants(chunks, words, 20)
    assert len(chunks) > 1
    for previous, current in itertools.pairwise(chunks):
        last_sentence = previous.text.split(". ")[-1]
        # 9 tokens of overlap fit exactly one 5-word sentence.
        assert current.text.startswith(last_sentence + " ")
        assert not current.text.startswith(previous.text.split(". ")[-2])
    # Every sentence of the section appears somewhere, in order.
    joined = " ".join(c.text for c in chunks)
    positions = [joined.index(sentence(i)) for i in range(12)]
    assert positions == sorted(positions)


def test_overlap_crosses_paragraphs_and_respects_budget() -> None:
    paragraphs = [sentence(i, 4) for i in range(8)]  # 4-word one-sentence paragraphs
    chunks = chunk_document(
        doc(Section((), "\n\n".join(paragraphs))), words, chunk_tokens=16, overlap_tokens=7
    )
    check_invariants(chunks, words, 16)
    assert chunks[0].text == "\n\n".join(paragraphs[0:4])
    assert chunks[1].text.startswith(paragraphs[3] + "\n\n" + paragraphs[4])
    assert not chunks[1].text.startswith(paragraphs[2])


def test_no_overlap_when_last_sentence_too_big() -> None:
    text = paragraph(0, 3, size=10) + " " + paragraph(3, 3, size=10)  # 10-word sentences
    chunks = chunk_document(doc(Section((), text)), words, chunk_tokens=20, overlap_tokens=9)
    check_invariants(chunks, words, 20)
    assert [c.text for c in chunks] == [
        paragraph(0, 2, 10),
        paragraph(2, 2, 10),
        paragraph(4, 2, 10),
    ]


def test_zero_overlap_partitions_text() -> None:
    text = paragraph(0, 9)
    chunks = chunk_document(doc(Section((), text)), words, chunk_tokens=16, overlap_tokens=0)
    assert " ".join(c.text for c in chunks) == text


def test_no_overlap_across_sections() -> None:
    sections = (Section(("A",), paragraph(0, 6)), Section(("B",), paragraph(100, 6)))
    chunks = chunk_document(doc(*sections), words, chunk_tokens=16, overlap_tokens=6)
    check_invariants(chunks, words, 16)
    for chunk in chunks:
        if chunk.heading_path == ("B",):
            assert "end0." not in chunk.text and "end5." not in chunk.text
            assert chunk.text.startswith("s10")


# ------------------------------------------------------------------------------------------
# Counter behaviour, tail merge, determinism, real data
# ------------------------------------------------------------------------------------------


def test_limit_holds_for_counter_that_counts_separators() -> None:
    def tokens(text: str) -> int:  # like BPE tokenizers: a paragraph break costs a token
        return len(text.split()) + text.count("\n\n")

    paragraphs = [sentence(i, 4) for i in range(12)]
    chunks = chunk_document(
        doc(Section((), "\n\n".join(paragraphs))), tokens, chunk_tokens=16, overlap_tokens=4
    )
    check_invariants(chunks, tokens, 16)
    joined = "\n\n".join(c.text for c in chunks)
    assert all(p in joined for p in paragraphs)


def test_special_token_counter_packs_by_real_count() -> None:
    def tokens(text: str) -> int:  # like [CLS] ... [SEP]: two extra tokens per call
        return len(text.split()) + 2

    paragraphs = [sentence(i, 4) for i in range(4)]
    chunks = chunk_document(
        doc(Section((), "\n\n".join(paragraphs))), tokens, chunk_tokens=18, overlap_tokens=0
    )
    # Per-piece sums say 24 tokens, the real text is 18: one chunk.
    assert [c.text for c in chunks] == ["\n\n".join(paragraphs)]
    assert chunks[0].token_count == 18


def test_tiny_trailing_paragraph_joins_previous_chunk_when_real_count_fits() -> None:
    def tokens(text: str) -> int:
        return len(text.split()) + 2

    # Pieces: 10 + 10 + 1 words; the sum estimate (12 + 12 + 3) exceeds 24, real text is 23.
    text = f"{paragraph(0, 2)}\n\n{paragraph(2, 2)}\n\nok"
    chunks = chunk_document(doc(Section((), text)), tokens, chunk_tokens=24, overlap_tokens=0)
    assert [c.text for c in chunks] == [text]
    assert chunks[0].token_count == 23


def test_tail_not_merged_when_over_limit() -> None:
    text = f"{paragraph(0, 4)}\n\nok"  # 21 words with limit 20: cannot merge
    chunks = chunk_document(doc(Section((), text)), words, chunk_tokens=20, overlap_tokens=0)
    assert [c.text for c in chunks] == [paragraph(0, 4), "ok"]


def test_deterministic() -> None:
    document = load_document(HANDBOOK.name, HANDBOOK.read_bytes())
    first = chunk_document(document, words, chunk_tokens=40, overlap_tokens=10)
    second = chunk_document(document, words, chunk_tokens=40, overlap_tokens=10)
    assert first == second


def test_handbook_chunks() -> None:
    document = load_document(HANDBOOK.name, HANDBOOK.read_bytes())
    chunks = chunk_document(document, words, chunk_tokens=60, overlap_tokens=15)
    check_invariants(chunks, words, 60)
    section_paths = [s.heading_path for s in document.sections]
    chunk_paths = [c.heading_path for c in chunks]
    # Chunks follow sections in order and every section has at least one chunk.
    assert list(dict.fromkeys(chunk_paths)) == section_paths
    medical = [c for c in chunks if c.heading_path == ("Health Insurance", "Medical Insurance")]
    assert len(medical) >= 2
    assert medical[0].text.startswith("In the United States")
    assert "$287.65" in medical[-1].text
    # All words of every section survive chunking.
    for section in document.sections:
        body = " ".join(c.text for c in chunks if c.heading_path == section.heading_path)
        assert set(section.text.split()) <= set(body.split())


def test_default_parameters_on_handbook() -> None:
    document = load_document(HANDBOOK.name, HANDBOOK.read_bytes())
    chunks = chunk_document(document, words)
    check_invariants(chunks, words, 200)
    assert len(chunks) >= len(document.sections)


def test_counter_calls_are_memoised() -> None:
    calls: list[str] = []

    def tokens(text: str) -> int:
        calls.append(text)
        return len(text.split())

    paragraphs = [paragraph(10 * i, 2) for i in range(30)]
    chunk_document(
        doc(Section((), "\n\n".join(paragraphs))), tokens, chunk_tokens=50, overlap_tokens=10
    )
    assert len(calls) == len(set(calls))
    assert len(calls) < 4 * len(paragraphs)
