"""Loaders that turn one uploaded file's bytes into titled, sectioned text.

Every supported format (Markdown, plain text, HTML, PDF, DOCX) is reduced to the same shape, a
:class:`~search2o.knowledge.sections.LoadedDocument` holding
:class:`~search2o.knowledge.sections.Section` objects (see ``sections``). This module reads
plain text and Markdown itself and dispatches the other formats to their loaders
(``html_loader``, ``pdf_loader``, ``docx_loader``) by file suffix.

All failures are reported as :class:`~search2o.errors.UnsupportedFileError` (we do not read this
kind of file) or :class:`~search2o.errors.CorruptFileError` (we should, but cannot); third-party
parser exceptions never escape, they are chained with ``raise ... from exc``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePath

from search2o.errors import CorruptFileError, UnsupportedFileError
from search2o.knowledge.docx_loader import load_docx
from search2o.knowledge.html_loader import load_html
from search2o.knowledge.isolation import parse_in_child
from search2o.knowledge.pdf_loader import load_pdf
from search2o.knowledge.sections import (
    LoadedDocument,
    Section,
    finish_document,
    new_builder,
)
from search2o.knowledge.settings import KnowledgeSettings
from search2o.knowledge.textdecode import decode_text

__all__ = ["ISOLATED_SUFFIXES", "SUPPORTED_SUFFIXES", "LoadedDocument", "Section", "load_document"]

MEDIA_MARKDOWN = "text/markdown"
MEDIA_TEXT = "text/plain"

# --------------------------------------------------------------------------------------------
# Plain text
# --------------------------------------------------------------------------------------------


def _load_text(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    text = decode_text(filename, data)
    builder = new_builder(filename, settings)
    builder.add(text)
    return finish_document(filename, (), MEDIA_TEXT, builder, empty_reason="file is empty")


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


def _load_markdown(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    text = decode_text(filename, data).replace("\r\n", "\n").replace("\r", "\n")
    text = _strip_front_matter(text)
    if not text.strip():
        raise CorruptFileError(filename, "file is empty")

    builder = new_builder(filename, settings)
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
    return finish_document(filename, [builder.document_heading], MEDIA_MARKDOWN, builder)


# --------------------------------------------------------------------------------------------
# Dispatch
# --------------------------------------------------------------------------------------------

_LOADERS: dict[str, Callable[[str, bytes, KnowledgeSettings], LoadedDocument]] = {
    ".md": _load_markdown,
    ".markdown": _load_markdown,
    ".txt": _load_text,
    ".text": _load_text,
    ".html": load_html,
    ".htm": load_html,
    ".pdf": load_pdf,
    ".docx": load_docx,
}

SUPPORTED_SUFFIXES: frozenset[str] = frozenset(_LOADERS)
"""Lower-cased file suffixes :func:`load_document` reads, with the leading dot."""

ISOLATED_SUFFIXES: frozenset[str] = frozenset({".pdf", ".docx"})
"""The formats whose parsers' memory peak is many times the file: large ones are read in a child
process (``knowledge.isolated_parse_bytes``, :mod:`search2o.knowledge.isolation`)."""


def load_document(
    filename: str, data: bytes, settings: KnowledgeSettings | None = None
) -> LoadedDocument:
    """Read one file's bytes into a titled, sectioned :class:`LoadedDocument`.

    Args:
        filename: the file's name (a path is fine); only its lower-cased suffix chooses the
            format, and its stem is the fallback title. Errors name it as their ``field``.
        data: the whole file content.
        settings: the per-document bounds (``max_extracted_chars``, ``max_pages``,
            ``max_unpacked_bytes``, ``max_xml_bytes``, ``max_compression_ratio``,
            ``max_extract_seconds``, ``max_title_chars``); defaults when ``None``. A PDF or
            DOCX of ``isolated_parse_bytes`` or more is parsed in a child process
            (:mod:`search2o.knowledge.isolation`: ``parse_processes``, ``parse_memory_mb``).

    Returns:
        The document with at least one non-empty section, in document order. Titles and
        headings are clean bounded lines, body text holds no control characters but tab and
        newline (see :mod:`search2o.knowledge.textclean`).

    Raises:
        UnsupportedFileError: the suffix is not in :data:`SUPPORTED_SUFFIXES`, or a text format
            holds binary content.
        CorruptFileError: the file is empty, cannot be decoded or parsed (bad PDF/DOCX,
            encrypted PDF, a DOCX part compressed other than by Deflate), or holds no text.
        InputError: the document is over one of the bounds in ``settings``; the reason names
            the setting, e.g. ``"... (knowledge.max_pages)"``; a child parser over
            ``parse_memory_mb`` or its wall-time bound is refused the same way.

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
    settings = settings or KnowledgeSettings()
    if suffix in ISOLATED_SUFFIXES and len(data) >= settings.isolated_parse_bytes:
        return parse_in_child(loader, filename, data, settings)
    return loader(filename, data, settings)
