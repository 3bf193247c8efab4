"""Golden tests of an answer rendered for Slack: escaping, citation links, Sources, splitting."""

from __future__ import annotations

import json

from search2o.surfaces.slack.render import (
    MAX_BLOCKS,
    SECTION_CHARS,
    escape,
    link_url,
    render_answer,
    split_text,
)

CITATIONS = [
    {
        "number": 1,
        "title": "R&D <team> | budget",
        "source": "upload:rd.md",
        "url": "https://wiki.example.com/a|b?x=1&y=<2>",
        "heading_path": ["Pay & grades", "Level <3>"],
    },
    {"number": 2, "title": "Handbook", "source": "upload:hb.md", "url": None, "heading_path": []},
]

GOLDEN = [
    {
        "type": "section",
        "text": {
            "type": "mrkdwn",
            "text": "Budgets &amp; bands &lt;@U123&gt; "
            "<https://wiki.example.com/a%7Cb?x=1&amp;y=%3C2%3E|[1]> and [2].",
        },
    },
    {
        "type": "context",
        "elements": [
            {
                "type": "mrkdwn",
                "text": "*Sources* · [1] <https://wiki.example.com/a%7Cb?x=1&amp;y=%3C2%3E|"
                "R&amp;D &lt;team&gt; | budget> — Pay &amp; grades \u203a Level &lt;3&gt;",
            },
            {"type": "mrkdwn", "text": "[2] Handbook"},
        ],
    },
    {"type": "context", "elements": [{"type": "mrkdwn", "text": "Shared &amp; open"}]},
    {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "action_id": "search2o_feedback_up",
                "text": {"type": "plain_text", "text": ":+1:", "emoji": True},
                "value": "7:up",
            },
            {
                "type": "button",
                "action_id": "search2o_feedback_down",
                "text": {"type": "plain_text", "text": ":-1:", "emoji": True},
                "value": "7:down",
            },
        ],
    },
]


def test_citations_render_as_native_links_with_everything_escaped() -> None:
    rendered = render_answer(
        "Budgets & bands <@U123> [1] and [2].", CITATIONS, footer="Shared & open", feedback="7"
    )
    assert rendered.blocks == GOLDEN, json.dumps(rendered.blocks, indent=1)
    assert rendered.text == "Budgets &amp; bands &lt;@U123&gt; [1] and [2]."


def test_escaping_and_url_encoding_rules() -> None:
    assert escape("a & b < c > d &amp;") == "a &amp; b &lt; c &gt; d &amp;amp;"
    assert link_url("https://x.example/p|q r?a=1&b=2") == "https://x.example/p%7Cq%20r?a=1&amp;b=2"


def test_a_long_answer_is_split_within_block_limits_and_keeps_every_word() -> None:
    words = [f"w{i:04d}" for i in range(700)]  # 3,500 characters
    text = " ".join(words) + " [1]"
    rendered = render_answer(text, CITATIONS, feedback="1")
    sections = [b for b in rendered.blocks if b["type"] == "section"]
    assert len(sections) == 2
    assert all(len(b["text"]["text"]) <= SECTION_CHARS for b in sections)
    joined = " ".join(b["text"]["text"] for b in sections).split()
    assert joined[:-1] == words  # nothing lost, nothing cut inside a word
    assert joined[-1].startswith("<https://") and joined[-1].endswith("|[1]>")
    assert len(rendered.text) <= 3000


def test_a_huge_answer_stays_within_fifty_blocks() -> None:
    rendered = render_answer("x " * 100_000, CITATIONS, footer="f", feedback="1")
    assert len(rendered.blocks) == MAX_BLOCKS
    assert rendered.blocks[-4]["text"]["text"].endswith("…")


def test_a_link_is_never_cut_in_two() -> None:
    link = "<https://example.com/" + "a" * 20 + "|[1]>"
    text = "b" * 30 + " " + link
    pieces = split_text(text, limit=50)
    assert pieces == ["b" * 30, link]


def test_a_url_too_long_for_a_section_leaves_the_marker_plain() -> None:
    citation = {**CITATIONS[0], "url": "https://example.com/" + "a" * 4000}
    rendered = render_answer("See [1].", [citation])
    assert rendered.blocks[0]["text"]["text"] == "See [1]."
    assert all(len(e["text"]) <= SECTION_CHARS for e in rendered.blocks[1]["elements"])
