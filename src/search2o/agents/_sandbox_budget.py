"""The budget of one evaluation: steps used, the deadline, and the charges every guard makes.

The estimates are the logical sizes and hash groups of :mod:`search2o.agents._sandbox_sizes`;
a guard that would go over a limit stops the evaluation with :func:`_refuse`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from search2o.agents._sandbox_sizes import _check_int_text, _refuse, _Sizes
from search2o.agents._sandbox_values import _SCALARS, _length, _text_size

# How often (in iteration steps) the wall clock is read while a comprehension runs.
_CLOCK_EVERY = 1000


class _Budget:
    """The limits of one evaluation (``SandboxLimits``), its steps so far and its deadline.

    The base of the guards (:class:`~search2o.agents._sandbox_guards._Run`): each charges its
    work here before doing it.
    """

    __slots__ = (
        "deadline",
        "max_bits",
        "max_chars",
        "max_seconds",
        "max_steps",
        "next_check",
        "sizes",
        "steps",
    )

    def __init__(
        self, *, max_steps: int, max_seconds: float, max_chars: int, max_bits: int
    ) -> None:
        self.max_steps = max_steps
        self.max_chars = max_chars
        self.max_bits = max_bits
        self.max_seconds = max_seconds
        self.steps = 0
        self.next_check = min(_CLOCK_EVERY, self.max_steps + 1)
        self.deadline = time.perf_counter() + max_seconds
        self.sizes = _Sizes(max_steps + 1)

    def checkpoint(self) -> None:
        if self.steps > self.max_steps:
            _refuse(
                f"too many steps: more than max_steps={self.max_steps} "
                "(each item iterated and each character or item copied or built is a step)"
            )
        if time.perf_counter() > self.deadline:
            _refuse(f"took longer than max_seconds={self.max_seconds:g} s")
        self.next_check = min(self.steps + _CLOCK_EVERY, self.max_steps + 1)

    def charge(self, steps: int) -> None:
        self.steps += steps
        self.checkpoint()

    def tick(self) -> None:
        """Charge one step per call of a lambda (installed as ``_s2o_tick_``)."""
        self.steps += 1
        if self.steps >= self.next_check:
            self.checkpoint()

    def built(self, size: int, sample: object) -> None:
        """Refuse to build a str/bytes/list of ``size`` items above the limit; else charge it."""
        if size > self.max_chars:
            unit = "characters" if isinstance(sample, (str, bytes, bytearray)) else "items"
            _refuse(
                f"would build a {type(sample).__name__} of {size} {unit}, "
                f"more than max_result_chars={self.max_chars}"
            )
        self.charge(size)

    def check_render(self, value: object) -> None:
        """Refuse to turn a value into text when the text would exceed the limit.

        An int too long to be written as text is refused too (Python would raise).
        """
        if type(value) is int:
            _check_int_text(value)  # type: ignore[arg-type]
            return
        if type(value) in _SCALARS:
            return
        size = _text_size(value, self.max_chars)
        if size > self.max_chars:
            _refuse(
                f"turning a {type(value).__name__} into text would take more than "
                f"max_result_chars={self.max_chars} characters"
            )
        self.charge(size)

    def deep(self, value: object) -> int:
        """Charge the logical size of ``value`` (a hash or comparison walks it); return it.

        One node (a scalar, a short str) is free: such work is O(1).
        """
        size = self.sizes.logical(value)
        if size > 1:
            self.charge(size)
        return size

    def hashed(self, key: object) -> None:
        """Charge for inserting ``key`` into a set or dict: its hash, and its hash group."""
        size = self.deep(key)
        group = self.sizes.hash_group(key)
        if group is not None:
            self.charge(len(group) * size)  # comparing with each key of its group
            self.sizes.join(group, key)

    def scan(self, needle: object, items: Iterable[Any]) -> bool:
        """``needle in items`` item by item, each comparison charged (a deep ``needle``)."""
        size = self.sizes.logical(needle)
        for item in items:
            cost = min(size, self.sizes.logical(item))
            if cost > 1:
                self.charge(cost)
            if item is needle or item == needle:
                return True
        return False

    def check_width(self, digits: str, what: str) -> None:
        if len(digits) > len(str(self.max_chars)) or int(digits) > self.max_chars:
            _refuse(f"{what} {digits} is more than max_result_chars={self.max_chars}")

    def getiter(self, ob: Iterable[object]) -> Iterator[object]:
        """``_getiter_``: iterate ``ob`` charging one step per item."""
        return self._counted(iter(ob))

    def _counted(self, it: Iterator[object]) -> Iterator[object]:
        for item in it:
            self.steps += 1
            if self.steps >= self.next_check:
                self.checkpoint()
            yield item

    def _consume(self, iterable: object) -> None:
        self.charge(_length(iterable))

    def _hashed_items(self, iterable: Any) -> list[Any]:
        self._consume(iterable)
        items = list(iterable)
        for item in items:
            self.hashed(item)
        return items
