"""Stopping asyncio tasks for certain.

On Python 3.11 one ``task.cancel()`` is not always enough: a cancel that lands just as an awaited
reply arrives is swallowed by ``asyncio.wait_for`` (CPython gh-86296, fixed in 3.12), which
redis-py uses for every command. The task then runs on -- a background loop never ends and
whoever awaits it hangs. Every place that stops a long-running task goes through :func:`stop`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeVar

T = TypeVar("T")


async def stop(task: asyncio.Task[Any]) -> BaseException | None:
    """Cancel ``task`` until it has ended; return what it failed with, if anything."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
    return None if task.cancelled() else task.exception()


async def next_within(items: AsyncIterator[T], within: float) -> T | None:
    """``items``' next item if it comes within ``within`` seconds, else ``None`` (the read is
    stopped, so ``items`` is done). Not ``asyncio.wait_for``: on 3.11 its one cancel can be
    swallowed, and a feed's read -- a blocking read looping on empty replies -- then never ends,
    so whoever waited for "nothing more" hung for ever. An item that came as the read was being
    stopped is returned, not lost."""
    read = asyncio.ensure_future(anext(items))
    done, _ = await asyncio.wait({read}, timeout=within)
    if not done:
        await stop(read)
    return None if read.cancelled() else read.result()
