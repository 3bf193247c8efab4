"""One rule for the texts of every path and query parameter: readable, or a 422 naming it.

A URL carries bytes (RFC 3986, section 2.1); the server reads them as UTF-8 (RFC 3987). A
parameter that is not valid UTF-8 (``/v1/agents/%FF``), or holds a NUL (``?q=%00``,
``/v1/memories/%00/x``), can name nothing the server stores: without this rule such a value
was looked up (404 echoing the NUL, or "not found" for a name that can never exist) or
searched (200 with nothing). Every operation answers it alike: 422, ``InputError`` naming the
parameter and the reason, before anything is read or written.

Installed as a dependency of the whole app (:func:`search2o.api.app.create_app`), so every
route, an extension's included, gets it.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from fastapi import Request

from search2o.errors import InputError
from search2o.textrules import text_problem

__all__ = ["refuse_unreadable_parameters"]

_NOT_UTF8 = "is not valid UTF-8 (a URL's percent-encoded bytes are read as UTF-8, RFC 3987)"


def refuse_unreadable_parameters(request: Request) -> None:
    """Refuse a path or query parameter that is not valid UTF-8 or holds a NUL.

    Raises:
        InputError: field = the parameter's name (``label``, ``q``); nothing was done.

    """
    raw_path = request.scope.get("raw_path")
    path_is_utf8 = raw_path is None or _is_utf8(unquote_to_bytes(raw_path))
    for name, value in request.path_params.items():
        if not isinstance(value, str):
            continue
        if not path_is_utf8 and "\ufffd" in value:  # the server's stand-in for a bad byte
            raise InputError(name, _NOT_UTF8)
        if (problem := text_problem(value)) is not None:
            raise InputError(name, problem)
    for key, value in _query_pairs(request.scope.get("query_string") or b""):
        field = key.decode("utf-8", "replace")
        if not (_is_utf8(key) and _is_utf8(value)):
            raise InputError(field, _NOT_UTF8)
        if b"\x00" in value:
            raise InputError(field, text_problem(value.decode()) or "must not contain NUL")


def _query_pairs(query: bytes) -> list[tuple[bytes, bytes]]:
    """Split a query string into its percent-decoded byte pairs.

    As the WHATWG URL standard parses ``application/x-www-form-urlencoded``: ``&`` separates,
    the first ``=`` splits, ``+`` is a space.
    """
    pairs = []
    for part in query.split(b"&"):
        if not part:
            continue
        key, _, value = part.partition(b"=")
        pairs.append(
            (unquote_to_bytes(key.replace(b"+", b" ")), unquote_to_bytes(value.replace(b"+", b" ")))
        )
    return pairs


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
