"""``bridge.aio.stop`` ends a task (and ``next_within`` a read) even when a cancel is swallowed,
as Python 3.11's ``asyncio.wait_for`` does when a reply lands together with the cancel (what
redis-py awaits)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from bridge.aio import next_within, stop


async def _swallows_first_cancel(done: list[str]) -> None:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        done.append("swallowed")  # carries on, as a task hit by gh-86296 would
    await asyncio.Event().wait()


async def test_a_single_cancel_is_not_enough_for_such_a_task() -> None:
    done: list[str] = []
    task = asyncio.create_task(_swallows_first_cancel(done))
    await asyncio.sleep(0)
    task.cancel()
    finished, _ = await asyncio.wait({task}, timeout=0.3)
    assert not finished and done == ["swallowed"]  # what a bare cancel-and-await would hang on
    assert await stop(task) is None
    assert task.cancelled()


async def test_stop_ends_it_and_reports_failures() -> None:
    done: list[str] = []
    task = asyncio.create_task(_swallows_first_cancel(done))
    await asyncio.sleep(0)
    async with asyncio.timeout(5):
        assert await stop(task) is None
    assert task.cancelled() and done == ["swallowed"]

    async def fails() -> None:
        raise ValueError("boom")

    failing = asyncio.create_task(fails())
    await asyncio.sleep(0)
    error = await stop(failing)
    assert isinstance(error, ValueError)


async def _reads_swallowing_the_first_cancel(done: list[str]) -> AsyncIterator[str]:
    """A feed's read as gh-86296 leaves it: the first cancel lands on a reply and is lost, and
    the read loops on (a blocking read returns empty every second)."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        done.append("swallowed")
    await asyncio.Event().wait()
    yield "never"


async def test_next_within_gives_up_on_a_read_that_swallows_a_cancel() -> None:
    done: list[str] = []
    async with asyncio.timeout(5):  # asyncio.wait_for(anext(...), 0.1) hangs here for ever
        assert await next_within(_reads_swallowing_the_first_cancel(done), 0.1) is None
    assert done == ["swallowed"]


async def test_next_within_returns_what_comes_in_time() -> None:
    async def two() -> AsyncIterator[int]:
        yield 1
        await asyncio.sleep(0.05)
        yield 2
        await asyncio.Event().wait()

    items = two()
    assert [await next_within(items, 5), await next_within(items, 5)] == [1, 2]
    assert await next_within(items, 0.1) is None
