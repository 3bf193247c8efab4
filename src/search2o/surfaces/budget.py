"""A sliding-window budget of calls per key, shared by every answer of a process.

Messengers limit how often a bot may write to one place: Slack's ``chat.update`` per
workspace (a Tier 3 method, about 50 a minute; Slack API docs, "Rate limits"), Telegram's
messages per group (about 20 a minute; Bot API FAQ, "My bot is hitting limits"). Every answer
in flight takes a slot of the place's budget before each call: an intermediate edit that finds
none is skipped (:meth:`CallBudget.try_take`), the final text waits for room
(:meth:`CallBudget.take`); a rate-limit answer pauses the whole key (:meth:`CallBudget.pause`).
"""

from __future__ import annotations

import math
import threading
import time

__all__ = ["CallBudget"]


class _Slot:
    """One call's place in a budget: held from the take until the call ends, then a window."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended = math.inf  # in flight: it counts until it ends

    def done(self) -> None:
        self.ended = time.monotonic()


class CallBudget:
    """At most ``budget`` calls per ``window_s`` seconds, per key (a workspace, a chat).

    A call holds its slot from before it is sent until ``window_s`` after its answer came
    back, so however long the requests travel, the service never receives more than ``budget`` of
    them within any ``window_s`` (as the service counts them, on arrival). Thread-safe; one instance
    per process, shared by all answers.
    """

    def __init__(self, budget: int, window_s: float) -> None:
        self.budget = budget
        self.window_s = window_s
        self._slots: dict[str, list[_Slot]] = {}
        self._paused: dict[str, float] = {}
        self._lock = threading.Lock()

    def pause(self, key: str, seconds: float) -> None:
        """Send no call of ``key`` for ``seconds`` (the service said to wait)."""
        with self._lock:
            until = time.monotonic() + seconds
            self._paused[key] = max(self._paused.get(key, 0.0), until)

    def _wait(self, key: str, now: float) -> float:
        """Seconds until a call fits (0: now); forgets the slots whose window passed."""
        slots = [s for s in self._slots.get(key, []) if s.ended > now - self.window_s]
        self._slots[key] = slots
        paused = self._paused.get(key, 0.0) - now
        if len(slots) < self.budget:
            return max(paused, 0.0)
        return max(min(s.ended for s in slots) + self.window_s - now, paused)

    def try_take(self, key: str) -> _Slot | None:
        """Take a slot of ``key``'s budget if there is room now (``None``: there is not)."""
        with self._lock:
            if self._wait(key, time.monotonic()) > 0:
                return None
            slot = _Slot()
            self._slots[key].append(slot)
            return slot

    def take(self, key: str) -> _Slot:
        """Take a slot of ``key``'s budget, waiting for room; call ``done()`` when sent."""
        while True:
            with self._lock:
                wait = self._wait(key, time.monotonic())
                if wait <= 0:
                    slot = _Slot()
                    self._slots[key].append(slot)
                    return slot
            time.sleep(min(wait, 0.25) + 0.001)
