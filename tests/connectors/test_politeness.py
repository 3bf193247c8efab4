"""Politeness and faults: request rate, retries with backoff, Retry-After, rejected credentials."""

from __future__ import annotations

import pytest

from search2o.connectors.contract import (
    CredentialsRejectedError,
    RetryLaterError,
    SourceError,
    TransientSourceError,
)
from search2o.connectors.politeness import Polite


class Clock:
    """A fake monotonic clock that sleeping advances; it records every sleep."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def failing(*errors: Exception, result: str = "ok") -> tuple[list[int], object]:
    calls: list[int] = []

    def request() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    return calls, request


def polite(clock: Clock, **options: float) -> Polite:
    return Polite(
        options.get("rate", 1000.0),
        int(options.get("retries", 4)),
        options.get("max_wait", 30.0),
        sleep=clock.sleep,
        clock=clock,
    )


def test_retry_after_is_waited_exactly_and_never_undercut() -> None:
    clock = Clock()
    calls, request = failing(RetryLaterError(7.5), RetryLaterError(2))
    assert polite(clock).call(request) == "ok"  # type: ignore[arg-type]
    assert len(calls) == 3
    assert [s for s in clock.sleeps if s >= 1] == [7.5, 2]


def test_a_long_retry_after_is_raised_for_the_engine_to_reschedule() -> None:
    clock = Clock()
    calls, request = failing(RetryLaterError(3600))
    with pytest.raises(RetryLaterError) as raised:
        polite(clock, max_wait=30).call(request)  # type: ignore[arg-type]
    assert raised.value.after_s == 3600 and len(calls) == 1 and sum(clock.sleeps) < 1


def test_transient_faults_back_off_with_jitter_then_give_up() -> None:
    clock = Clock()
    calls, request = failing(*(TransientSourceError("reset") for _ in range(10)))
    with pytest.raises(TransientSourceError):
        polite(clock, retries=3).call(request)  # type: ignore[arg-type]
    assert len(calls) == 4  # the first try and 3 retries
    waits = [s for s in clock.sleeps if s > 0.002]
    assert len(waits) <= 3 and all(0 <= w <= 30 for w in waits)
    clock = Clock()
    calls, request = failing(TransientSourceError("503"), TransientSourceError("reset"))
    assert polite(clock).call(request) == "ok"  # type: ignore[arg-type]


def test_rejected_credentials_are_tried_three_times_at_most() -> None:
    clock = Clock()
    calls, request = failing(*(CredentialsRejectedError("401") for _ in range(10)))
    with pytest.raises(CredentialsRejectedError):
        polite(clock, retries=10).call(request)  # type: ignore[arg-type]
    assert len(calls) == 3


def test_other_faults_are_not_retried() -> None:
    clock = Clock()
    calls, request = failing(SourceError("404"))
    with pytest.raises(SourceError):
        polite(clock).call(request)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_the_request_rate_is_kept() -> None:
    clock = Clock()
    limiter = polite(clock, rate=4.0)  # one request every 0.25 s
    for _ in range(5):
        limiter.call(lambda: None)
    assert clock.now == pytest.approx(1.0)  # the first at once, then four waits of 0.25 s
