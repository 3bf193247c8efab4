"""Loaders that turn one uploaded file's bytes into titled, sectioned text.

Every supported format (Markdown, plain text, HTML, PDF, DOCX) is reduced to the same shape, a
:class:`LoadedDocument` holding :class:`Section` objects, so the chunker and the index never
need to know where text came from. A section is a run of body text under one heading path; the
heading path is what lets a search hit say *where* in a document it was found.

All failures are reported as :class:`~search2o.errors.UnsupportedFileError` (we do not read this
kind of file) or :class:`~search2o.errors.CorruptFileError` (we should, but cannot); third-party
parser exceptions never escape, they are chained with ``raise ... from exc``.
"""

from __future__ import annotations

import codecs
import io
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from search2o.errors import CorruptFileError, UnsupportedFileError

__all__ = ["SUPPORTED_SUFFIXES", "LoadedDocument", "Section", "load_document"]

MEDIA_MARKDOWN = "text/markdown"
MEDIA_TEXT = "text/plain"
MEDIA_HTML = "text/html"
MEDIA_PDF = "application/pdf"
MEDIA_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

_BINARY_SNIFF_BYTES = 8 * 1024


@dataclass(frozen=True)
class Section:
    r"""A run of body text under one heading path.

    Attributes:
        heading_path: the headings above the text, outermost first, e.g.
            ``("Benefits", "Paid time off")``; ``()`` for text before any heading. The
            document's title heading is not repeated here.
        text: paragraphs separated by ``"\n\n"``; never empty, no leading/trailing whitespace.

    """

    heading_path: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class LoadedDocument:
    """One file's text, split into sections in document order.

    Attributes:
        title: the first H1 / ``<title>`` / DOCX Title (or first Heading 1) / PDF metadata
            title; the file stem when the file has none.
        media_type: the IANA media type of the format that was read, e.g. ``"text/markdown"``.
        sections: at least one section, in document order.

    """

    title: str
    media_type: str
    sections: tuple[Section, ...]


# --------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------

_BLANK_RUN = re.compile(r"\n{3,}")
_WS = re.compile(r"\s+")


def _normalise_block(text: str) -> str:
    """Normalise newlines, strip trailing spaces per line and collapse blank-line runs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    return _BLANK_RUN.sub("\n\n", "\n".join(lines)).strip()


def _stem(filename: str) -> str:
    """Return the file name without directories and suffix (``"a/b/H.md"`` -> ``"H"``)."""
    stem = PurePath(filename.replace("\\", "/")).stem
    return stem or filename


class _SectionBuilder:
    """Collects headings and paragraphs in document order and cuts them into sections.

    Heading levels are 1..9; level 0 is a document title (DOCX "Title" style). The first
    level-0/level-1 heading met before any other is the *document heading*: it becomes the title
    candidate and is left out of heading paths. Later H1s open new top-level paths.
    """

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []
        self._parts: list[str] = []
        self._sections: list[Section] = []
        self.document_heading: str | None = None

    def heading(self, level: int, text: str) -> None:
        text = _WS.sub(" ", text).strip()
        if not text:
            return
        self._flush()
        if level <= 1 and self.document_heading is None:
            self.document_heading = text
            self._stack.clear()
            return
        level = max(level, 1)
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, text))

    def add(self, text: str) -> None:
        if text.strip():
            self._parts.append(text)

    def _flush(self) -> None:
        text = _normalise_block("\n\n".join(self._parts))
        self._parts.clear()
        if text:
            path = tuple(heading for _, heading in self._stack)
            self._sections.append(Section(heading_path=path, text=text))

    def sections(self) -> tuple[Section, ...]:
        self._flush()
        return tuple(self._sections)


def _finish(
    filename: str,
    title: str | None,
    media_type: str,
    sections: tuple[Section, ...],
    *,
    empty_reason: str = "no text found",
) -> LoadedDocument:
    """Build the result, or raise CorruptFileError when no section has text."""
    if not sections:
        raise CorruptFileError(filename, empty_reason)
    clean_title = _WS.sub(" ", title or "").strip()
    return LoadedDocument(
        title=clean_title or _stem(filename), media_type=media_type, sections=sections
    )


def _decode_text(filename: str, data: bytes) -> str:
    """Decode the bytes of a text format; reject binary content.

    UTF-16 with a byte-order mark is accepted; otherwise a NUL byte in the first 8 KiB means
    binary. Tries UTF-8 (BOM allowed), then cp1252, both strict.
    """
    for bom, encoding in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as exc:
                raise CorruptFileError(filename, "not valid UTF-16 text") from exc
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        raise UnsupportedFileError(filename, "binary content, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError as exc:
        raise CorruptFileError(filename, "not valid UTF-8 text") from exc


# --------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------


def _load_text(filename: str, data: bytes) -> LoadedDocument:
    text = _normalise_block(_decode_text(filename, data))
    if not text:
        raise CorruptFileError(filename, "file is empty")
    return _finish(filename, None, MEDIA_TEXT, (Section(heading_path=(), text=text),))


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSING = re.compile(r"(?:^|[ \t]+)#+$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# Lines that cannot be a setext heading's text: list items, quotes, tables, indented code.
_NOT_SETEXT_TEXT = re.compile(r"^(?: {4,}|\t| {0,3}(?:[-*+][ \t]|\d{1,9}[.)][ \t]|>|\|))")


def _strip_front_matter(text: str) -> str:
    """Drop a YAML front-matter block (``---`` ... ``---`` or ``...``) at the very top."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return text
    for index in range(1, len(lines)):
        if lines[index].rstrip() in ("---", "..."):
            return "\n".join(lines[index + 1 :])
    return text


