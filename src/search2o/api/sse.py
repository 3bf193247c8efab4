"""Server-Sent Events from an async turn, with heartbeats and disconnect handling.

The turn (an async generator, :meth:`search2o.query.turn.TurnEngine.run`) is driven by its own
task on the server's event loop and hands events to the response through an
:class:`asyncio.Queue`. While no event arrives for ``heartbeat_s`` seconds the response sends an
SSE comment (``: keep-alive``) so proxies keep the connection open. When the client disconnects,
the response is cancelled and cancels the turn's task, whose clean-up stores the partial answer
(see :mod:`search2o.query.turn`); the task is a separate one so that clean-up is not cancelled
again by the server's cancel scope. Wire format: WHATWG HTML Living Standard, "Server-sent
events" (``event:``/``data:`` lines, a blank line ends an event, lines starting with ``:`` are
comments).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

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


async def stream_events(
    events: AsyncIterator[TurnEvent], heartbeat_s: float
) -> AsyncIterator[bytes]:
    """Yield SSE frames for ``events``, driven by a separate task; see the module docstring."""
    queue: asyncio.Queue[object] = asyncio.Queue()

    async def drive() -> None:
        try:
            async for event in events:
                queue.put_nowait(event)
        except Search2oError as exc:  # e.g. the conversation was deleted meanwhile
            queue.put_nowait(
                TurnEvent("error", {"error": type(exc).__name__, "message": exc.message})
            )
        except Exception:
            log.exception("chat stream failed")
            queue.put_nowait(
                TurnEvent("error", {"error": "InternalError", "message": "internal error"})
            )
        finally:
            queue.put_nowait(_DONE)

    task = asyncio.get_running_loop().create_task(drive())
    _RUNNING.add(task)  # the loop keeps only weak references to tasks
    task.add_done_callback(_RUNNING.discard)
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
        task.cancel()  # a no-op when the turn has ended


_RUNNING: set[asyncio.Task[None]] = set()
