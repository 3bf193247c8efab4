"""The DOCX loader (python-docx): ``Title`` and ``Heading n`` styles give heading paths.

A DOCX is a ZIP package (ECMA-376 Part 2, Open Packaging Conventions). Its parts are checked
from the ZIP central directory before anything is decompressed or parsed:

* at most ``_MAX_ENTRIES`` entries, each stored or Deflate-compressed (the only methods the
  package format allows, ECMA-376 Part 2, Annex C);
* no entry over 1 MiB that unpacks to more than ``knowledge.max_compression_ratio`` times its
  compressed size (Apache POI's ``ZipSecureFile`` applies the same ratio, 100, by default);
* all entries together at most ``knowledge.max_unpacked_bytes``, and the XML parts (which
  python-docx parses into a tree, about 7 to 21 bytes of memory per byte of XML, measured)
  at most ``knowledge.max_xml_bytes``.

The sizes come from the central directory, so a lying directory could understate them; but
``zipfile`` stops reading every entry at its declared size and then fails on its CRC, so no
part can unpack to more than the check was told. The XML parser python-docx uses does not
resolve entities (``resolve_entities=False``).

Walking the document costs time linear in its paragraphs and cells: paragraph styles are
resolved through one map built per document (python-docx resolves an unstyled paragraph's
default style by scanning every style, which made 10 MiB of XML take two minutes), and table
cells are read once each as they are in the XML (python-docx's ``row.cells`` repeats a cell
once per grid column it spans, so one cell spanning 2**31 columns would never finish).
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable, Iterable
from typing import Any

from search2o.errors import CorruptFileError, InputError
from search2o.knowledge.bounds import over_bound
from search2o.knowledge.sections import (
    LoadedDocument,
    SectionBuilder,
    finish_document,
    new_builder,
)
from search2o.knowledge.settings import KnowledgeSettings

__all__ = ["MEDIA_DOCX", "load_docx"]

MEDIA_DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

# Real documents have tens to a few thousand parts (one per image, header, footer ...).
_MAX_ENTRIES = 10_000
# Small entries are never refused for their ratio: the totals bound what they can add up to.
_RATIO_GRACE_BYTES = 1 << 20
_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED})
_XML_START_SKIP = b"\xef\xbb\xbf\xff\xfe\x00 \t\r\n"  # byte-order marks, UTF-16 zeros, blanks
_DOCX_HEADING = re.compile(r"^heading ([1-9])$", re.IGNORECASE)


def _is_xml(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    """Whether the entry starts like XML, i.e. whether an XML parser would read it all."""
    with archive.open(info) as handle:
        head = handle.read(64)
    return head.lstrip(_XML_START_SKIP).startswith(b"<")


def _check_package(filename: str, data: bytes, settings: KnowledgeSettings) -> None:
    """Refuse a package whose central directory shows it unpacks beyond the bounds.

    Raises:
        CorruptFileError: not a ZIP archive, or an entry uses another compression method.
        InputError: too many entries, or over ``max_compression_ratio``,
            ``max_unpacked_bytes`` or ``max_xml_bytes``.

    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as exc:
        raise CorruptFileError(filename, f"cannot parse DOCX: {exc}") from exc
    with archive:
        infos = archive.infolist()
        if len(infos) > _MAX_ENTRIES:
            raise InputError(
                filename, f"it has {len(infos)} ZIP entries; a DOCX may have at most {_MAX_ENTRIES}"
            )
        ratio_limit = settings.max_compression_ratio
        for info in infos:
            if info.compress_type not in _METHODS:
                raise CorruptFileError(
                    filename,
                    f"cannot parse DOCX: {info.filename} uses compression method "
                    f"{info.compress_type}; a DOCX uses only stored or Deflate entries",
                )
            ratio = info.file_size // max(info.compress_size, 1)
            if info.file_size > _RATIO_GRACE_BYTES and ratio > ratio_limit:
                raise over_bound(
                    filename,
                    "max_compression_ratio",
                    f"{info.filename} unpacks to {ratio} times its stored size "
                    f"({info.file_size} bytes); the limit is {ratio_limit}",
                )
        total = sum(info.file_size for info in infos)
        if total > settings.max_unpacked_bytes:
            raise over_bound(
                filename,
                "max_unpacked_bytes",
                f"it unpacks to {total} bytes; the limit is {settings.max_unpacked_bytes}",
            )
        try:
            xml = sum(info.file_size for info in infos if _is_xml(archive, info))
        except (zipfile.BadZipFile, RuntimeError, ValueError, OSError) as exc:
            raise CorruptFileError(filename, f"cannot parse DOCX: {exc}") from exc
        if xml > settings.max_xml_bytes:
            raise over_bound(
                filename,
                "max_xml_bytes",
                f"its XML parts unpack to {xml} bytes; the limit is {settings.max_xml_bytes}",
            )


