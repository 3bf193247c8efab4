"""The names surfaces send: surface, workspace, channel, thread, external user id.

One validator for all of them, used by the API, the CLI, the act-as header and the tables:
text rules first (:func:`search2o.textrules.check_text`: not empty, no NUL, no lone surrogate,
bounded), then a character set. The sets are the printable ASCII the platforms use for their
ids — Slack ``T0123ABCD`` / ``U0123ABCD`` / thread ``1700000000.123456`` (Slack API,
"Formatting: timestamps"), Telegram's signed integer chat ids ``-1001234567890`` (Bot API,
"Chat"), Mattermost's 26-character ids — with no space, no control character and no ``/`` (the
names are path segments of ``/v1/surfaces/...``).

* a **surface** is lower case, ``slack``, ``telegram``, ``mattermost``: ``[a-z][a-z0-9_-]``, at
  most 32 characters;
* a **workspace** has no ``:``, so ``user:<workspace>:<external id>`` splits one way only;
* an **external user id**, **channel** or **thread** may hold ``:`` (``@ann:matrix.org``).
"""

from __future__ import annotations

import re
from typing import Any

from search2o.errors import InputError
from search2o.textrules import check_text

__all__ = [
    "ID_PATTERN",
    "MAX_ID_CHARS",
    "MAX_SURFACE_CHARS",
    "MAX_WORKSPACE_CHARS",
    "SURFACE_PATTERN",
    "WORKSPACE_PATTERN",
    "check_external_id",
    "check_surface",
    "check_workspace",
]

MAX_SURFACE_CHARS = 32
MAX_WORKSPACE_CHARS = 100
MAX_ID_CHARS = 200

# As JSON Schema ``pattern`` values (ECMA-262 syntax, which these share with Python's ``re``),
# so the OpenAPI document states the rule the code enforces.
SURFACE_PATTERN = r"^[a-z][a-z0-9_-]*$"
WORKSPACE_PATTERN = r"^[A-Za-z0-9._@+=-]+$"
ID_PATTERN = r"^[A-Za-z0-9._@+=:-]+$"
DEFAULT_CODE_MINUTES = 15
"""How long a link code stays valid unless the request says otherwise (minutes)."""
MAX_CODE_MINUTES = 1440
"""The longest a link code may stay valid (minutes: one day)."""

ACT_AS_HEADER = "X-Search2o-Act-As"
"""The request header a surface token names its principal in."""


def json_rule(pattern: str, max_chars: int) -> dict[str, Any]:
    """Return the JSON Schema of a name: ``pattern`` (ECMA-262), 1 to ``max_chars`` characters."""
    return {"pattern": pattern, "minLength": 1, "maxLength": max_chars}


_SURFACE = re.compile(SURFACE_PATTERN)
_WORKSPACE = re.compile(WORKSPACE_PATTERN)
_ID = re.compile(ID_PATTERN)


def _check(value: object, field: str, pattern: re.Pattern[str], max_chars: int, rule: str) -> str:
    if not isinstance(value, str):
        raise InputError(field, f"must be a string, got {type(value).__name__}")
    # Outer whitespace is not trimmed: an id is compared byte for byte, so " T1" is refused
    # by the character set instead of silently meaning "T1".
    text = check_text(value, field, max_chars=max_chars, strip=False)
    if pattern.fullmatch(text) is None:
        # Shown escaped: the value may hold terminal controls (ESC) that a CLI would print.
        raise InputError(field, f"{rule} (got {text[:60]!a})")
    return text


def check_surface(value: object, field: str = "surface") -> str:
    """Return ``value`` if it is a surface name, e.g. ``slack``.

    Raises:
        InputError: empty, longer than 32 characters, or not ``[a-z][a-z0-9_-]*``.

    """
    return _check(
        value,
        field,
        _SURFACE,
        MAX_SURFACE_CHARS,
        "must be a lower-case surface name: a letter, then letters, digits, '_' or '-'",
    )


def check_workspace(value: object, field: str = "workspace") -> str:
    """Return ``value`` if it is a workspace id, e.g. ``T0123ABCD``.

    Raises:
        InputError: empty, longer than 100 characters, or characters other than letters,
            digits and ``. _ @ + = -``.

    """
    return _check(
        value,
        field,
        _WORKSPACE,
        MAX_WORKSPACE_CHARS,
        "must be letters, digits and . _ @ + = - only",
    )


def check_external_id(value: object, field: str) -> str:
    """Return ``value`` if it is an external user, channel or thread id, e.g. ``U0123ABCD``.

    Raises:
        InputError: empty, longer than 200 characters, or characters other than letters,
            digits and ``. _ @ + = : -``.

    """
    return _check(
        value,
        field,
        _ID,
        MAX_ID_CHARS,
        "must be letters, digits and . _ @ + = : - only",
    )
