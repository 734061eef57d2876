"""``bridge.aio.stop`` ends a task even when a cancel is swallowed, as Python 3.11's
``asyncio.wait_for`` does when a reply lands together with the cancel (what redis-py awaits)."""

from __future__ import annotations

import asyncio

from bridge.aio import stop


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
