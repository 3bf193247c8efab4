"""Stop a long-running command on SIGTERM or SIGINT at any moment, and give the signals back.

Two tools, one rule: a stop signal is never lost.

- :func:`stop_on_signals`: a foreground loop (``search2o worker``, ``telegram poll``,
  ``mattermost listen``, ``slack socket``) waits on a :class:`threading.Event` that a signal
  sets.
- :func:`stop_guard`: held from the first line of a command that starts a server (``serve``,
  ``worker``). While the command starts, a signal ends the start where it is by raising
  :class:`StartupStopped` in the main thread (as Python's default SIGINT handler raises
  ``KeyboardInterrupt``), so migrations, an ``--ingest`` or a model load never keep a stopped
  process alive. Once the command has handed the stop to its server (:meth:`StopGuard.serving`),
  a signal calls the server's stop instead, until the server's own handlers take over. A signal
  that arrives between the two is therefore honoured, whichever instant it lands on; the window
  where a handler that ignored it was installed (and a SIGTERM sent to a starting server was lost
  for good) no longer exists.

The handlers installed are restored when the block ends, so the process (or a test calling the
command in-process) keeps the Ctrl-C behaviour it had before
(https://docs.python.org/3/library/signal.html#signal.default_int_handler). Python runs signal
handlers in the main thread only, between bytecodes, which is where :class:`StartupStopped` is
raised (https://docs.python.org/3/library/signal.html#execution-of-python-signal-handlers).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["StartupStopped", "StopGuard", "stop_guard", "stop_on_signals"]

STOP_SIGNALS: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def _handling(
    signums: tuple[int, ...], handler: Callable[[int, FrameType | None], None]
) -> Iterator[None]:
    """Install ``handler`` for ``signums`` and restore the previous handlers on exit.

    Raises:
        ValueError: not called from the main thread (``signal.signal``'s rule).

    """
    previous: dict[int, object] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, handler)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)  # type: ignore[arg-type]


@contextmanager
def stop_on_signals(signums: tuple[int, ...] = STOP_SIGNALS) -> Iterator[threading.Event]:
    """Yield an event that each signal of ``signums`` sets; restore the old handlers on exit.

    Args:
        signums: the signal numbers to catch; default SIGTERM and SIGINT.

    Yields:
        The event; it is set once any of the signals arrives.

    Raises:
        ValueError: not called from the main thread (``signal.signal``'s rule).

    """
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    with _handling(signums, on_signal):
        yield stop


class StartupStopped(BaseException):
    """A stop signal arrived while a command was starting; raised where the start was.

    A ``BaseException`` like ``KeyboardInterrupt``, so an ``except Exception`` on the way does
    not swallow it. Attributes: ``signum``, the signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name} while starting")
        self.signum = signum


class StopGuard:
    """Where a stop signal goes during a command's life (see the module docstring).

    Attributes:
        received: the number of the first stop signal received, or ``None``.

    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._stop: Callable[[], None] | None = None

    def serving(self, stop: Callable[[], None]) -> None:
        """From now on a stop signal calls ``stop`` (from the main thread) instead of raising.

        ``stop`` must be quick and must not raise: it is run from the signal handler, e.g.
        setting uvicorn's ``Server.should_exit``. Signals a server re-raises when it ends
        (uvicorn's ``capture_signals``) come here too and call ``stop`` again.
        """
        self._stop = stop

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Record the signal, then raise :class:`StartupStopped` or call the stop (the handler).

        Raises:
            StartupStopped: the command has not reached :meth:`serving` yet.

        """
        if self.received is None:
            self.received = signum
        if self._stop is None:
            raise StartupStopped(signum)
        self._stop()


@contextmanager
def stop_guard(signums: tuple[int, ...] = STOP_SIGNALS) -> Iterator[StopGuard]:
    """Hold a :class:`StopGuard` for ``signums``; restore the previous handlers on exit.

    A :class:`StartupStopped` raised inside the block propagates: the command catches it and
    ends as a normal stop.

    Raises:
        ValueError: not called from the main thread (``signal.signal``'s rule).

    """
    guard = StopGuard()
    with _handling(signums, guard.on_signal):
        try:
            yield guard
        finally:
            # The command is ending: a signal while the handlers are put back only records.
            guard.serving(lambda: None)
