"""Titles, heading paths and body text taken from documents are clean, bounded text.

The API is text-only and clients render text as text, so what must hold is: a title or heading
never carries a control character (C0, DEL, C1) or a bidirectional embedding/override/isolate,
is whitespace-normalised and bounded (``knowledge.max_title_chars``), and what a document says
in markup-looking text stays that text, decoded exactly once. Body text keeps tabs and
newlines and loses every other control character, NUL included.
"""

from __future__ import annotations

import io
import re

import pytest

from search2o.knowledge.loaders import LoadedDocument, load_document
from search2o.knowledge.settings import KnowledgeSettings
from search2o.textrules import text_problem
from tests.knowledge.hostile import pdf_document, text_page

# C0 and C1 controls, DEL, and the explicit directional formatting characters (UAX #9).
FORBIDDEN_IN_LINES = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
FORBIDDEN_IN_BODY = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def check_clean(doc: LoadedDocument, max_title: int = 300) -> None:
    """Assert the rules above for every title, heading and body of ``doc``."""
    lines = [doc.title, *(h for s in doc.sections for h in s.heading_path)]
    for line in lines:
        assert not FORBIDDEN_IN_LINES.search(line), repr(line)
        assert line == " ".join(line.split()) and line, repr(line)
        assert len(line) <= max_title, len(line)
    for section in doc.sections:
        assert not FORBIDDEN_IN_BODY.search(section.text), repr(section.text)
        assert text_problem(section.text) is None


# ------------------------------------------------------------------------------------------
# HTML
# ------------------------------------------------------------------------------------------


def test_html_title_is_text_decoded_once_without_controls() -> None:
    title = (
        "&lt;script&gt;alert(1)&lt;/script&gt; &amp;lt;b&amp;gt; \x01bell\x1b[0m "
        "&#x9b;&#x202e;evil&#x202c; &#x5e9;&#x200f;  &#0;"
    )
    data = f"<html><head><title>{title}</title></head><body><p>x</p></body></html>".encode()
    doc = load_document("t.html", data)
    # &#x9b; is U+203A: HTML maps references to 0x80-0x9F onto windows-1252 (WHATWG HTML,
    # "numeric character reference end state"), so no C1 control comes from a reference.
    assert doc.title == "<script>alert(1)</script> &lt;b&gt; bell[0m \u203aevil \u05e9\u200f \ufffd"
    check_clean(doc)


def test_html_title_with_a_nul_byte_after_the_binary_sniff() -> None:
    data = b"<html><head><!--" + b"x" * 9000 + b"--><title>Sa\x00fe</title></head><body><p>ok</p>"
    doc = load_document("nul.html", data)
    assert doc.title == "Safe"
    check_clean(doc)


def test_html_title_of_4000_characters_is_bounded() -> None:
    data = b"<title>" + b"Very long title " * 250 + b"</title><p>x</p>"
    doc = load_document("long.html", data)
    assert len(doc.title) == 300 and doc.title.endswith("\u2026")
    assert doc.title.startswith("Very long title Very")
    check_clean(doc)
    bounded = load_document("long.html", data, KnowledgeSettings(max_title_chars=40))
    assert len(bounded.title) <= 40
    check_clean(bounded, 40)


def test_html_title_only_from_head_not_from_inline_svg() -> None:
    data = b"<html><body><svg><title>icon</title></svg><h1>Real heading</h1><p>x</p></body></html>"
    doc = load_document("svg.html", data)
    assert doc.title == "Real heading"
    assert "icon" not in doc.sections[0].text


def test_html_headings_and_body_lose_control_characters() -> None:
    data = (
        "<title>T</title><h2>Bene\x1b[2Jfits\u202e</h2><p>one\x01two\x7f</p>"
        f"<h2>{'long heading ' * 100}</h2><p>three</p>"
    ).encode()
    doc = load_document("h.html", data)
    assert doc.sections[0].heading_path == ("Bene[2Jfits",)
    assert doc.sections[0].text == "onetwo"
    cut = doc.sections[1].heading_path[0]
    assert len(cut) <= 300 and cut.endswith("\u2026") and cut.startswith("long heading long")
    check_clean(doc)


# ------------------------------------------------------------------------------------------
# Markdown, text, file names
# ------------------------------------------------------------------------------------------


def test_markdown_title_headings_and_body() -> None:
    front = "---\n" + "note: " + "x" * 9000 + "\n---\n"
    body = "# Title\x00 with\x07 bell\n\n## Sec\x85tion\x9b\n\ntab\there\x00 and\x01 on\n"
    data = (front + body).encode()
    doc = load_document("m.md", data)
    assert doc.title == "Title with bell"
    assert doc.sections[0].heading_path == ("Sec tion",)
    assert doc.sections[0].text == "tab\there and on"
    check_clean(doc)


@pytest.mark.parametrize(
    ("filename", "title"),
    [("\x1b]0;owned\x07report.txt", "]0;ownedreport"), ("\x01\x02.txt", "untitled")],
)
def test_file_name_as_title_is_clean(filename: str, title: str) -> None:
    doc = load_document(filename, b"Body text.")
    assert doc.title == title
    check_clean(doc)


# ------------------------------------------------------------------------------------------
# PDF and DOCX
# ------------------------------------------------------------------------------------------


def test_pdf_metadata_title_in_utf16_with_controls() -> None:
    raw = "Report\u0007\u009b 2026\n\u202eexe.pdf\u202c"
    info = b"/Title <FEFF" + raw.encode("utf-16-be").hex().upper().encode() + b">"
    doc = load_document("r.pdf", pdf_document([text_page(["Page text."])], info=info))
    assert doc.title == "Report 2026 exe.pdf"
    check_clean(doc)


def test_docx_title_and_headings_lose_c1_controls_and_overrides() -> None:
    import docx

    document = docx.Document()
    document.add_heading("Hand\x85book\x9b \u202ecod.exe", level=0)
    document.add_heading("Bene\u2066fits\x80", level=1)
    document.add_paragraph("Body\x85text")
    buffer = io.BytesIO()
    document.save(buffer)
    doc = load_document("d.docx", buffer.getvalue())
    assert doc.title == "Hand book cod.exe"
    assert doc.sections[0].heading_path == ("Benefits",)
    check_clean(doc)
