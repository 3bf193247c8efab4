"""The HTML loader: ``h1``-``h6`` give heading paths; scripts, styles and navigation are dropped."""

from __future__ import annotations

import re
import warnings
from typing import Any

from search2o.errors import CorruptFileError
from search2o.knowledge.sections import (
    LoadedDocument,
    SectionBuilder,
    finish_document,
    normalise_block,
)
from search2o.knowledge.textdecode import decode_text

__all__ = ["MEDIA_HTML", "load_html"]

MEDIA_HTML = "text/html"
_WS = re.compile(r"\s+")

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
    """Walks a parsed HTML tree in document order, feeding a :class:`SectionBuilder`."""

    def __init__(self, builder: SectionBuilder) -> None:
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
                self._builder.add(normalise_block(child.get_text()))
            elif name in _HTML_BLOCKS:
                self._flush_inline()
                self.walk(child)
                self._flush_inline()
            else:
                self.walk(child)

    def finish(self) -> None:
        self._flush_inline()


def load_html(filename: str, data: bytes) -> LoadedDocument:
    """Read an HTML file; see :func:`search2o.knowledge.loaders.load_document`."""
    text = decode_text(filename, data)
    if not text.strip():
        raise CorruptFileError(filename, "file is empty")
    builder = SectionBuilder()
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
    return finish_document(filename, title, MEDIA_HTML, sections)
