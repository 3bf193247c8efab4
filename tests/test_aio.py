"""The bridge from synchronous code to the async engine (:mod:`search2o.aio`)."""

from __future__ import annotations

import _thread
import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from search2o import aio


def test_run_returns_the_result_and_raises_the_error() -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    async def broken() -> None:
        raise ValueError("bad value")

    assert aio.run(double(21)) == 42
    with pytest.raises(ValueError, match="bad value"):
        aio.run(broken())


def test_every_call_uses_one_long_lived_loop() -> None:
    async def loop_id() -> int:
        return id(asyncio.get_running_loop())

    assert aio.run(loop_id()) == aio.run(loop_id()) == id(aio.background_loop())
    assert aio.background_loop().is_running()


def test_iterate_advances_only_when_asked() -> None:
    produced: list[int] = []

    async def numbers() -> AsyncIterator[int]:
        for n in range(5):
            produced.append(n)
            yield n

    stream = aio.iterate(numbers())
    assert next(stream) == 0
    assert next(stream) == 1
    assert produced == [0, 1]  # nothing ran ahead of the consumer
    assert list(stream) == [2, 3, 4]


def test_closing_early_runs_the_generators_clean_up_before_returning() -> None:
    cleaned = threading.Event()
    reached: list[str] = []

    async def endless() -> AsyncIterator[int]:
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            await asyncio.sleep(0.05)  # clean-up that awaits, like storing a partial answer
            reached.append("finally")
            cleaned.set()

    stream = aio.iterate(endless())
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    assert cleaned.is_set() and reached == ["finally"]


def test_ctrl_c_while_the_generator_awaits_cancels_it() -> None:
    started = threading.Event()
    outcome: list[str] = []

    async def slow() -> AsyncIterator[str]:
        yield "first"
        try:
            started.set()
            await asyncio.sleep(60)
            yield "never"
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)  # clean-up still awaits after the cancellation
            outcome.append("cancelled")
            raise

    stream = aio.iterate(slow())
    assert next(stream) == "first"
    interrupter = threading.Thread(target=lambda: started.wait(10) and _thread.interrupt_main())
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        next(stream)  # blocked while the generator sleeps; Ctrl-C arrives
    interrupter.join(10)
    assert outcome == ["cancelled"]  # the interrupt waited for the generator's clean-up


def test_errors_reach_the_consumer_with_their_type() -> None:
    async def failing() -> AsyncIterator[int]:
        yield 1
        raise KeyError("missing")

    stream = aio.iterate(failing())
    assert next(stream) == 1
    with pytest.raises(KeyError, match="missing"):
        next(stream)


def test_calling_the_bridge_from_the_loop_itself_is_refused() -> None:
    async def inner() -> str:
        with pytest.raises(RuntimeError, match="background loop"):
            aio.run(asyncio.sleep(0))

        async def empty() -> AsyncIterator[int]:
            if False:
                yield 0

        with pytest.raises(RuntimeError, match="background loop"):
            next(aio.iterate(empty()))
        return "refused"

    assert aio.run(inner()) == "refused"
