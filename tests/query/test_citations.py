"""Citation numbering and the stream filter that checks ``[n]`` markers (pure unit tests)."""

from __future__ import annotations

import pytest

from search2o.query.citations import CitationFilter, CitationRegistry


def registry(count: int) -> CitationRegistry:
    """A registry with documents 1..count registered in order."""
    reg = CitationRegistry()
    for n in range(1, count + 1):
        assert reg.register(f"doc:{n}", title=f"Doc {n}", source=f"upload:{n}.md") == n
    return reg


def play(reg: CitationRegistry, stream: list[str]) -> tuple[str, list[int], list[list[int]]]:
    """Feed ``stream``; return the text sent, the retrieval numbers used (in order of first use),
    and the fresh retrieval numbers per piece. Shown numbers are 1, 2, ... in that order."""
    filt = CitationFilter(reg)
    sent = []
    fresh_per_piece = []
    for piece in stream:
        text, fresh = filt.feed(piece)
        sent.append(text)
        fresh_per_piece.append([c.retrieval_number or 0 for c in fresh])
    tail, fresh = filt.finish()
    sent.append(tail)
    fresh_per_piece.append([c.retrieval_number or 0 for c in fresh])
    assert [c.number for c in filt.used] == list(range(1, len(filt.used) + 1))
    return "".join(sent), [c.retrieval_number or 0 for c in filt.used], fresh_per_piece


def test_registry_numbers_each_source_once_and_merges_its_chunks() -> None:
    reg = CitationRegistry()
    assert reg.register("doc:7", title="Vacation", source="a.md", document_id=7, chunk_id=70) == 1
    web_url = "https://x.org"
    assert reg.register(f"url:{web_url}", title="X", source=web_url, url=web_url) == 2
    # a later chunk of the same document keeps its number and adds the chunk
    assert reg.register("doc:7", title="Vacation", source="a.md", document_id=7, chunk_id=71) == 1
    assert reg.register("doc:7", title="Vacation", source="a.md", document_id=7, chunk_id=70) == 1
    assert reg.register("doc:9", title="Parking", source="b.md", document_id=9, chunk_id=90) == 3
    assert len(reg) == 3
    first = reg.get(1)
    assert first is not None
    assert first.chunk_ids == [70, 71] and first.document_id == 7
    assert first.to_dict() == {
        "number": 1,
        "retrieval_number": 1,
        "title": "Vacation",
        "source": "a.md",
        "heading_path": [],
        "headings": [],
        "document_id": 7,
        "chunk_ids": [70, 71],
        "url": None,
    }
    web = reg.get(2)
    assert web is not None and web.chunk_ids == [] and web.url == "https://x.org"
    assert reg.get(0) is None and reg.get(4) is None


def test_marker_split_across_pieces_is_held_back_then_kept() -> None:
    reg = registry(2)
    filt = CitationFilter(reg)
    assert filt.feed("Bikes go in the garage [") == ("Bikes go in the garage ", [])
    text, fresh = filt.feed("1] and more.")
    assert text == "[1] and more."
    assert [c.number for c in fresh] == [1]
    assert filt.finish() == ("", [])
    assert [c.number for c in filt.used] == [1]


@pytest.mark.parametrize(
    ("stream", "expected", "used"),
    [
        (["See [1, 2]."], "See [1][2].", [1, 2]),
        (["See [2,1]."], "See [1][2].", [2, 1]),  # shown in order of first use
        (["See [1", ", ", "2]."], "See [1][2].", [1, 2]),
        (["See [1][2]."], "See [1][2].", [1, 2]),
        (["Mars has canals [99]."], "Mars has canals .", []),
        (["Both [1, 99]."], "Both [1].", [1]),
        (["Twice [1, 1]."], "Twice [1].", [1]),
        (["Zero [0]."], "Zero .", []),
        (["[", "9", "9", "]", " gone"], " gone", []),
        (["an array[", "index] stays"], "an array[index] stays", []),
        (["empty [] stays"], "empty [] stays", []),
        (["four digits [1000] stay"], "four digits [1000] stay", []),
    ],
)
def test_markers_are_checked_against_the_registry(
    stream: list[str], expected: str, used: list[int]
) -> None:
    text, numbers, _ = play(registry(2), stream)
    assert text == expected
    assert numbers == used


