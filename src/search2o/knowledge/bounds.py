"""What one document's text extraction may cost, counted while it runs.

A file's size says little about what reading it costs: a 400 KB DOCX can hold 100 MiB of XML,
a small PDF can show the same form XObject thousands of times. Each loader therefore checks
the sizes it can see before parsing (ZIP central directory, page count, decoded content
streams) and counts, while extracting, the characters it produced and the CPU time it used.
A document over a bound is refused with :func:`over_bound`'s :class:`~search2o.errors.
InputError`, whose reason names the ``knowledge.*`` setting, and ingestion skips it.
"""

from __future__ import annotations

import time

from search2o.errors import InputError
from search2o.knowledge.settings import KnowledgeSettings

__all__ = ["Budget", "over_bound"]

# Reading the thread CPU clock costs about 1.7 µs (measured on the 2-core development machine);
# once every 256 steps that is under 1 % of even the cheapest step (one lxml event, ~1 µs).
_CLOCK_EVERY = 256


def over_bound(filename: str, setting: str, message: str) -> InputError:
    """Return the error of a document over a bound: ``"<message> (knowledge.<setting>)"``."""
    return InputError(filename, f"{message} (knowledge.{setting})")


class Budget:
    """The characters and CPU time one document's extraction has used so far.

    CPU time is that of the calling thread (``time.thread_time``), so other requests, other
    processes and a busy machine do not count against a document; a loader calls
    :meth:`tick` between small steps of work (a PDF operator, a batch of HTML events).

    Once a bound is passed the budget stays spent: every later :meth:`tick` raises the same
    error again. A parser that swallows an error raised inside one of its callbacks (pypdf
    logs and skips a form XObject that fails) therefore meets it again at the next step.

    Args:
        filename: named as the ``field`` of the errors.
        settings: ``max_extracted_chars`` and ``max_extract_seconds``.

    """

    def __init__(self, filename: str, settings: KnowledgeSettings) -> None:
        self.filename = filename
        self.settings = settings
        self.chars = 0
        self._deadline = time.thread_time() + settings.max_extract_seconds
        self._steps = 0
        self._spent: InputError | None = None

    def take(self, chars: int) -> None:
        """Count ``chars`` more characters of extracted text.

        Raises:
            InputError: the document's text is now over ``knowledge.max_extracted_chars``.

        """
        self.chars += chars
        self.check_chars(0)

    def check_chars(self, pending: int) -> None:
        """Refuse the document if ``pending`` characters not yet taken would pass the bound.

        Raises:
            InputError: over ``knowledge.max_extracted_chars``.

        """
        limit = self.settings.max_extracted_chars
        if self._spent is None and self.chars + pending > limit:
            self._spent = over_bound(
                self.filename, "max_extracted_chars", f"its text is longer than {limit} characters"
            )
        if self._spent is not None:
            raise self._spent

    def tick(self) -> None:
        """Count one step of work; every few steps, compare the thread's CPU time.

        Raises:
            InputError: extraction took longer than ``knowledge.max_extract_seconds``.

        """
        self._steps += 1
        if (
            self._spent is None
            and self._steps % _CLOCK_EVERY == 0
            and time.thread_time() > self._deadline
        ):
            seconds = self.settings.max_extract_seconds
            self._spent = over_bound(
                self.filename,
                "max_extract_seconds",
                f"reading its text took more than {seconds:g} CPU seconds",
            )
        if self._spent is not None:
            raise self._spent
