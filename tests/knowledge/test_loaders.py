from __future__ import annotations

import io
from pathlib import Path

import pytest

from search2o.errors import CorruptFileError, InputError, UnsupportedFileError
from search2o.knowledge.loaders import (
    SUPPORTED_SUFFIXES,
    LoadedDocument,
    Section,
    load_document,
)

HANDBOOK = Path("/work/shared/data/handbook/benefits-and-perks.md")

DOCX_MEDIA = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _paths(doc: LoadedDocument) -> list[tuple[str, ...]]:
    return [section.heading_path for section in doc.sections]


def _section(doc: LoadedDocument, path: tuple[str, ...]) -> Section:
    matches = [s for s in doc.sections if s.heading_path == path]
    assert len(matches) == 1, (path, _paths(doc))
    return matches[0]


def _pdf_string(text: str) -> bytes:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return f"({escaped})".encode("latin-1")


def make_pdf(pages: list[list[str]], *, title: str | None = None) -> bytes:
    """A minimal valid PDF: one Helvetica text line per string, pages may be empty."""
    objects: list[bytes] = []  # object n is objects[n - 1]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(b"")  # Pages, filled in below
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    kids: list[int] = []
    for lines in pages:
        ops = [b"BT", b"/F1 12 Tf", b"14 TL", b"72 720 Td"]
        for line in lines:
            ops.append(_pdf_string(line) + b" Tj T*")
        ops.append(b"ET")
        stream = b"\n".join(ops) if lines else b""
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content_number = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % content_number
        )
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % kid for kid in kids),
        len(kids),
    )
    info_ref = b""
    if title is not None:
        objects.append(b"<< /Title " + _pdf_string(title) + b" >>")
        info_ref = b" /Info %d 0 R" % len(objects)

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: list[int] = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref_at = len(out)
    out += b"xref\n0 %d\n" % (len(objects) + 1)
    out += b"0000000000 65535 f \n"
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\n" % (len(objects) + 1, info_ref)
    out += b"startxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


