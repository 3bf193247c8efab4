"""Decoding the bytes of the text formats (plain text, Markdown, HTML) into a string."""

from __future__ import annotations

import codecs

from search2o.errors import CorruptFileError, UnsupportedFileError

__all__ = ["decode_text"]

_BINARY_SNIFF_BYTES = 8 * 1024


def decode_text(filename: str, data: bytes) -> str:
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
