"""Server-Sent Events of a run, with event ids, heartbeats and disconnects that change nothing.

Each event is one SSE frame, ``id: <number>``, ``event: <kind>``, ``data: <json>`` (WHATWG HTML
Living Standard, "Server-sent events": a blank line ends an event, lines starting with ``:`` are
comments). The ``id`` is the event's number in its run, so a client that reconnects sends it
back as ``Last-Event-ID`` (``GET /v1/runs/{id}/events``) and gets every later event once.

The run is written by its own task (:mod:`search2o.chat.service`); this response only follows
it. While no event arrives for ``heartbeat_s`` seconds it sends an SSE comment
(``: keep-alive``) so proxies keep the connection open. When the client disconnects the
response stops following; the answer goes on and can be followed again or stopped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from search2o.events import Event, error_event

__all__ = ["SSE_HEADERS", "encode_event", "stream_events"]

SSE_HEADERS = {
    "Cache-Control": "no-cache",
    # nginx buffers proxied responses unless told not to (nginx docs, proxy_buffering).
    "X-Accel-Buffering": "no",
}
_DONE = object()


def encode_event(event: Event, number: int | None = None) -> bytes:
    """Return one SSE frame: ``id`` (when numbered), ``event`` and ``data`` lines, a blank line."""
    data = json.dumps(event.data, ensure_ascii=False, default=str)
    head = f"id: {number}\n" if number is not None else ""
    return f"{head}event: {event.kind}\ndata: {data}\n\n".encode()


async def stream_events(
    events: AsyncIterator[tuple[int, Event]], heartbeat_s: float
) -> AsyncIterator[bytes]:
    """Yield SSE frames for numbered ``events``, with heartbeats while they are silent."""
    queue: asyncio.Queue[object] = asyncio.Queue()

    async def drive() -> None:
        number = 0
        try:
            async for number, event in events:
                queue.put_nowait((number, event))
        except Exception as exc:  # e.g. the database failed while following
            queue.put_nowait((number + 1, error_event(exc)))
        finally:
            queue.put_nowait(_DONE)

    task = asyncio.get_running_loop().create_task(drive())
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=heartbeat_s)
            except TimeoutError:
                yield b": keep-alive\n\n"
                continue
            if item is _DONE:
                return
            assert isinstance(item, tuple)
            yield encode_event(item[1], item[0])
    finally:
        task.cancel()  # stops following; the run itself goes on
