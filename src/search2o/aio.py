"""Running the async engine from synchronous code (the CLI, scripts, tests).

Chat models stream asynchronously (:class:`~search2o.providers.chat.ChatModel`), so a turn is an
async generator. The HTTP server consumes it on its own event loop; everything else goes
through one process-wide background loop (a daemon thread) with :func:`run` and
:func:`iterate`. One long-lived loop, rather than ``asyncio.run`` per call, keeps the
connection pools of async HTTP clients valid between calls (an ``httpx.AsyncClient`` must not
outlive the loop its connections were opened on).

Stopping early is a cancellation, never an abandoned generator: closing the iterator that
:func:`iterate` returns cancels the task that drives the async generator, so its ``finally``
blocks run (a turn stores its partial answer as ``interrupted``) before ``close`` returns.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["aclose", "background_loop", "iterate", "run"]

T = TypeVar("T")
_LOCK = threading.Lock()
_LOOP: asyncio.AbstractEventLoop | None = None
_CLOSE_TIMEOUT_S = 60.0
_POLL_S = 0.2


def background_loop() -> asyncio.AbstractEventLoop:
    """Return the process-wide background event loop, starting its daemon thread on first use."""
    global _LOOP
    with _LOCK:
        if _LOOP is None or _LOOP.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="search2o-aio", daemon=True)
            thread.start()
            _LOOP = loop
        return _LOOP


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and return its result (its exception is raised).

    Raises:
        RuntimeError: called from the background loop itself (that would deadlock).

    """
    loop = background_loop()
    if _on_loop(loop):
        coro.close()
        raise RuntimeError("aio.run called from the background loop; await the coroutine")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


_ITEM, _ERROR, _END = 0, 1, 2


def iterate(events: AsyncIterator[T]) -> Iterator[T]:
    """Iterate the async iterator ``events`` from synchronous code, on the background loop.

    Like a generator, ``events`` advances only when the next item is asked for. Closing the
    returned generator early (``close()``, ``break`` then garbage collection, Ctrl-C) cancels
    the driving task and waits up to 60 s for the async generator's clean-up to finish.

    Raises:
        Whatever ``events`` raises, in the calling thread.
        RuntimeError: called from the background loop itself.

    """
    loop = background_loop()
    if _on_loop(loop):
        raise RuntimeError("aio.iterate called from the background loop; use async for")
    handoff: queue.Queue[tuple[int, Any]] = queue.Queue()
    demand = asyncio.Semaphore(0)  # one release per item asked for: the generator never runs ahead

    async def pump() -> None:
        try:
            while True:
                await demand.acquire()
                try:
                    item = await anext(events)
                except StopAsyncIteration:
                    return
                handoff.put((_ITEM, item))
        except BaseException as exc:  # handed to the consuming thread, cancellation included
            handoff.put((_ERROR, exc))
        finally:
            try:
                await aclose(events)  # runs its clean-up if it was left at a ``yield``
            finally:
                handoff.put((_END, None))

    task_ready: queue.Queue[asyncio.Task[None]] = queue.Queue()
    loop.call_soon_threadsafe(lambda: task_ready.put(loop.create_task(pump())))
    task = task_ready.get()
    finished = False
    try:
        while True:
            loop.call_soon_threadsafe(demand.release)
            kind, value = _next(handoff)
            if kind == _END:
                finished = True
                return
            if kind == _ERROR:
                finished = True
                raise value
            yield value
    finally:
        if not finished:
            loop.call_soon_threadsafe(task.cancel)
            _drain(handoff)


async def aclose(events: AsyncIterator[Any]) -> None:
    """Close ``events`` if it is an async generator (a no-op once it has finished)."""
    close = getattr(events, "aclose", None)
    if close is not None:
        await close()


def _next(handoff: queue.Queue[tuple[int, Any]]) -> tuple[int, Any]:
    """Wait for the pump's next message in short waits, so Ctrl-C is handled promptly.

    A signal that lands on another thread only sets Python's flag; the main thread acts on it
    when it next runs bytecode, which a wait without timeout would postpone indefinitely.
    """
    while True:
        try:
            return handoff.get(timeout=_POLL_S)
        except queue.Empty:
            continue


def _drain(handoff: queue.Queue[tuple[int, Any]]) -> None:
    """Wait for the pump's end marker after a cancellation (its clean-up has then run)."""
    while True:
        try:
            kind, _ = handoff.get(timeout=_CLOSE_TIMEOUT_S)
        except queue.Empty:
            return
        if kind == _END:
            return


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
