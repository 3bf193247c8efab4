"""The two cleaning rules for text taken from documents: one-line titles and body text."""

from __future__ import annotations

import pytest

from search2o.knowledge.textclean import clean_body, clean_line


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("  Annual\t report\n2026  ", "Annual report 2026"),
        ("Pol\x00icy", "Policy"),
        ("red\x1b[31m alert\x07", "red[31m alert"),
        ("C1\x9b31m and\x85next", "C131m and next"),  # CSI removed; NEL is a line break
        ("\u202eevil\u202c \u2067iso\u2069", "evil iso"),
        ("\u05e9\u05dc\u05d5\u05dd\u200f (HR)", "\u05e9\u05dc\u05d5\u05dd\u200f (HR)"),  # RLM kept
        ("lone \ud800 surrogate", "lone \ufffd surrogate"),
        ("<script>alert(1)</script> &lt;b&gt;", "<script>alert(1)</script> &lt;b&gt;"),
        ("\x01\x02\x03", ""),
    ],
)
def test_clean_line(raw: str, clean: str) -> None:
    assert clean_line(raw, 300) == clean


def test_clean_line_bounds_length_with_an_ellipsis() -> None:
    assert clean_line("word " * 1000, 20) == "word word word word…"
    assert len(clean_line("x" * 1000, 20)) == 20
    assert clean_line("exactly twenty chars", 20) == "exactly twenty chars"


def test_clean_body_keeps_tabs_and_newlines_only() -> None:
    raw = "a\tb\nc\x00d\x01e\x7ff\x9bg\ud800h\u202ei\r\n"
    assert clean_body(raw) == "a\tb\ncdef" + "g\ufffdh\u202ei\r\n"
