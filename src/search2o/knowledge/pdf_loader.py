"""The PDF loader (pypdf): one section per page, titled by the document information title.

What reading a PDF costs is not its size: pypdf interprets content streams in Python (measured
on the 2-core development machine: 1.4 to 3.4 s per MiB of decoded content), and a few KB of
FlateDecode can decode to a megabyte. So, before any text is extracted, the pages are counted
(``knowledge.max_pages``); before each page, its content streams are decoded and checked
against ``knowledge.max_compression_ratio`` (decoded size over stored size) and, summed over
the pages so far, ``knowledge.max_unpacked_bytes``.
While a page is extracted, every operator (those of form XObjects it shows included) ticks the
document's CPU-time budget and every piece of text counts towards ``knowledge.
max_extracted_chars``, so even a page that shows one form thousands of times stops in time.
pypdf's own limits (pypdf ``Configuration``, ``apply_configuration``) cap every stream it
decodes at ``knowledge.max_unpacked_bytes`` as well.

A page whose content holds no operator that can show text (``Tj``, ``TJ``, ``'``, ``"``,
``Do``) is not interpreted at all; pypdf does the same when no visitor is given.
"""

from __future__ import annotations

import io
import re
from typing import Any

from search2o.errors import CorruptFileError, InputError
from search2o.knowledge.bounds import Budget, over_bound
from search2o.knowledge.sections import LoadedDocument, finish_document, new_builder
from search2o.knowledge.settings import KnowledgeSettings

__all__ = ["MEDIA_PDF", "load_pdf"]

MEDIA_PDF = "application/pdf"

# The operators that can add text (ISO 32000-1, 9.4.3 and 8.8: Do shows a form XObject).
_MAY_SHOW_TEXT = re.compile(rb"T[jJ]|Do|['\"]")


def _content_streams(page: Any) -> list[Any]:
    """Return the page's ``/Contents`` streams, resolved (a stream or an array of them)."""
    from pypdf.generic import ArrayObject, StreamObject

    contents = page.get("/Contents")
    resolved = contents.get_object() if contents is not None else None
    items = list(resolved) if isinstance(resolved, ArrayObject) else [resolved]
    streams = [item.get_object() for item in items if item is not None]
    return [stream for stream in streams if isinstance(stream, StreamObject)]


def _encoded_length(stream: Any) -> int:
    """Return the stored (encoded) size of ``stream`` in bytes, at least 1.

    pypdf drops ``/Length`` from a stream's dictionary once it has read the stream and keeps
    the bytes as stored in ``_data`` (``StreamObject.initialize_from_dictionary``); decoding
    caches its result elsewhere, so ``_data`` stays the encoded bytes.
    """
    raw = getattr(stream, "_data", b"")
    return max(len(raw) if isinstance(raw, bytes) else 0, 1)


class _PageCheck:
    """Checks each page's content streams before its text is extracted."""

    def __init__(self, filename: str, settings: KnowledgeSettings) -> None:
        self._filename = filename
        self._settings = settings
        self.unpacked = 0

    def may_show_text(self, number: int, page: Any) -> bool:
        """Decode page ``number``'s content; refuse it over a bound; say if it can show text.

        Raises:
            InputError: over ``max_compression_ratio`` or ``max_unpacked_bytes``.

        """
        from pypdf.errors import LimitReachedError

        ratio_limit = self._settings.max_compression_ratio
        unpacked_limit = self._settings.max_unpacked_bytes
        may_show = False
        for stream in _content_streams(page):
            try:
                data = stream.get_data()
            except LimitReachedError as exc:
                raise over_bound(
                    self._filename,
                    "max_unpacked_bytes",
                    f"page {number} has a content stream of more than {unpacked_limit} bytes",
                ) from exc
            ratio = len(data) // _encoded_length(stream)
            if ratio > ratio_limit:
                raise over_bound(
                    self._filename,
                    "max_compression_ratio",
                    f"page {number}'s content unpacks to {ratio} times its stored size; "
                    f"the limit is {ratio_limit}",
                )
            self.unpacked += len(data)
            if self.unpacked > unpacked_limit:
                raise over_bound(
                    self._filename,
                    "max_unpacked_bytes",
                    f"its page content unpacks to more than {unpacked_limit} bytes",
                )
            may_show = may_show or _MAY_SHOW_TEXT.search(data) is not None
        return may_show