def _atx_heading(line: str) -> tuple[int, str] | None:
    """Return ``(level, text)`` when ``line`` is an ATX heading, else None."""
    match = _ATX.match(line)
    if match is None:
        return None
    content = (match.group(2) or "").strip()
    content = _ATX_CLOSING.sub("", content).strip()
    return len(match.group(1)), content


def _load_markdown(filename: str, data: bytes) -> LoadedDocument:
    text = _decode_text(filename, data).replace("\r\n", "\n").replace("\r", "\n")
    text = _strip_front_matter(text)
    if not text.strip():
        raise CorruptFileError(filename, "file is empty")

    builder = _SectionBuilder()
    body: list[str] = []  # lines of the current section's body
    fence: str | None = None  # the opening fence while inside a fenced code block

    def flush_body() -> None:
        builder.add("\n".join(body))
        body.clear()

    for line in text.split("\n"):
        if fence is not None:
            body.append(line)
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                fence = None
            continue
        fence_match = _FENCE.match(line)
        if fence_match is not None and not (
            fence_match.group(1)[0] == "`" and "`" in fence_match.group(2)
        ):
            fence = fence_match.group(1)
            body.append(line)
            continue
        atx = _atx_heading(line)
        if atx is not None:
            flush_body()
            builder.heading(*atx)
            continue
        setext = _SETEXT.match(line)
        if (
            setext is not None
            and body
            and body[-1].strip()
            and not _NOT_SETEXT_TEXT.match(body[-1])
            and (len(body) == 1 or not body[-2].strip())
        ):
            heading_text = body.pop().strip()
            flush_body()
            builder.heading(1 if setext.group(1)[0] == "=" else 2, heading_text)
            continue
        body.append(line)
    flush_body()
    sections = builder.sections()
    return _finish(filename, builder.document_heading, MEDIA_MARKDOWN, sections)


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

_HTML_DROP = ["script", "style", "nav", "footer", "header", "noscript", "template", "title"]
_HTML_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_HTML_BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "form",
        "hr",
        "html",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    }
)


class _HtmlWalker:
    """Walks a parsed HTML tree in document order, feeding a :class:`_SectionBuilder`."""

    def __init__(self, builder: _SectionBuilder) -> None:
        self._builder = builder
        self._inline: list[str] = []

    def _flush_inline(self) -> None:
        text = _WS.sub(" ", "".join(self._inline)).strip()
        self._inline.clear()
        if text:
            self._builder.add(text)

    def walk(self, node: Any) -> None:
        from bs4.element import NavigableString, PreformattedString, Tag

        for child in node.children:
            if isinstance(child, NavigableString):
                if not isinstance(child, PreformattedString):  # comments, doctype, CDATA ...
                    self._inline.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = (child.name or "").lower()
            if name in _HTML_HEADINGS:
                self._flush_inline()
                self._builder.heading(_HTML_HEADINGS[name], child.get_text(" "))
            elif name == "br":
                self._inline.append(" ")
            elif name == "pre":
                self._flush_inline()
                self._builder.add(_normalise_block(child.get_text()))
            elif name in _HTML_BLOCKS:
                self._flush_inline()
                self.walk(child)
                self._flush_inline()
            else:
                self.walk(child)

    def finish(self) -> None:
        self._flush_inline()


def _load_html(filename: str, data: bytes) -> LoadedDocument:
    text = _decode_text(filename, data)
    if not text.strip():
        raise CorruptFileError(filename, "file is empty")
    builder = _SectionBuilder()
    walker = _HtmlWalker(builder)
    try:
        from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning, XMLParsedAsHTMLWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
            warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
            soup = BeautifulSoup(text, "lxml")
        title_tag = soup.find("title")
        title = title_tag.get_text(" ") if title_tag is not None else ""
        for tag in soup.find_all(_HTML_DROP):
            tag.decompose()
        walker.walk(soup.body if soup.body is not None else soup)
        walker.finish()
        sections = builder.sections()
    except Exception as exc:  # lxml/bs4 failures, RecursionError on absurd nesting
        raise CorruptFileError(filename, f"cannot parse HTML: {exc}") from exc
    title = _WS.sub(" ", title).strip() or (builder.document_heading or "")
    return _finish(filename, title, MEDIA_HTML, sections)


