"""Field rules every wire model shares: user text, and the bound of an id or offset."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, StrictInt

__all__ = [
    "EMAIL_PATTERN",
    "GROUP_PATTERN",
    "INT32_MAX",
    "NAME_PATTERN",
    "PATH_PATTERN",
    "TEXT_PATTERN",
    "JsonInt",
    "at_least_one",
    "text_field",
]

INT32_MAX = 2_147_483_647
"""The largest id or offset a query may carry (PostgreSQL ``integer``; also SQLite's bound)."""

TEXT_PATTERN = r"^[^\u0000]*\S[^\u0000]*$"
"""Text that is not blank and holds no NUL (ECMA-262 syntax, as JSON Schema's ``pattern``)."""

# The patterns below document rules the engines check with their own messages. Each reads the
# same in ECMA-262 (JSON Schema) and Python's ``re`` (no ``\s``, no ``\w``), and the engines
# check with these very patterns or the same rule, so what the document allows the server
# accepts: tests/test_wire_patterns.py.

# Controls (C0, DEL, C1) and, with them, white space (ECMA-262's ``\s`` and Python's
# ``str.isspace``, spelled out), as the inside of a character class. Lone surrogates, which
# the engines refuse too, are left out: a class with a surrogate range is read differently by
# the tools that generate values from the document (the rule then goes unread).
_CONTROLS = r"\u0000-\u001f\u007f-\u009f"
_SPACES = r" \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_NOT_IN_EMAIL = rf"[^@{_CONTROLS}{_SPACES}]"
EMAIL_PATTERN = rf"^{_NOT_IN_EMAIL}+@{_NOT_IN_EMAIL}+$"
"""``name@domain`` without spaces (ECMA-262's ``\\s`` spelled out), C0/C1 controls or DEL;
:func:`search2o.accounts.normalize_email` checks it after trimming, at most 320 characters."""

GROUP_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
"""A group name (:func:`search2o.accounts.normalize_groups` checks it, after trimming)."""

PATH_PATTERN = rf"^[^{_CONTROLS}]*[^{_CONTROLS}{_SPACES}][^{_CONTROLS}]*$"
"""A file name or upload path: not blank, no control character
(:func:`search2o.api.uploads.check_name` checks it, after trimming)."""

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
"""An agent name or a memory label as the document states it: the ASCII part of the engine's
rule, ``\\w[\\w.-]*`` with Python's Unicode ``\\w`` (:mod:`search2o.memory.changes`), so
every name the document allows is accepted; lengths are the fields'."""


def _integral(value: Any) -> Any:
    """Return an integral float (``76.0``) as its int; anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonInt = Annotated[StrictInt, BeforeValidator(_integral)]
"""An integer as JSON Schema reads ``"type": "integer"`` (2020-12, section 6.1.1 of the
validation vocabulary: a number with a zero fractional part): ``76`` and ``76.0`` are accepted,
``"76"``, ``true`` and ``76.5`` refused."""


def at_least_one(types: dict[str, str]) -> dict[str, Any]:
    """Return the JSON Schema "at least one of these fields is given and not null".

    Args:
        types: field name -> its JSON type when given (``"string"``, ``"boolean"``, ...).

    Returns:
        ``{"anyOf": [...]}``, for a model's ``json_schema_extra``: a PATCH body that changes
        nothing is refused by the server, and the document says so.

    """
    return {
        "anyOf": [
            {"required": [name], "properties": {name: {"type": kind}}}
            for name, kind in types.items()
        ]
    }


def text_field(description: str, **kwargs: Any) -> Any:
    """Return a ``Field`` for user text, documented as non-blank without NUL.

    The rule is enforced by :func:`search2o.textrules.check_text` where the text is used, whose
    errors name the field and the rule; the pattern only documents it.
    """
    return Field(description=description, json_schema_extra={"pattern": TEXT_PATTERN}, **kwargs)