class _Visitors:
    """pypdf visitors: one ticks the budget per operator, one counts a page's text as shown.

    pypdf hands the visitors every operator and text piece of a page, those of the form
    XObjects it invokes included, so neither time nor text can hide in a form.
    """

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self._shown = 0

    def next_page(self) -> None:
        """Start counting the text of a new page (the builder counts the pages before)."""
        self._shown = 0

    def operator(self, op: Any, args: Any, cm: Any, tm: Any) -> None:
        """``visitor_operand_before``: called before each operator is interpreted."""
        self._budget.tick()

    def text(self, value: Any, cm: Any, tm: Any, font: Any, size: Any) -> None:
        """``visitor_text``: called with each piece of text the page shows."""
        self._shown += len(value)
        self._budget.check_chars(self._shown)


def _open(filename: str, data: bytes) -> Any:
    from pypdf import PasswordType, PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        try:
            result = reader.decrypt("")
        except Exception as exc:  # wrong password, missing AES backend, ...
            raise CorruptFileError(filename, "encrypted PDF") from exc
        if result == PasswordType.NOT_DECRYPTED:
            raise CorruptFileError(filename, "encrypted PDF")
    return reader


def load_pdf(filename: str, data: bytes, settings: KnowledgeSettings) -> LoadedDocument:
    """Read a PDF; see :func:`search2o.knowledge.loaders.load_document` for the contract.

    Raises:
        CorruptFileError: unreadable, encrypted, or no extractable text (a scanned PDF).
        InputError: over ``knowledge.max_pages``, ``max_compression_ratio``,
            ``max_unpacked_bytes``, ``max_extracted_chars`` or ``max_extract_seconds``.

    """
    builder = new_builder(filename, settings)
    check = _PageCheck(filename, settings)
    try:
        from pypdf import apply_configuration, get_configuration

        defaults = get_configuration()
        cap = settings.max_unpacked_bytes
        with apply_configuration(
            zlib_maximum_output_length=min(cap, defaults.zlib_maximum_output_length),
            lzw_maximum_output_length=min(cap, defaults.lzw_maximum_output_length),
            run_length_maximum_output_length=min(cap, defaults.run_length_maximum_output_length),
            array_based_stream_maximum_output_length=min(
                cap, defaults.array_based_stream_maximum_output_length
            ),
        ):
            reader = _open(filename, data)
            pages = reader.pages
            if len(pages) > settings.max_pages:
                raise over_bound(
                    filename,
                    "max_pages",
                    f"it has {len(pages)} pages; the limit is {settings.max_pages}",
                )
            visitors = _Visitors(builder.budget)
            for number, page in enumerate(pages, start=1):
                if not check.may_show_text(number, page):
                    continue
                visitors.next_page()
                page_text = page.extract_text(
                    visitor_operand_before=visitors.operator, visitor_text=visitors.text
                )
                builder.page(number, page_text or "")
            metadata = reader.metadata
            raw_title = metadata.title if metadata is not None else None
            title = raw_title if isinstance(raw_title, str) else None
    except InputError:
        raise
    except Exception as exc:  # pypdf raises many types (PdfReadError, KeyError, ValueError...)
        raise CorruptFileError(filename, f"cannot parse PDF: {exc}") from exc
    return finish_document(
        filename,
        [title],
        MEDIA_PDF,
        builder,
        empty_reason="no extractable text (scanned PDF?)",
    )