# --------------------------------------------------------------------------------------------
# PDF
# --------------------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _load_pdf(filename: str, data: bytes) -> LoadedDocument:
    try:
        from pypdf import PasswordType, PdfReader

        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                result = reader.decrypt("")
            except Exception as exc:  # wrong password, missing AES backend, ...
                raise CorruptFileError(filename, "encrypted PDF") from exc
            if result == PasswordType.NOT_DECRYPTED:
                raise CorruptFileError(filename, "encrypted PDF")
        sections: list[Section] = []
        for number, page in enumerate(reader.pages, start=1):
            page_text = _normalise_block(_CONTROL.sub(" ", page.extract_text() or ""))
            if page_text:
                sections.append(Section(heading_path=(f"Page {number}",), text=page_text))
        metadata = reader.metadata
        raw_title = metadata.title if metadata is not None else None
        title = raw_title if isinstance(raw_title, str) else None
    except CorruptFileError:
        raise
    except Exception as exc:  # pypdf raises many types (PdfReadError, KeyError, ValueError...)
        raise CorruptFileError(filename, f"cannot parse PDF: {exc}") from exc
    return _finish(
        filename,
        _CONTROL.sub("", title or ""),
        MEDIA_PDF,
        tuple(sections),
        empty_reason="no extractable text (scanned PDF?)",
    )


# --------------------------------------------------------------------------------------------
# DOCX
# --------------------------------------------------------------------------------------------

_DOCX_HEADING = re.compile(r"^heading ([1-9])$", re.IGNORECASE)


def _docx_heading_level(paragraph: Any) -> int | None:
    """0 for a "Title" paragraph, 1..9 for "Heading N", None for body text."""
    style = paragraph.style
    name = (getattr(style, "name", None) or "").strip()
    if name.lower() == "title":
        return 0
    match = _DOCX_HEADING.match(name)
    return int(match.group(1)) if match else None


def _docx_paragraph_text(paragraph: Any) -> str:
    lines = (line.strip() for line in str(paragraph.text or "").splitlines())
    return "\n".join(line for line in lines if line)


def _walk_docx(items: Iterable[Any], builder: _SectionBuilder, *, in_table: bool) -> None:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    for item in items:
        if isinstance(item, Paragraph):
            text = _docx_paragraph_text(item)
            level = None if in_table else _docx_heading_level(item)
            if level is None:
                builder.add(text)
            else:
                builder.heading(level, text)
        elif isinstance(item, Table):
            seen: set[Any] = set()
            for row in item.rows:
                for cell in row.cells:
                    if cell._tc in seen:  # merged cells repeat once per grid column
                        continue
                    seen.add(cell._tc)
                    _walk_docx(cell.iter_inner_content(), builder, in_table=True)


def _load_docx(filename: str, data: bytes) -> LoadedDocument:
    builder = _SectionBuilder()
    try:
        from docx import Document

        document = Document(io.BytesIO(data))
        _walk_docx(document.iter_inner_content(), builder, in_table=False)
        sections = builder.sections()
    except Exception as exc:  # BadZipFile, KeyError, PackageNotFoundError, lxml errors ...
        raise CorruptFileError(filename, f"cannot parse DOCX: {exc}") from exc
    return _finish(filename, builder.document_heading, MEDIA_DOCX, sections)


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------

_LOADERS: dict[str, Callable[[str, bytes], LoadedDocument]] = {
    ".md": _load_markdown,
    ".markdown": _load_markdown,
    ".txt": _load_text,
    ".text": _load_text,
    ".html": _load_html,
    ".htm": _load_html,
    ".pdf": _load_pdf,
    ".docx": _load_docx,
}

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_LOADERS)
"""Lower-cased file suffixes :func:`load_document` reads, with the leading dot."""


def load_document(filename: str, data: bytes) -> LoadedDocument:
    """Read one file's bytes into a titled, sectioned :class:`LoadedDocument`.

    Args:
        filename: the file's name (a path is fine); only its lower-cased suffix chooses the
            format, and its stem is the fallback title. Errors name it as their ``field``.
        data: the whole file content.

    Returns:
        The document with at least one non-empty section, in document order.

    Raises:
        UnsupportedFileError: the suffix is not in :data:`SUPPORTED_SUFFIXES`, or a text format
            holds binary content.
        CorruptFileError: the file is empty, cannot be decoded or parsed (bad PDF/DOCX,
            encrypted PDF), or holds no text.

    """
    suffix = PurePath(filename.replace("\\", "/")).suffix.lower()
    loader = _LOADERS.get(suffix)
    if loader is None:
        shown = f"'{suffix}'" if suffix else "(none)"
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise UnsupportedFileError(
            filename, f"unsupported file type {shown}; supported: {supported}"
        )
    if not data.strip():
        raise CorruptFileError(filename, "file is empty")
    return loader(filename, data)
