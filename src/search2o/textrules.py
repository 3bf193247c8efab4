"""The one set of rules for text that arrives from outside: messages, queries, names, keys.

Every entry point (HTTP bodies, CLI arguments, agent inputs, surface events) checks user text
with these functions, so a value refused in one place is refused in every other one:

* NUL (U+0000) is refused: PostgreSQL cannot store it in ``text`` or ``jsonb`` columns
  (PostgreSQL docs, "Character Types": "the character with code zero cannot be stored"), and a
  value that one backend refuses must be refused on both, before anything is written.
* Lone surrogates (U+D800..U+DFFF, Unicode category ``Cs``) are refused: they are not Unicode
  scalar values (The Unicode Standard, section 3.9, D76) and cannot be encoded as UTF-8, so
  neither a database nor a JSON encoder with ``ensure_ascii=False`` could write them.

:func:`text_problem` returns the reason as a sentence fragment (for callers that collect
problems, e.g. an agent definition's JSON paths); :func:`check_text` raises
:class:`~search2o.errors.InputError` naming the field.
"""

from __future__ import annotations

import re

from search2o.errors import InputError

__all__ = ["check_text", "strip_nul", "text_problem"]

_INVALID = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Return why ``value`` may not be stored (a NUL or a lone surrogate), or ``None``.

    Linear in ``len(value)``; the regular expression is a single character class, so it cannot
    backtrack.
    """
    found = _INVALID.search(value)
    if found is None:
        return None
    position = found.start()
    if found.group() == "\x00":
        return f"must not contain NUL characters (one at position {position})"
    return f"is not valid Unicode (a lone surrogate code point at position {position})"


def check_text(
    value: str,
    field: str,
    *,
    max_chars: int | None = None,
    strip: bool = True,
    allow_empty: bool = False,
    setting: str | None = None,
) -> str:
    """Return ``value`` (stripped of outer whitespace unless ``strip`` is false) if it is valid.

    Args:
        value: the text as received.
        field: the name the error uses (``message``, ``query``, ``inputs.city``).
        max_chars: the longest accepted text, in code points, counted as received (before
            stripping), as the API document's ``maxLength`` counts it.
        strip: remove outer whitespace first.
        allow_empty: accept an empty (or all-whitespace) text.
        setting: the setting that holds ``max_chars``, named in the error
            (``chat.max_message_chars``).

    Raises:
        InputError: ``field`` is empty, longer than ``max_chars``, holds a NUL or a lone
            surrogate; nothing was changed.

    """
    text = value.strip() if strip else value
    if not allow_empty and not text.strip():
        raise InputError(field, "must not be empty")
    problem = text_problem(text)
    if problem is not None:
        raise InputError(field, problem)
    if max_chars is not None and len(value) > max_chars:
        where = f" ({setting})" if setting else ""
        raise InputError(field, f"is {len(value)} characters long; the limit is {max_chars}{where}")
    return text


def strip_nul(value: str) -> str:
    """Return ``value`` without NUL characters (for text extracted from documents)."""
    return value.replace("\x00", "") if "\x00" in value else value
