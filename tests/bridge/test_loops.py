"""``bridge.loops``: the loop synchronous callers share, state kept per loop, a flag for any loop.

The store tests (``test_sync_calls.py``) show the rules at work over Redis; these pin each piece:
that state made on one loop is never handed to another, that it is closed on its own loop when
that loop ends or when asked, that the bridge loop carries the caller's context and leaves it
alive after a ``KeyboardInterrupt`` raised inside it, and that a flag raised in one thread wakes
waiters on other loops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import time
from typing import Any

import pytest

from bridge import loops
from bridge.loops import Flag, PerLoop


class Thing:
    """What a :class:`PerLoop` hands out here: it notes the loop it was made and closed on."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.closed_on: asyncio.AbstractEventLoop | None = None

    async def close(self) -> None:
        self.closed_on = asyncio.get_running_loop()


def test_each_loop_gets_its_own_and_each_is_closed_as_its_loop_ends() -> None:
    things = PerLoop(Thing, Thing.close)

    async def use() -> tuple[Thing, Thing]:
        return things.get(), things.get()

    first, again = asyncio.run(use())
    second, _ = asyncio.run(use())
    assert first is again  # one per loop, however often asked
    assert first is not second and first.loop is not second.loop
    assert first.closed_on is first.loop and second.closed_on is second.loop


def test_loops_in_threads_at_once_never_share() -> None:
    things = PerLoop(Thing, Thing.close)
    both = threading.Barrier(2)
    seen: dict[int, tuple[Thing, asyncio.AbstractEventLoop]] = {}

    def in_thread(n: int) -> None:
        async def use() -> None:
            mine = things.get()
            both.wait(5)  # the other loop has made its own by now
            await asyncio.sleep(0)
            assert things.get() is mine
            seen[n] = (mine, asyncio.get_running_loop())

        asyncio.run(use())

    threads = [threading.Thread(target=in_thread, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    (a, loop_a), (b, loop_b) = seen[0], seen[1]
    assert a is not b and a.loop is loop_a and b.loop is loop_b
    assert a.closed_on is loop_a and b.closed_on is loop_b


def test_aclose_closes_here_at_once_and_elsewhere_on_that_loop() -> None:
    things = PerLoop(Thing, Thing.close)
    other = asyncio.new_event_loop()
    runner = threading.Thread(target=other.run_forever, daemon=True)
    runner.start()

    async def make() -> Thing:
        return things.get()

    try:
        theirs = asyncio.run_coroutine_threadsafe(make(), other).result(5)

        async def here() -> Thing:
            mine = things.get()
            await things.aclose()
            assert mine.closed_on is asyncio.get_running_loop()
            assert things.get() is not mine  # made anew after a close
            return mine

        asyncio.run(here())
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.05), other).result(5)
        assert theirs.closed_on is other
    finally:
        other.call_soon_threadsafe(other.stop)
        runner.join(5)
        other.close()


def test_the_bridge_loop_runs_with_the_callers_context_and_survives_an_interrupt() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("the caller's")

    async def read() -> tuple[str, bool]:
        return var.get(), loops.on_bridge_loop()

    assert loops.run(read()) == ("the caller's", True)
    assert not loops.on_bridge_loop()

    async def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loops.run(interrupted())
    assert loops.run(read())[1]  # the same loop still serves: the interrupt reached only us


def test_work_cancelled_on_the_bridge_loop_ends_the_sync_wait_at_once() -> None:
    """A task cancelled by someone else (a shutdown, a Ctrl-C's own cleanup) must end the
    caller's wait with ``CancelledError``, not leave it waiting for a result that never comes
    (the caller's future is already running and cannot be cancelled)."""

    async def cancelled_soon() -> None:
        asyncio.get_running_loop().call_later(0.05, asyncio.current_task().cancel)  # type: ignore[union-attr]
        await asyncio.sleep(30)

    started = time.monotonic()
    with pytest.raises(concurrent.futures.CancelledError):
        loops.run(cancelled_soon())
    assert time.monotonic() - started < 5


def test_a_flag_raised_in_one_thread_wakes_waiters_on_other_loops() -> None:
    flag = Flag()
    woken: list[str] = []
    waiting = threading.Barrier(3)

    def waiter(name: str) -> None:
        async def wait() -> None:
            task = asyncio.ensure_future(flag.wait())
            await asyncio.sleep(0)
            waiting.wait(5)
            await asyncio.wait_for(task, 5)
            woken.append(name)

        asyncio.run(wait())

    threads = [threading.Thread(target=waiter, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    waiting.wait(5)
    flag.set()
    for thread in threads:
        thread.join(10)
    assert sorted(woken) == ["a", "b"]
    assert flag.is_set()

    async def after() -> Any:
        return await asyncio.wait_for(flag.wait(), 1)  # already raised: returns at once

    asyncio.run(after())
