"""Stopping asyncio tasks for certain.

On Python 3.11 one ``task.cancel()`` is not always enough: a cancel that lands just as an awaited
reply arrives is swallowed by ``asyncio.wait_for`` (CPython gh-86296, fixed in 3.12), which
redis-py uses for every command. The task then runs on -- a background loop never ends and
whoever awaits it hangs. Every place that stops a long-running task goes through :func:`stop`.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def stop(task: asyncio.Task[Any]) -> BaseException | None:
    """Cancel ``task`` until it has ended; return what it failed with, if anything."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)
    return None if task.cancelled() else task.exception()
