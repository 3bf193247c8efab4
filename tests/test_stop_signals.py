"""Foreground loops stop on a signal and give the handlers back (:mod:`search2o.stop_signals`)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from search2o.stop_signals import StartupStopped, stop_guard, stop_on_signals


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


def test_a_signal_while_starting_ends_the_start_where_it_is() -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    reached: list[str] = []
    with pytest.raises(StartupStopped) as stopped, stop_guard() as guard:
        reached.append("started")
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("went on")  # never: the handler raised in the main thread
    assert reached == ["started"]
    assert stopped.value.signum == signal.SIGINT and guard.received == signal.SIGINT
    assert "SIGINT while starting" in str(stopped.value)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_once_serving_a_signal_calls_the_servers_stop_and_is_never_lost() -> None:
    calls: list[str] = []
    with stop_guard() as guard:
        guard.serving(lambda: calls.append("stop"))
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)  # a server that re-raises what it caught lands here
    assert calls == ["stop", "stop"]
    assert guard.received == signal.SIGTERM  # the first one


def test_a_stop_guard_is_not_an_exception_a_start_would_swallow() -> None:
    assert not issubclass(StartupStopped, Exception)
    with pytest.raises(StartupStopped), stop_guard():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between bytecodes of this thread
                pass
        except Exception:  # the point: a broad handler does not catch it
            pytest.fail("StartupStopped was caught as an Exception")