def test_each_source_is_reported_once_on_first_use() -> None:
    text, used, fresh = play(registry(3), ["A [2].", " B [1].", " C [2][1].", " D [3, 2]."])
    # shown numbers follow first use: retrieval 2 is shown as [1], 1 as [2], 3 as [3]
    assert text == "A [1]. B [2]. C [1][2]. D [3][1]."
    assert used == [2, 1, 3]
    assert fresh == [[2], [1], [], [3], []]


def test_an_unfinished_marker_at_the_end_is_flushed_as_text() -> None:
    reg = registry(2)
    filt = CitationFilter(reg)
    assert filt.feed("The answer is in [1") == ("The answer is in ", [])
    tail, fresh = filt.finish()
    assert tail == "[1"
    assert fresh == [] and filt.used == []
    # a bracket that never becomes a marker is released as soon as it cannot be one
    assert play(reg, ["price [", "12", " euros"]) == ("price [12 euros", [], [[], [], [], []])
    assert play(reg, ["list [1, "])[0] == "list [1, "


@pytest.mark.parametrize(
    "text",
    [
        "Bikes go in the garage [1]. Coffee on Fridays [2]. Mars [7]. Both [1, 2]; [2,9] end [1",
        "No markers at all, just [brackets] and numbers 12, 13.",
        "[1][2][3][44] and [ 1 ] spaced",
    ],
)
def test_the_result_does_not_depend_on_how_the_stream_is_split(text: str) -> None:
    reg = registry(3)
    whole = play(reg, [text])[:2]
    assert play(reg, list(text))[:2] == whole
    for cut in range(len(text) + 1):
        assert play(reg, [text[:cut], text[cut:]])[:2] == whole, cut


def test_a_long_marker_streamed_token_by_token_is_still_checked() -> None:
    reg = registry(15)
    text = "Sources: [10, 11, 12, 13, 14, 99]."
    whole = play(reg, [text])
    assert whole[:2] == ("Sources: [1][2][3][4][5].", [10, 11, 12, 13, 14])
    tokens = ["Sources", ":", " [", "10", ",", " ", "11", ",", " ", "12", ",", " ", "13", ","]
    tokens += [" ", "14", ",", " ", "99", "]."]
    assert "".join(tokens) == text
    assert play(reg, tokens)[:2] == whole[:2]


def test_a_citation_lists_every_heading_its_chunks_sit_under() -> None:
    reg = CitationRegistry()
    for chunk_id, path in [(1, ["Benefits", "PTO"]), (2, ["Benefits", "Sabbatical"]), (3, [])]:
        reg.register("doc:1", title="B", source="b.md", heading_path=path, chunk_id=chunk_id)
    reg.register("doc:1", title="B", source="b.md", heading_path=["Benefits", "PTO"], chunk_id=4)
    cited = reg.get(1)
    assert cited is not None
    assert cited.heading_path == ["Benefits", "PTO"]
    assert cited.headings == [["Benefits", "PTO"], ["Benefits", "Sabbatical"]]
    assert cited.chunk_ids == [1, 2, 3, 4]


def test_a_citation_never_carries_an_unsafe_url_and_its_source_stays_text() -> None:
    reg = CitationRegistry()
    number = reg.register(
        "url:javascript:alert(1)",
        title="Click me",
        source="javascript:alert(1)",
        url=" JaVaScRiPt:alert(1)",
    )
    citation = reg.get(number)
    assert citation is not None
    assert citation.url is None and citation.to_dict()["url"] is None
    assert citation.source == "javascript:alert(1)"
