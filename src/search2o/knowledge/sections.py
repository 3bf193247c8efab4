"""The shape every loader produces: a titled document of sections, and the builder that cuts them.

Every supported format is reduced to a :class:`LoadedDocument` holding :class:`Section`
objects, so the chunker and the index never need to know where text came from. A section is a
run of body text under one heading path; the heading path is what lets a search hit say
*where* in a document it was found. The format loaders (``loaders``, ``html_loader``,
``pdf_loader``, ``docx_loader``) feed a :class:`SectionBuilder` in document order; it is the one
place where document text meets the cleaning rules (:mod:`search2o.knowledge.textclean`) and
the character bound (:class:`~search2o.knowledge.bounds.Budget`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

from search2o.errors import CorruptFileError
from search2o.knowledge.bounds import Budget
from search2o.knowledge.settings import KnowledgeSettings
from search2o.knowledge.textclean import clean_body, clean_line

__all__ = [
    "LoadedDocument",
    "Section",
    "SectionBuilder",
    "finish_document",
    "new_builder",
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
        text: paragraphs separated by ``"\n\n"``; never empty, no leading/trailing whitespace,
            no control characters but tab and newline
            (:func:`~search2o.knowledge.textclean.clean_body`).

    """

    heading_path: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class LoadedDocument:
    """One file's text, split into sections in document order.

    Attributes:
        title: the first H1 / ``<title>`` / DOCX Title (or first Heading 1) / PDF metadata
            title; the file stem when the file has none, ``"untitled"`` when that is empty too.
            One line of at most ``knowledge.max_title_chars`` characters without control
            characters (:func:`~search2o.knowledge.textclean.clean_line`), like every heading.
        media_type: the IANA media type of the format that was read, e.g. ``"text/markdown"``.
        sections: at least one section, in document order.

    """

    title: str
    media_type: str
    sections: tuple[Section, ...]


UNTITLED = "untitled"
_BLANK_RUN = re.compile(r"\n{3,}")


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
    candidate and is left out of heading paths. Later H1s open new top-level paths. Headings
    are cleaned into one bounded line, body text loses its control characters, and every
    character of body text is counted against ``budget``.

    Args:
        budget: the document's budget (its settings give ``max_title_chars``).

    """

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self._max_line = budget.settings.max_title_chars
        self._stack: list[tuple[int, str]] = []
        self._parts: list[str] = []
        self._sections: list[Section] = []
        self.document_heading: str | None = None

    def heading(self, level: int, text: str) -> None:
        """Start a new section under a heading of ``level`` (0..9) with ``text``."""
        text = clean_line(text, self._max_line)
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
        """Append a paragraph (or block) of body text to the current section.

        Raises:
            InputError: the document's text is now over ``knowledge.max_extracted_chars``.

        """
        self.budget.take(len(text))
        if text.strip():
            self._parts.append(clean_body(text))

    def page(self, number: int, text: str) -> None:
        """Add one page of text as its own section with heading path ``("Page <number>",)``.

        Raises:
            InputError: the document's text is now over ``knowledge.max_extracted_chars``.

        """
        self._flush()
        self.budget.take(len(text))
        body = normalise_block(clean_body(text))
        if body:
            self._sections.append(Section(heading_path=(f"Page {number}",), text=body))

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
    titles: Iterable[str | None],
    media_type: str,
    builder: SectionBuilder,
    *,
    empty_reason: str = "no text found",
) -> LoadedDocument:
    """Build the result from ``builder``'s sections and a title.

    The title is the first of ``titles``, then the file stem, that is not empty once cleaned
    into one line (:func:`~search2o.knowledge.textclean.clean_line`); else ``"untitled"``.

    Raises:
        CorruptFileError: no section has text (``empty_reason``).

    """
    sections = builder.sections()
    if not sections:
        raise CorruptFileError(filename, empty_reason)
    limit = builder.budget.settings.max_title_chars
    for candidate in (*titles, stem(filename)):
        title = clean_line(candidate or "", limit)
        if title:
            break
    return LoadedDocument(title=title or UNTITLED, media_type=media_type, sections=sections)


def new_builder(filename: str, settings: KnowledgeSettings | None) -> SectionBuilder:
    """Return a builder with a fresh budget for one document (default settings for ``None``)."""
    return SectionBuilder(Budget(filename, settings or KnowledgeSettings()))
