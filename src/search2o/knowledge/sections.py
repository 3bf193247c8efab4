"""The shape every loader produces: a titled document of sections, and the builder that cuts them.

Every supported format is reduced to a :class:`LoadedDocument` holding :class:`Section`
objects, so the chunker and the index never need to know where text came from. A section is a
run of body text under one heading path; the heading path is what lets a search hit say
*where* in a document it was found. The format loaders (``loaders``, ``html_loader``,
``pdf_loader``, ``docx_loader``) feed a :class:`SectionBuilder` in document order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from search2o.errors import CorruptFileError

__all__ = [
    "LoadedDocument",
    "Section",
    "SectionBuilder",
    "finish_document",
    "normalise_block",
    "stem",
]


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


_BLANK_RUN = re.compile(r"\n{3,}")
_WS = re.compile(r"\s+")


def normalise_block(text: str) -> str:
    """Normalise newlines, strip trailing spaces per line and collapse blank-line runs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    return _BLANK_RUN.sub("\n\n", "\n".join(lines)).strip()


def stem(filename: str) -> str:
    """Return the file name without directories and suffix (``"a/b/H.md"`` -> ``"H"``)."""
    name = PurePath(filename.replace("\\", "/")).stem
    return name or filename


class SectionBuilder:
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
        """Start a new section under a heading of ``level`` (0..9) with ``text``."""
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
        """Append a paragraph (or block) of body text to the current section."""
        if text.strip():
            self._parts.append(text)

    def _flush(self) -> None:
        text = normalise_block("\n\n".join(self._parts))
        self._parts.clear()
        if text:
            path = tuple(heading for _, heading in self._stack)
            self._sections.append(Section(heading_path=path, text=text))

    def sections(self) -> tuple[Section, ...]:
        """Return every section so far, the current one included, in document order."""
        self._flush()
        return tuple(self._sections)


def finish_document(
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
        title=clean_title or stem(filename), media_type=media_type, sections=sections
    )
