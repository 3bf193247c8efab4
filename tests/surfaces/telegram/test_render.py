"""Telegram rendering: entities at UTF-16 offsets (emoji, CJK), citation links, Sources, splits."""

from __future__ import annotations

from typing import Any

from search2o.surfaces.telegram.render import (
    MAX_UNITS,
    Part,
    render_answer,
    render_notice,
    split,
    utf16_len,
)

CITATION = {
    "number": 1,
    "title": "Benefits & <Perks>",
    "source": "benefits-and-perks.md",
    "url": "https://wiki.example.com/benefits?a=1&b=2",
    "heading_path": ["Time off", "Vacation"],
}


def covered(part: Part, entity: dict[str, Any]) -> str:
    """The text an entity covers, cut by UTF-16 offsets as Telegram does."""
    units = part.text.encode("utf-16-le")
    start, end = 2 * entity["offset"], 2 * (entity["offset"] + entity["length"])
    return units[start:end].decode("utf-16-le")


def test_entities_count_utf16_units_for_emoji_and_cjk() -> None:
    (part,) = render_answer("🎉👍🏽 休暇は20日です [1]. 𠮷野家 [1]", [CITATION])
    links = [e for e in part.entities if e["type"] == "text_link"]
    assert [covered(part, e) for e in links] == ["[1]", "[1]", "Benefits & <Perks>"]
    assert links[0]["offset"] == 2 + 4 + 1 + 8 + 1  # 🎉 2, 👍🏽 4, space, 8 CJK, space
    assert links[1]["offset"] == utf16_len("🎉👍🏽 休暇は20日です [1]. 𠮷野家 ")
    assert all(e["url"] == CITATION["url"] for e in links)


def test_the_text_is_sent_as_it_is_and_sources_are_a_collapsed_block() -> None:
    (part,) = render_answer("Use *bold* _x_ `code` <b>no</b> [1]", [CITATION], footer="Shared.")
    assert part.text.startswith("Use *bold* _x_ `code` <b>no</b> [1]")  # nothing escaped
    kinds = {e["type"]: covered(part, e) for e in part.entities}
    assert kinds["bold"] == "Sources"
    assert kinds["expandable_blockquote"] == (
        "Sources\n[1] Benefits & <Perks> — Time off \u203a Vacation"
    )
    assert kinds["italic"] == "Shared."
    offsets = [e["offset"] for e in part.entities]
    assert offsets == sorted(offsets)


def test_a_citation_without_a_web_url_stays_plain() -> None:
    cited = {**CITATION, "url": "javascript:alert(1)"}
    (part,) = render_answer("See [1] and [2].", [cited])
    assert [e["type"] for e in part.entities] == ["expandable_blockquote", "bold"]


def test_splitting_keeps_every_piece_within_4096_units_and_never_cuts_a_link() -> None:
    text = ("😀" * 1500 + " [1] ") * 4
    parts = render_answer(text, [CITATION])
    assert len(parts) > 1
    assert all(utf16_len(p.text) <= MAX_UNITS for p in parts)
    for part in parts:
        for entity in part.entities:
            assert entity["offset"] + entity["length"] <= utf16_len(part.text)
            if entity["type"] == "text_link" and covered(part, entity).startswith("["):
                assert covered(part, entity) == "[1]"
    assert "".join(p.text for p in parts).replace(" ", "").count("[1]") == 5


def test_a_cut_prefers_a_paragraph_then_a_line_then_a_space() -> None:
    paragraph = "a" * 3000 + "\n\n" + "b" * 3000
    assert [p.text for p in split(paragraph, [])] == ["a" * 3000, "b" * 3000]
    line = "a" * 3000 + "\n" + "b" * 100 + " " + "c" * 3000
    assert [p.text[:1] for p in split(line, [])] == ["a", "b"]
    hard = "x" * 5000
    assert [len(p.text) for p in split(hard, [])] == [4096, 904]


def test_a_notice_is_plain_text() -> None:
    assert render_notice("  hello <b>  ") == [Part("hello <b>")]
