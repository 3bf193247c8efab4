"""Politeness and faults, shared by every connector: a request rate, retries, Retry-After.

A connector wraps each request to its source in :meth:`Polite.call`:

* at most ``requests_per_s`` calls a second for the source (a token bucket of one);
* :class:`~search2o.connectors.contract.TransientSourceError` (a reset, a timeout, a 5xx) is
  retried up to ``retries`` times with exponential backoff and full jitter (``uniform(0,
  min(30, 0.5 * 2**n))`` s, as tenacity's ``wait_random_exponential`` but drawn from our own
  generator, never the process-wide ``random``; AWS Architecture Blog, "Exponential Backoff And
  Jitter");
* :class:`~search2o.connectors.contract.RetryLaterError` is waited out exactly as asked, never
  less (RFC 9110 section 10.2.3), when the wait is at most ``max_inline_wait_s``; a longer
  wait is raised to the engine, which checkpoints the sync and reschedules it instead of
  holding a worker asleep;
* :class:`~search2o.connectors.contract.CredentialsRejectedError` is tried at most 3 times in all,
  then raised: the engine stops the source.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryCallState, Retrying, wait_exponential

from search2o.connectors.contract import (
    CredentialsRejectedError,
    RetryLaterError,
    TransientSourceError,
)

__all__ = ["CREDENTIAL_TRIES", "Polite"]

T = TypeVar("T")

# Our own generator: the process-wide ``random`` state belongs to whoever embeds us (a seeded
# simulation, a property-based test) and a sync thread must not move it under them.
_JITTER = random.Random()

CREDENTIAL_TRIES = 3
"""Tries of a request whose credentials are rejected before the source is stopped."""


class Polite:
    """Rate, retries and waits for one source's requests (see the module docstring).

    Args:
        requests_per_s: the most calls a second.
        retries: retries of a transient fault (0 = try once).
        max_inline_wait_s: the longest ``Retry-After`` waited out in place.
        sleep: the sleeping function (tests pass a recorder).
        clock: a monotonic clock in seconds.

    """

    def __init__(
        self,
        requests_per_s: float,
        retries: int,
        max_inline_wait_s: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = 1.0 / requests_per_s
        self.retries = retries
        self.max_inline_wait_s = max_inline_wait_s
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._next_at = 0.0
        self.waited_s = 0.0

    def _pace(self) -> None:
        """Wait for this call's turn under ``requests_per_s``."""
        with self._lock:
            now = self._clock()
            start = max(now, self._next_at)
            self._next_at = start + self.interval
        if start > now:
            self._sleep(start - now)

    def _wait(self, state: RetryCallState) -> float:
        """Seconds before the next attempt: Retry-After as asked, else backoff with jitter."""
        error = state.outcome.exception() if state.outcome is not None else None
        if isinstance(error, RetryLaterError):
            return error.after_s
        return _JITTER.uniform(0, float(wait_exponential(multiplier=0.5, max=30)(state)))

    def _retry(self, state: RetryCallState) -> bool:
        """Whether the failed attempt of ``state`` is worth another."""
        error = state.outcome.exception() if state.outcome is not None else None
        tries = state.attempt_number
        if isinstance(error, RetryLaterError):
            return error.after_s <= self.max_inline_wait_s and tries <= self.retries
        if isinstance(error, CredentialsRejectedError):
            return tries < CREDENTIAL_TRIES
        return isinstance(error, TransientSourceError) and tries <= self.retries

    def _slept(self, seconds: float) -> None:
        self.waited_s += seconds
        self._sleep(seconds)

    def call(self, request: Callable[[], T]) -> T:
        """Run ``request`` politely and return its result.

        Raises:
            RetryLaterError: the source asked for a wait longer than ``max_inline_wait_s``, or
                kept asking past ``retries``.
            CredentialsRejectedError: rejected :data:`CREDENTIAL_TRIES` times.
            TransientSourceError: still failing after ``retries`` retries.
            SourceError: any other fault of the source, at once.

        """

        def attempt() -> T:
            self._pace()
            return request()

        retrying = Retrying(retry=self._retry, wait=self._wait, sleep=self._slept, reraise=True)
        return retrying(attempt)
