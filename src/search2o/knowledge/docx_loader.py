"""The DOCX loader (python-docx): ``Title`` and ``Heading n`` styles give heading paths."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from typing import Any

from search2o.errors import CorruptFileError
from search2o.knowledge.sections import LoadedDocument, SectionBuilder, finish_document

__all__ = ["MEDIA_DOCX", "load_docx"]

MEDIA_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

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


def _walk_docx(items: Iterable[Any], builder: SectionBuilder, *, in_table: bool) -> None:
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


def load_docx(filename: str, data: bytes) -> LoadedDocument:
    """Read a DOCX; see :func:`search2o.knowledge.loaders.load_document` for the contract."""
    builder = SectionBuilder()
    try:
        from docx import Document

        document = Document(io.BytesIO(data))
        _walk_docx(document.iter_inner_content(), builder, in_table=False)
        sections = builder.sections()
    except Exception as exc:  # BadZipFile, KeyError, PackageNotFoundError, lxml errors ...
        raise CorruptFileError(filename, f"cannot parse DOCX: {exc}") from exc
    return finish_document(filename, builder.document_heading, MEDIA_DOCX, sections)
