"""One line for a messenger that cannot be reached: ``cannot reach <url>: connection refused``.

The HTTP clients of the messengers (httpx for Telegram and Mattermost, ``slack_sdk``'s urllib
for Slack) wrap the socket's error differently (``httpx.ConnectError`` around an
``OSError``; ``URLError`` with the ``OSError`` as its ``reason``). :func:`cannot_reach` finds
the cause in the chain and says it in words, so ``search2o slack|telegram|mattermost check``
and the job logs print one clear line instead of a bare class name.
"""

from __future__ import annotations

import socket
import ssl

__all__ = ["cannot_reach", "reach_problem"]

_WORDS: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (socket.gaierror, "host not found"),
    (ssl.SSLError, "TLS failed"),
    (TimeoutError, "timed out"),
)


def reach_problem(exc: BaseException) -> str:
    """Return what went wrong reaching a server, in words (else the error's class name).

    Follows ``reason`` (urllib), ``__cause__`` and ``__context__`` up to 8 links deep.
    """
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            break
        for kind, words in _WORDS:
            if isinstance(seen, kind):
                return words
        if "timeout" in type(seen).__name__.lower():  # httpx.ConnectTimeout, ReadTimeout …
            return "timed out"
        reason = getattr(seen, "reason", None)
        if isinstance(reason, BaseException):
            seen = reason
            continue
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


def cannot_reach(url: str, exc: BaseException) -> str:
    """Return ``cannot reach <url>: <problem>``; ``url`` must hold no secret (no token)."""
    return f"cannot reach {url}: {reach_problem(exc)}"
