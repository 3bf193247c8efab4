"""The values of conversation state: JSON only (RFC 8259), copied deep; the records' validators.

Every value must be ``None``, ``bool``, ``int``, finite ``float``, ``str``, a list or a dict
with string keys; anything else fails with an :class:`~search2o.errors.InputError` naming the
variable (:func:`check_json`). The forms are in :mod:`search2o.state.model`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from search2o.errors import InputError

__all__ = ["MAX_DEPTH", "STATE_FORMAT", "check_json"]


STATE_FORMAT = 1
"""The version of the JSON forms above; readers refuse any other."""


MAX_DEPTH = 200
"""Deepest nesting of lists and dicts a value may have."""


_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")


_MAX_NAME = 200


def check_json(value: Any, field: str) -> Any:
    """Return a deep copy of ``value`` in plain JSON types, or say why it is not JSON.

    Args:
        value: the value to check.
        field: how the error names it, e.g. ``"conv.total"``.

    Returns:
        The same value built from ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``
        (tuples become lists, ``int``/``float``/``str`` subclasses their base type).

    Raises:
        InputError: ``field`` with reason ``"is not JSON-serialisable: <type>"`` (plus where
            inside the value, e.g. ``(at ['items'][2])``) for a non-JSON type, NaN or infinity,
            a non-string dict key, a value that contains itself, or nesting deeper than
            :data:`MAX_DEPTH`.

    """
    return _copy_json(value, field, "", set(), 0)


def _not_json(field: str, what: str, path: str) -> InputError:
    where = f" (at {path})" if path else ""
    return InputError(field, f"is not JSON-serialisable: {what}{where}")


def _copy_json(value: Any, field: str, path: str, seen: set[int], depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _not_json(field, f"float {value!r}", path)
        return float(value)
    if isinstance(value, dict | list | tuple):
        if depth >= MAX_DEPTH:
            raise _not_json(field, f"nested deeper than {MAX_DEPTH} levels", path)
        if id(value) in seen:
            raise _not_json(field, "it contains itself", path)
        seen.add(id(value))
        try:
            if isinstance(value, dict):
                out: dict[str, Any] = {}
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise _not_json(field, f"dict key of type {type(key).__name__}", path)
                    out[str(key)] = _copy_json(item, field, f"{path}[{key!r}]", seen, depth + 1)
                return out
            return [
                _copy_json(item, field, f"{path}[{i}]", seen, depth + 1)
                for i, item in enumerate(value)
            ]
        finally:
            seen.discard(id(value))
    raise _not_json(field, type(value).__name__, path)


def _text(value: Any, field: str, *, limit: int | None = _MAX_NAME, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InputError(field, f"must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise InputError(field, "must not be empty")
    if limit is not None and len(value) > limit:
        raise InputError(field, f"must be at most {limit} characters")
    return value


def _optional_text(value: Any, field: str) -> str | None:
    return None if value is None else _text(value, field, limit=None, empty=True)


def _variable(name: Any, field: str) -> str:
    if not isinstance(name, str) or not _VARIABLE.fullmatch(name):
        raise InputError(
            field, f"{name!r} is not a variable name (a letter or _, then letters, digits, _)"
        )
    return name


def _mapping(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(field, f"must be an object, got {type(value).__name__}")
    return value


def _sequence(value: Any, field: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise InputError(field, f"must be a list, got {type(value).__name__}")
    return list(value)


def _check_format(data: dict[str, Any], field: str) -> None:
    fmt = data.get("format", STATE_FORMAT)
    if fmt != STATE_FORMAT:
        raise InputError(f"{field}.format", f"must be {STATE_FORMAT}, got {fmt!r}")