def make_docx() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Employee Handbook", level=0)
    document.add_paragraph("Welcome to the company.")
    document.add_heading("Benefits", level=1)
    document.add_paragraph("We offer health insurance.")
    document.add_heading("Paid time off", level=2)
    document.add_paragraph("Twenty days of vacation.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Region"
    table.cell(0, 1).text = "Days"
    table.cell(1, 0).text = "Europe"
    table.cell(1, 1).text = "25"
    document.add_heading("Retirement", level=1)
    document.add_paragraph("A 401k match of 6%.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


# ------------------------------------------------------------------------------------------
# Dispatch and generic errors
# ------------------------------------------------------------------------------------------


def test_supported_suffixes() -> None:
    assert {
        ".md",
        ".markdown",
        ".txt",
        ".text",
        ".html",
        ".htm",
        ".pdf",
        ".docx",
    } == SUPPORTED_SUFFIXES


def test_unknown_suffix_is_unsupported_and_lists_supported() -> None:
    with pytest.raises(UnsupportedFileError) as info:
        load_document("setup.exe", b"MZ\x90\x00")
    assert info.value.field == "setup.exe"
    assert "'.exe'" in info.value.reason
    assert ".docx, .htm, .html" in info.value.reason
    assert isinstance(info.value, InputError)


def test_missing_suffix_is_unsupported() -> None:
    with pytest.raises(UnsupportedFileError) as info:
        load_document("README", b"hello")
    assert info.value.field == "README"


def test_suffix_is_case_insensitive() -> None:
    doc = load_document("NOTES.MD", b"# Notes\n\nSome text.\n")
    assert doc.media_type == "text/markdown"
    assert doc.title == "Notes"


@pytest.mark.parametrize("name", ["a.md", "a.txt", "a.html", "a.pdf", "a.docx"])
@pytest.mark.parametrize("data", [b"", b"   \n\t\r\n  "])
def test_empty_file_is_corrupt(name: str, data: bytes) -> None:
    with pytest.raises(CorruptFileError) as info:
        load_document(name, data)
    assert info.value.field == name
    assert info.value.reason == "file is empty"


def test_bom_only_text_is_empty() -> None:
    with pytest.raises(CorruptFileError, match="file is empty"):
        load_document("bom.txt", b"\xef\xbb\xbf\n")


@pytest.mark.parametrize("name", ["blob.txt", "blob.md", "blob.html"])
def test_binary_content_in_text_format_is_unsupported(name: str) -> None:
    with pytest.raises(UnsupportedFileError) as info:
        load_document(name, b"\x00\x01\x02\x03binary\xff\xfe")
    assert info.value.field == name
    assert info.value.reason == "binary content, not text"


def test_undecodable_text_is_corrupt() -> None:
    # 0x81 and 0x8d are invalid UTF-8 starts and undefined in cp1252.
    with pytest.raises(CorruptFileError) as info:
        load_document("bad.txt", b"abc \x81\x8d def")
    assert info.value.field == "bad.txt"
    assert info.value.reason == "not valid UTF-8 text"


def test_cp1252_fallback() -> None:
    doc = load_document("legacy.txt", "Caf\u00e9 \u2013 \u201cquoted\u201d".encode("cp1252"))
    assert doc.sections[0].text == "Caf\u00e9 \u2013 \u201cquoted\u201d"


def test_utf8_bom_is_stripped() -> None:
    doc = load_document("bom.md", b"\xef\xbb\xbf# Title\n\nBody.\n")
    assert doc.title == "Title"
    assert doc.sections == (Section((), "Body."),)


def test_utf16_with_bom_is_read() -> None:
    data = "\ufeff# Unicode\n\nBody text.\n".encode("utf-16-le")
    doc = load_document("wide.md", data)
    assert doc.title == "Unicode"
    assert doc.sections[0].text == "Body text."


# ------------------------------------------------------------------------------------------
# Plain text
# ------------------------------------------------------------------------------------------


def test_plain_text_is_one_section_titled_by_stem() -> None:
    data = b"First line\r\nsecond line   \r\n\r\n\r\n\r\nNext paragraph.\n"
    doc = load_document("docs/Release Notes.txt", data)
    assert doc.title == "Release Notes"
    assert doc.media_type == "text/plain"
    assert doc.sections == (Section((), "First line\nsecond line\n\nNext paragraph."),)


# ------------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------------


def test_handbook_markdown_heading_paths() -> None:
    doc = load_document(HANDBOOK.name, HANDBOOK.read_bytes())
    assert doc.title == "Benefits & Perks"
    assert doc.media_type == "text/markdown"
    paths = _paths(doc)
    assert paths[:3] == [
        ("Health Insurance",),
        ("Health Insurance", "Medical Insurance"),
        ("Health Insurance", "Dental Insurance"),
    ]
    assert ("Retirement Plan",) in paths
    assert ("Paid Time Off", "Sabbatical") in paths
    assert paths[-1] == ("Expense Account",)
    # The title is never repeated in a path, and an H2 pops the H3s before it.
    assert all("Benefits & Perks" not in path for path in paths)
    assert (
        paths.index(("Retirement Plan",))
        == paths.index(("Health Insurance", "Disability Insurance")) + 1
    )
    medical = _section(doc, ("Health Insurance", "Medical Insurance"))
    assert medical.text.startswith("In the United States, medical insurance")
    assert "* Employee-only medical coverage: $96.05" in medical.text
    assert "#" not in medical.text
    for section in doc.sections:
        assert section.text == section.text.strip()
        assert "\n\n\n" not in section.text


def test_markdown_structure_inline() -> None:
    md = (
        "Intro before any heading.\n"
        "\n"
        "# Guide\n"
        "\n"
        "Guide intro.   \n"
        "\n\n\n\n"
        "Second paragraph.\n"
        "## Setup\n"
        "#### Deep (level skipped)\n"
        "Deep text.\n"
        "### Level three\n"
        "Three text.\n"
        "## Empty section\n"
        "## Usage ##\n"
        "Usage text.\n"
        "# Appendix\n"
        "## Notes\n"
        "Appendix notes.\n"
    )
    doc = load_document("guide.md", md.encode())
    assert doc.title == "Guide"
    assert doc.sections == (
        Section((), "Intro before any heading."),
        Section((), "Guide intro.\n\nSecond paragraph."),
        Section(("Setup", "Deep (level skipped)"), "Deep text."),
        Section(("Setup", "Level three"), "Three text."),
        Section(("Usage",), "Usage text."),
        Section(("Appendix", "Notes"), "Appendix notes."),
    )


def test_markdown_fenced_code_hashes_are_not_headings() -> None:
    md = (
        "# Scripts\n"
        "## Bash\n"
        "Run this:\n"
        "\n"
        "```bash\n"
        "# install dependencies\n"
        "## not a heading either\n"
        "```\n"
        "~~~~\n"
        "# tilde fence\n"
        "```\n"
        "# still inside the tilde fence\n"
        "~~~~\n"
        "After the code.\n"
        "## Python\n"
        "Python text.\n"
    )
    doc = load_document("scripts.md", md.encode())
    assert _paths(doc) == [("Bash",), ("Python",)]
    bash = doc.sections[0].text
    assert "# install dependencies" in bash
    assert "## not a heading either" in bash
    assert "# still inside the tilde fence" in bash
    assert bash.endswith("After the code.")


def test_markdown_front_matter_is_stripped() -> None:
    md = "---\ntitle: Hidden\ntags: [a, b]\n---\n# Visible\n\nBody.\n"
    doc = load_document("fm.md", md.encode())
    assert doc.title == "Visible"
    assert doc.sections == (Section((), "Body."),)
    assert "tags" not in doc.sections[0].text


def test_markdown_setext_headings() -> None:
    md = "Main Title\n==========\n\nIntro.\n\nSub part\n--------\nSub text.\n"
    doc = load_document("setext.md", md.encode())
    assert doc.title == "Main Title"
    assert doc.sections == (Section((), "Intro."), Section(("Sub part",), "Sub text."))


def test_markdown_list_before_dashes_is_not_setext() -> None:
    doc = load_document("list.md", b"# T\n\n- item\n---\nmore\n")
    assert _paths(doc) == [()]
    assert "- item" in doc.sections[0].text


def test_markdown_hashtag_without_space_is_text() -> None:
    doc = load_document("tags.md", b"#hashtag is text\n")
    assert doc.title == "tags"
    assert doc.sections == (Section((), "#hashtag is text"),)


def test_markdown_only_headings_has_no_text() -> None:
    with pytest.raises(CorruptFileError) as info:
        load_document("hollow.md", b"# Title\n## Sub\n")
    assert info.value.field == "hollow.md"
    assert info.value.reason == "no text found"


# ------------------------------------------------------------------------------------------
# HTML
# ------------------------------------------------------------------------------------------

HTML = b"""<!DOCTYPE html>
<html><head><title>Acme  Handbook</title>
<style>body { color: red; }</style>
<script>var secret = "do not index";</script>
</head>
<body>
<header>Site header</header>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Handbook</h1>
<p>Welcome   to
   <b>Acme</b>.</p>
<!-- a comment -->
<h2>Benefits</h2>
<div>Loose div text<p>Inner paragraph</p></div>
<ul><li>Health</li><li>Dental <i>and</i> vision</li></ul>
<h3>Details</h3>
<table><tr><td>Plan</td><td>Gold</td></tr></table>
<pre>line one
    line two</pre>
<blockquote>Quoted words.</blockquote>
<script>alert("also dropped")</script>
<noscript>Enable JS</noscript>
<h2>Leave</h2>
<p>Twenty days.</p>
<footer>Copyright footer</footer>
</body></html>
"""


def test_html_sections_and_dropped_elements() -> None:
    doc = load_document("handbook.html", HTML)
    assert doc.title == "Acme Handbook"
    assert doc.media_type == "text/html"
    assert doc.sections == (
        Section((), "Welcome to Acme."),
        Section(
            ("Benefits",),
            "Loose div text\n\nInner paragraph\n\nHealth\n\nDental and vision",
        ),
        Section(
            ("Benefits", "Details"),
            "Plan\n\nGold\n\nline one\n    line two\n\nQuoted words.",
        ),
        Section(("Leave",), "Twenty days."),
    )
    everything = " ".join(s.text for s in doc.sections)
    for dropped in ("secret", "also dropped", "Enable JS", "Home", "footer", "header", "color"):
        assert dropped not in everything


def test_html_title_falls_back_to_h1_then_stem() -> None:
    doc = load_document("page.htm", b"<html><body><h1>Main</h1><p>x</p></body></html>")
    assert doc.title == "Main"
    doc = load_document("page.htm", b"<p>Just a fragment.</p>")
    assert doc.title == "page"
    assert doc.sections == (Section((), "Just a fragment."),)


def test_html_without_text_is_corrupt() -> None:
    with pytest.raises(CorruptFileError, match="no text found"):
        load_document("s.html", b"<html><script>x = 1</script></html>")


# ------------------------------------------------------------------------------------------
# PDF
# ------------------------------------------------------------------------------------------


def test_pdf_pages_become_sections() -> None:
    data = make_pdf(
        [
            ["Hello from page one.", "Second line here."],
            [],
            ["Third page (with parens) text."],
        ],
        title="Quarterly Report",
    )
    doc = load_document("report.pdf", data)
    assert doc.title == "Quarterly Report"
    assert doc.media_type == "application/pdf"
    assert _paths(doc) == [("Page 1",), ("Page 3",)]
    assert "Hello from page one." in doc.sections[0].text
    assert "Second line here." in doc.sections[0].text
    assert "Third page (with parens) text." in doc.sections[1].text


def test_pdf_title_falls_back_to_stem() -> None:
    doc = load_document("scan-2024.pdf", make_pdf([["Only text."]]))
    assert doc.title == "scan-2024"


def test_pdf_without_text_is_corrupt() -> None:
    with pytest.raises(CorruptFileError) as info:
        load_document("scan.pdf", make_pdf([[], []]))
    assert info.value.field == "scan.pdf"
    assert info.value.reason == "no extractable text (scanned PDF?)"


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.4\nthis is not really a pdf",
        b"not a pdf at all",
        make_pdf([["Truncated"]])[:60],
    ],
)
def test_corrupt_pdf(data: bytes) -> None:
    with pytest.raises(CorruptFileError) as info:
        load_document("broken.pdf", data)
    assert info.value.field == "broken.pdf"
    assert info.value.reason.startswith("cannot parse PDF: ")
    assert info.value.__cause__ is not None


