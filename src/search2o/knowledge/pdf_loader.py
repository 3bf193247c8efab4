"""The PDF loader (pypdf): one section per page, titled by the document information title."""

from __future__ import annotations

import io
import re

from search2o.errors import CorruptFileError
from search2o.knowledge.sections import LoadedDocument, Section, finish_document, normalise_block

__all__ = ["MEDIA_PDF", "load_pdf"]

MEDIA_PDF = "application/pdf"

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def load_pdf(filename: str, data: bytes) -> LoadedDocument:
    """Read a PDF; see :func:`search2o.knowledge.loaders.load_document` for the contract."""
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
            page_text = normalise_block(_CONTROL.sub(" ", page.extract_text() or ""))
            if page_text:
                sections.append(Section(heading_path=(f"Page {number}",), text=page_text))
        metadata = reader.metadata
        raw_title = metadata.title if metadata is not None else None
        title = raw_title if isinstance(raw_title, str) else None
    except CorruptFileError:
        raise
    except Exception as exc:  # pypdf raises many types (PdfReadError, KeyError, ValueError...)
        raise CorruptFileError(filename, f"cannot parse PDF: {exc}") from exc
    return finish_document(
        filename,
        _CONTROL.sub("", title or ""),
        MEDIA_PDF,
        tuple(sections),
        empty_reason="no extractable text (scanned PDF?)",
    )
