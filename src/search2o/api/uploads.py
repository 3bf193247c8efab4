r"""File names of uploaded parts, exactly as the client sent them, and the rules they follow.

Starlette's form parser hands over the ``filename`` that python-multipart extracted, which keeps
only the part after the last backslash of a Windows-style name (``C:\docs\a.md`` becomes
``a.md``: a workaround for old browsers that sent full paths). Two different files would then
share one identity and replace each other. :func:`part_filename` reads the part's own
``Content-Disposition`` header instead (RFC 7578, section 4.2; ``filename*`` per RFC 2231 and
RFC 5987 through :mod:`email.message`), so the identity is the whole name.
"""

from __future__ import annotations

import contextlib
import email.message
import unicodedata

from fastapi import UploadFile

from search2o.errors import InputError
from search2o.textrules import check_text

__all__ = ["MAX_NAME_CHARS", "check_name", "part_filename"]

MAX_NAME_CHARS = 1000
"""The longest file name or upload path accepted, in characters (identities are ≤ 2000)."""


def part_filename(upload: UploadFile) -> str:
    """Return the file name of an uploaded part as sent (whole, backslashes kept), stripped.

    Falls back to the parser's ``filename`` when the part's header carries none.
    """
    raw = upload.headers.get("content-disposition")
    if raw:
        # Starlette decodes header bytes as latin-1; clients send UTF-8 names.
        with contextlib.suppress(UnicodeEncodeError, UnicodeDecodeError):
            raw = raw.encode("latin-1").decode("utf-8")
        header = email.message.Message()
        header["content-disposition"] = raw
        name = header.get_filename()
        if name:
            return name.strip()
    return (upload.filename or "").strip()


def check_name(value: str, field: str) -> str:
    """Return a file name or upload path if it may be a document's identity.

    Raises:
        InputError: ``field`` is empty, longer than :data:`MAX_NAME_CHARS`, or holds a NUL, a
            lone surrogate or another control character.

    """
    name = check_text(value, field, max_chars=MAX_NAME_CHARS)
    if any(unicodedata.category(c) == "Cc" for c in name):
        raise InputError(field, "must not contain control characters")
    return name
