"""Stop a foreground loop on SIGTERM or SIGINT, and give the signals back afterwards.

The long-running commands (``search2o worker``, ``telegram poll``, ``mattermost listen``,
``slack socket``) wait on a :class:`threading.Event` that a signal sets. The handlers they
install are restored when the loop ends, so the process (or a test calling the command in-process)
keeps the Ctrl-C behaviour it had before: Python's default SIGINT handler raises
``KeyboardInterrupt`` (https://docs.python.org/3/library/signal.html#signal.default_int_handler).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["stop_on_signals"]


@contextmanager
def stop_on_signals(
    signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT),
) -> Iterator[threading.Event]:
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

    previous: dict[int, object] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, on_signal)
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
