"""The rules for the JSON a job carries: its payload (at enqueue) and its result (at the end).

Both are stored in JSON columns on SQLite and PostgreSQL, so a value must be JSON that both
keep the same way: objects with string keys, finite numbers (RFC 8259, section 6: NaN and
Infinity are not JSON), strings without NUL or lone surrogates (:mod:`search2o.textrules`),
nested at most :data:`MAX_DEPTH` deep, and at most a configured number of bytes as compact
UTF-8 JSON.
"""

from __future__ import annotations

import json
from typing import Any

from search2o.errors import InputError
from search2o.textrules import text_problem

__all__ = ["MAX_DEPTH", "check_json"]

MAX_DEPTH = 32
"""Deepest nesting of arrays and objects in a payload or result."""


def check_json(value: Any, field: str, *, max_bytes: int, setting: str | None = None) -> int:
    """Check that ``value`` may be stored as a job's JSON; return its size in bytes.

    Args:
        value: the payload (a dict) or result (any JSON value, ``None`` included).
        field: the name errors use (``payload``, ``result``).
        max_bytes: the bound on the compact UTF-8 encoding.
        setting: the setting holding the bound, named in the error.

    Raises:
        InputError: not JSON (the path of the first bad value is named), too deep, or larger
            than ``max_bytes``.

    """
    _walk(value, field, 0)
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if size > max_bytes:
        where = f" ({setting})" if setting else ""
        raise InputError(field, f"is {size} bytes as JSON, more than {max_bytes}{where}")
    return size


def _walk(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise InputError(path, f"nests deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(path, "must be a finite number (NaN and Infinity are not JSON)")
        return
    if isinstance(value, str):
        problem = text_problem(value)
        if problem:
            raise InputError(path, problem)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputError(path, f"has a key that is not a string: {key!r}")
            problem = text_problem(key)
            if problem:
                raise InputError(path, f"has a key that {problem}")
            _walk(item, f"{path}.{key}", depth + 1)
        return
    raise InputError(path, f"is a {type(value).__name__}, which is not JSON")
