r"""The two rules for text taken from documents: one-line text (titles, headings) and body text.

Document text is untrusted. The API is text-only and clients render text as text, so nothing
here escapes or strips markup: ``<script>`` in a title stays those eight characters. What the
rules remove are characters that act on whatever displays the text instead of being read:

* C0 controls (U+0000..U+001F), DEL (U+007F) and C1 controls (U+0080..U+009F), Unicode
  category ``Cc``. NUL cannot be stored by PostgreSQL at all (see :mod:`search2o.textrules`);
  ESC and the 8-bit CSI (U+009B) start terminal escape sequences. Body text keeps tab, line
  feed and carriage return; VT, FF, the information separators U+001C..U+001F, NEL (U+0085)
  and U+2028/U+2029 become line feeds there, because they separate lines or pages.
* In one-line text also the explicit directional embeddings, overrides and isolates
  (U+202A..U+202E, U+2066..U+2069; Unicode Standard Annex #9, section 2): one left open
  reverses the text that follows it wherever a title is shown, and they disguise text
  (Unicode Technical Report #36, section 2.1; "Trojan Source", CVE-2021-42574). The implicit
  marks LRM, RLM and ALM (U+200E, U+200F, U+061C) stay: they only set the direction of
  neighbouring punctuation and are needed to show mixed-direction titles correctly.
* Lone surrogates (U+D800..U+DFFF) become U+FFFD REPLACEMENT CHARACTER: they are not Unicode
  scalar values and no database or JSON encoder can write them (Unicode Standard, 3.9, D76).
  PDF text can carry them when a font's ToUnicode map names half a surrogate pair.

One-line text is also whitespace-normalised (every run of whitespace, line breaks included,
becomes one space; outer whitespace is removed) so a title cannot start a new line in a prompt
or a listing, and bounded in length.
"""

from __future__ import annotations

import re

from search2o.textrules import strip_nul

__all__ = ["ELLIPSIS", "clean_body", "clean_line"]

ELLIPSIS = "\u2026"

_SURROGATE = re.compile("[\ud800-\udfff]")
# NUL goes first, through textrules.strip_nul (its one rule). Removed from one-line text; the
# whitespace controls among C0/C1 are split away afterwards.
_LINE_DROP = re.compile("[\x01-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\u202a-\u202e\u2066-\u2069]")
_BODY_DROP = re.compile("[\x01-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_BODY_BREAK = re.compile("[\x0b\x0c\x1c-\x1f\x85\u2028\u2029]")


def clean_line(value: str, max_chars: int) -> str:
    """Return ``value`` as clean one-line text of at most ``max_chars`` characters.

    Controls and directional overrides are removed, lone surrogates replaced (see the module
    docstring), whitespace runs collapsed to one space. Text longer than ``max_chars`` is cut
    to ``max_chars - 1`` characters, stripped and ended with ``…``. Linear in
    ``len(value)``; every pattern is one character class, so nothing can backtrack.

    Returns:
        The cleaned text; ``""`` when nothing printable is left.

    """
    text = strip_nul(value)
    text = _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text
    text = " ".join(_LINE_DROP.sub("", text).split())
    if len(text) > max_chars:
        text = text[: max_chars - 1].rstrip() + ELLIPSIS
    return text


def clean_body(value: str) -> str:
    r"""Return body text without control characters other than ``\t``, ``\n`` and ``\r``.

    Line- and page-separating controls become ``\n``, the others are removed, lone surrogates
    become U+FFFD; see the module docstring. Linear in ``len(value)``.
    """
    text = strip_nul(value)
    text = _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text
    return _BODY_DROP.sub("", _BODY_BREAK.sub("\n", text))
