"""Foreground loops stop on a signal and give the handlers back (:mod:`search2o.stop_signals`)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from search2o.stop_signals import stop_on_signals


def test_a_signal_sets_the_event_and_the_old_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with stop_on_signals() as stop:
        assert signal.getsignal(signal.SIGINT) is not before[1]
        assert not stop.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_the_handlers_come_back_when_the_loop_raises() -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(RuntimeError, match="loop broke"), stop_on_signals((signal.SIGINT,)):
        raise RuntimeError("loop broke")
    assert signal.getsignal(signal.SIGINT) is before


def test_only_the_named_signals_are_caught() -> None:
    before = signal.getsignal(signal.SIGINT)
    with stop_on_signals((signal.SIGTERM,)):
        assert signal.getsignal(signal.SIGINT) is before  # Ctrl-C still raises KeyboardInterrupt


def test_outside_the_main_thread_it_is_refused_and_changes_nothing() -> None:
    before = signal.getsignal(signal.SIGTERM)
    errors: list[BaseException] = []

    def attempt() -> None:
        try:
            with stop_on_signals():
                pass
        except ValueError as error:
            errors.append(error)

    worker = threading.Thread(target=attempt)
    worker.start()
    worker.join(5)
    assert len(errors) == 1 and "main thread" in str(errors[0])
    assert signal.getsignal(signal.SIGTERM) is before
