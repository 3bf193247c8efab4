"""Time-aware ranking: a question asking *when* prefers memories that say when, relative to them.

A memory is written on a date (a session, a message) and often places its event relative to
that date: "I went to a support group yesterday", "we are going camping next month", "ten
years ago". A question about the time of an event ("When did ...?", "How long ago ...?") shares
the event's words with such a memory but not the time words, which are the answer; a lexical
or semantic match alone cannot prefer the memory that carries a time. So, for a question that
asks for a time, memories holding a relative time expression get a small bonus
(:data:`BOOST`, added to the score). Absolute dates are left to the lexical channel: a
question naming "May 2023" already shares those words with the memories of that month.

English only (the question patterns and the word list); other languages rank as before.
Measured on LoCoMo (``bench/memory_locomo.py``, temporal category, ``docs/memory.md``).
"""

from __future__ import annotations

import re
from functools import cache

from search2o.memory.lexical import terms

__all__ = ["BOOST", "TIME_WORDS", "asks_when", "time_terms"]

BOOST = 0.1
"""Added to the score of a memory holding a time word when the question asks for a time.

Chosen on 3 of LoCoMo's 7 conversations among 0.03, 0.06 and 0.1 and checked on the other 4
(``docs/memory.md``); a tenth of the cosine scale, so it reorders near-ties and never lifts an
unrelated memory above a related one.
"""

# Relative time expressions and the words they are made of (weekdays, parts of the day);
# stemmed like the memories' own terms before hashing.
TIME_WORDS = (  # noqa: SIM905 - a word list reads better as text
    "yesterday today tonight tomorrow ago last next week weeks weekend month months year years "
    "recently lately earlier soon later since morning afternoon evening night "
    "monday tuesday wednesday thursday friday saturday sunday"
).split()

_ASKS_WHEN = re.compile(
    r"^\W*(when|since when|how long|what (year|month|day|date|time|week)|"
    r"which (year|month|day|date|week)|on what (day|date))\b",
    re.IGNORECASE,
)


def asks_when(question: str) -> bool:
    """Return whether ``question`` asks for a time ("When did ...", "How long ago ...")."""
    return _ASKS_WHEN.search(question) is not None


@cache
def time_terms() -> tuple[str, ...]:
    """Return the distinct terms of :data:`TIME_WORDS`, made as a memory's terms are."""
    return tuple(dict.fromkeys(terms(" ".join(TIME_WORDS))))
