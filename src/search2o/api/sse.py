"""Server-Sent Events from a blocking turn generator, with heartbeats and disconnect handling.

The turn runs in a worker thread (it calls the database, the embedder and the model, all
blocking) and hands events to the response through an :class:`asyncio.Queue`. While no event
arrives for ``heartbeat_s`` seconds the response sends an SSE comment (``: keep-alive``) so
proxies keep the connection open. When the client disconnects, the worker stops at the next
event and closes the generator, which stores the partial answer (see
:mod:`search2o.query.turn`). Wire format: WHATWG HTML Living Standard, "Server-sent events"
(``event:``/``data:`` lines, a blank line ends an event, lines starting with ``:`` are comments).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator

from search2o.errors import Search2oError
from search2o.query.turn import TurnEvent

__all__ = ["SSE_HEADERS", "encode_event", "stream_events"]

SSE_HEADERS = {
    "Cache-Control": "no-cache",
    # nginx buffers proxied responses unless told not to (nginx docs, proxy_buffering).
    "X-Accel-Buffering": "no",
}
_DONE = object()
log = logging.getLogger("search2o.api")


def encode_event(event: TurnEvent) -> bytes:
    """Return one SSE frame: ``event: <kind>`` and ``data: <json>`` lines, then a blank line."""
    data = json.dumps(event.data, ensure_ascii=False, default=str)
    return f"event: {event.kind}\ndata: {data}\n\n".encode()


async def stream_events(events: Iterator[TurnEvent], heartbeat_s: float) -> AsyncIterator[bytes]:
    """Yield SSE frames for ``events``, produced in a worker thread; see the module docstring."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[object] = asyncio.Queue()
    stop = threading.Event()

    def put(item: object) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is gone (server shutting down)
            stop.set()

    def work() -> None:
        try:
            for event in events:
                if stop.is_set():
                    break
                put(event)
        except Search2oError as exc:  # e.g. the conversation was deleted meanwhile
            put(TurnEvent("error", {"error": type(exc).__name__, "message": exc.message}))
        except Exception:
            log.exception("chat stream failed")
            put(TurnEvent("error", {"error": "InternalError", "message": "internal error"}))
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()  # stores the partial answer when the client left mid-turn
            put(_DONE)

    worker = threading.Thread(target=work, name="chat-turn", daemon=True)
    worker.start()
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=heartbeat_s)
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if item is _DONE:
                return
            assert isinstance(item, TurnEvent)
            yield encode_event(item)
    finally:
        stop.set()
