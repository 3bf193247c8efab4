"""The one sanitiser for text shown on a terminal: control characters made visible and inert.

Stored titles, document text, file names, emails and answers may hold ECMA-48 control
functions (ECMA-48, 5th edition, sections 5 and 8): ``ESC [2J`` clears the screen, ``ESC ]0;..
BEL`` retitles the window, the C1 control U+009B starts a sequence on terminals that read 8-bit
controls. Everything the CLI prints and every plain-text log line goes through
:func:`printable`; :func:`has_controls` is the test for values refused at input (emails,
display names, token names).
"""

from __future__ import annotations

import re

__all__ = ["has_controls", "printable"]

# C0 controls but tab and newline, DEL, and the C1 controls U+0080..U+009F.
_CONTROL_CODES = [c for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c not in (0x09, 0x0A)]
_REPLACE = dict.fromkeys(_CONTROL_CODES, "\ufffd")
_CONTROLS = re.compile("[" + "".join(f"\\x{c:02x}" for c in _CONTROL_CODES) + "]")


def printable(text: str) -> str:
    """Return ``text`` with each terminal control character replaced by U+FFFD.

    Tab and newline are kept (layout, not control functions); linear in ``len(text)``.
    """
    return text.translate(_REPLACE)


def has_controls(text: str) -> bool:
    """Return whether ``text`` holds a character :func:`printable` would replace."""
    return _CONTROLS.search(text) is not None
