"""An incremental parser of ``text/event-stream``, per the WHATWG HTML Living Standard.

"Server-sent events", section 9.2.6 "Interpreting an event stream": the bytes are UTF-8 (a
leading BOM is dropped, invalid sequences become U+FFFD); lines end with CRLF, LF or CR — and
only those, unlike :meth:`str.splitlines`, which would also split on U+2028 or form feed inside
a JSON payload; a line starting with ``:`` is a comment; ``field: value`` loses one space after
the colon; ``data`` lines accumulate joined by LF; ``id`` (without NUL) sets the last event id,
which stays until another ``id`` changes it; ``retry`` (ASCII digits only) sets the
reconnection time; a blank line dispatches the event unless its data is empty; an event not
ended by a blank line when the stream ends is discarded.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from search2o.errors import ProviderError

__all__ = ["SSEDecoder", "ServerSentEvent"]

DEFAULT_MAX_EVENT_CHARS = 16 * 1024 * 1024


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event.

    Attributes:
        event: its type (``message`` when the stream named none).
        data: the joined ``data`` lines (without the final LF).
        id: the last event id at dispatch (``""`` when none was ever set).

    """

    event: str
    data: str
    id: str


class SSEDecoder:
    """Feed bytes as they arrive; get the events they complete.

    Args:
        max_event_chars: the longest line or event data accepted; beyond it the stream is
            refused (a server that never ends a line cannot exhaust memory).

    Attributes:
        retry_ms: the reconnection time the stream set last, or ``None``.

    """

    def __init__(self, max_event_chars: int = DEFAULT_MAX_EVENT_CHARS) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._max = max_event_chars
        self._buffer = ""
        self._started = False
        self._data: list[str] = []
        self._size = 0
        self._type = ""
        self._last_id = ""
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Return the events completed by ``chunk``.

        Raises:
            ProviderError: a line or an event's data is longer than ``max_event_chars``.

        """
        text = self._decoder.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        # The pending text held no line end: search only what is new (a long line arriving in
        # many chunks is scanned once, not once per chunk).
        scan = max(len(self._buffer) - 1, 0)
        self._buffer += text
        events: list[ServerSentEvent] = []
        start, length = 0, len(self._buffer)
        while start < length:
            cr = self._buffer.find("\r", max(start, scan))
            lf = self._buffer.find("\n", max(start, scan))
            ends = [i for i in (cr, lf) if i >= 0]
            if not ends:
                break
            end = min(ends)
            if end == cr and end == length - 1:
                break  # a CR at the end of the chunk may be the first half of CRLF
            step = 2 if end == cr and end + 1 < length and self._buffer[end + 1] == "\n" else 1
            event = self._line(self._buffer[start:end])
            if event is not None:
                events.append(event)
            start = end + step
        self._buffer = self._buffer[start:]
        if len(self._buffer) > self._max:
            raise ProviderError(f"the event stream sent a line over {self._max} characters")
        return events

    def close(self) -> list[ServerSentEvent]:
        """End the stream: a pending CR ends its line; an unfinished event is discarded."""
        events = self.feed(b"")
        rest = self._buffer + self._decoder.decode(b"", final=True)
        self._buffer = ""
        if rest.endswith("\r"):
            event = self._line(rest[:-1])
            if event is not None:
                events.append(event)
        self._data, self._size, self._type = [], 0, ""
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._size += len(value) + 1
            if self._size > self._max:
                raise ProviderError(f"the event stream sent an event over {self._max} characters")
            self._data.append(value)
        elif field == "event":
            self._type = value
        elif field == "id" and "\x00" not in value:
            self._last_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, kind = self._data, self._type
        self._data, self._size, self._type = [], 0, ""
        if not data:
            return None
        return ServerSentEvent(kind or "message", "\n".join(data), self._last_id)