def test_encrypted_pdf() -> None:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(make_pdf([["Secret text."]]))))
    writer.encrypt("s3cret", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    with pytest.raises(CorruptFileError) as info:
        load_document("locked.pdf", buffer.getvalue())
    assert info.value.field == "locked.pdf"
    assert info.value.reason == "encrypted PDF"


# ------------------------------------------------------------------------------------------
# DOCX
# ------------------------------------------------------------------------------------------


def test_docx_headings_paragraphs_and_table() -> None:
    doc = load_document("handbook.docx", make_docx())
    assert doc.title == "Employee Handbook"
    assert doc.media_type == DOCX_MEDIA
    assert doc.sections == (
        Section((), "Welcome to the company."),
        Section(("Benefits",), "We offer health insurance."),
        Section(
            ("Benefits", "Paid time off"),
            "Twenty days of vacation.\n\nRegion\n\nDays\n\nEurope\n\n25",
        ),
        Section(("Retirement",), "A 401k match of 6%."),
    )


def test_docx_first_heading_1_is_title_without_title_style() -> None:
    import docx

    document = docx.Document()
    document.add_heading("Policies", level=1)
    document.add_paragraph("Intro.")
    document.add_heading("Travel", level=2)
    document.add_paragraph("Book economy.")
    buffer = io.BytesIO()
    document.save(buffer)
    doc = load_document("p.docx", buffer.getvalue())
    assert doc.title == "Policies"
    assert doc.sections == (Section((), "Intro."), Section(("Travel",), "Book economy."))


def test_docx_merged_cells_are_read_once() -> None:
    import docx

    document = docx.Document()
    table = document.add_table(rows=1, cols=3)
    merged = table.cell(0, 0).merge(table.cell(0, 1))
    merged.text = "Spanning"
    table.cell(0, 2).text = "Last"
    buffer = io.BytesIO()
    document.save(buffer)
    doc = load_document("t.docx", buffer.getvalue())
    assert doc.title == "t"
    assert doc.sections == (Section((), "Spanning\n\nLast"),)


@pytest.mark.parametrize(
    "data",
    [b"PK\x03\x04 definitely not a zip", b"plain text pretending", make_docx()[:200]],
)
def test_corrupt_docx(data: bytes) -> None:
    with pytest.raises(CorruptFileError) as info:
        load_document("broken.docx", data)
    assert info.value.field == "broken.docx"
    assert info.value.reason.startswith("cannot parse DOCX: ")
    assert info.value.__cause__ is not None


def test_docx_zip_without_document_is_corrupt() -> None:
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "not a word document")
    with pytest.raises(CorruptFileError, match="cannot parse DOCX"):
        load_document("fake.docx", buffer.getvalue())


def test_empty_docx_has_no_text() -> None:
    import docx

    buffer = io.BytesIO()
    docx.Document().save(buffer)
    with pytest.raises(CorruptFileError, match="no text found"):
        load_document("blank.docx", buffer.getvalue())