def _heading_levels(document: Any) -> Callable[[Any], int | None]:
    """Return a function giving a paragraph's heading level: 0 Title, 1..9 Heading N, None.

    Resolves styles as python-docx does (no or an unknown style id: the default paragraph
    style) through one map of paragraph style ids built here.
    """
    from docx.enum.style import WD_STYLE_TYPE

    styles = document.styles
    names = {
        style.style_id: style.name or ""
        for style in styles
        if style.type == WD_STYLE_TYPE.PARAGRAPH and style.style_id
    }
    default = styles.default(WD_STYLE_TYPE.PARAGRAPH)
    default_name = (default.name or "") if default is not None else ""
    levels: dict[str, int | None] = {}

    def level(paragraph: Any) -> int | None:
        style_id = paragraph._p.style
        name = names.get(style_id, default_name) if style_id is not None else default_name
        if name not in levels:
            clean = name.strip()
            match = _DOCX_HEADING.match(clean)
            levels[name] = 0 if clean.lower() == "title" else int(match[1]) if match else None
        return levels[name]

    return level


def _paragraph_text(paragraph: Any) -> str:
    lines = (line.strip() for line in str(paragraph.text or "").splitlines())
    return "\n".join(line for line in lines if line)


def _walk(
    items: Iterable[Any],
    builder: SectionBuilder,
    level: Callable[[Any], int | None],
    *,
    in_table: bool,
) -> None:
    from docx.table import Table, _Cell
    from docx.text.paragraph import Paragraph

    for item in items:
        builder.budget.tick()
        if isinstance(item, Paragraph):
            text = _paragraph_text(item)
            heading = None if in_table else level(item)
            if heading is None:
                builder.add(text)
            else:
                builder.heading(heading, text)
        elif isinstance(item, Table):
            for row in item.rows:
                # Each <w:tc> once, as it stands in the XML; a vertically merged cell's
                # continuations are empty and were read with the first row of the merge.
                for tc in row._tr.tc_lst:
                    builder.budget.tick()
                    if tc.vMerge == "continue":
                        continue
                    cell = _Cell(tc, item)
                    _walk(cell.iter_inner_content(), builder, level, in_table=True)


def load_docx(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    """Read a DOCX; see :func:`search2o.knowledge.loaders.load_document` for the contract.

    Raises:
        CorruptFileError: not a readable DOCX package.
        InputError: over one of the package bounds (see the module docstring),
            ``knowledge.max_extracted_chars`` or ``knowledge.max_extract_seconds``.

    """
    _check_package(filename, data, settings)
    builder = new_builder(filename, settings)
    try:
        from docx import Document

        document = Document(io.BytesIO(data))
        _walk(document.iter_inner_content(), builder, _heading_levels(document), in_table=False)
    except InputError:
        raise
    except Exception as exc:  # BadZipFile, KeyError, PackageNotFoundError, lxml errors ...
        raise CorruptFileError(filename, f"cannot parse DOCX: {exc}") from exc
    return finish_document(filename, [builder.document_heading], MEDIA_DOCX, builder)
