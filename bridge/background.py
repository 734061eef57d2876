"""Work that follows a click's answer: kept, logged, drained on shutdown.

A click is answered within the platform's 3 seconds; what follows it -- showing the ask's new
state on its message, an explanation told late, a form opened after the ack -- runs after, and
nobody awaits it. :class:`Background` keeps each such task referenced until it is done (an
unreferenced task may be collected mid-flight), logs a failure (nobody else would see it), and
lets a process stopping wait for what is in flight (:meth:`Background.drain`), so a click
answered just before a shutdown still gets its message updated.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class Background:
    """The tasks that follow clicks, for one receiver."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after the click's answer; kept referenced until done, drained on
        shutdown, and any failure logged (nobody awaits it)."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("work after a click failed", exc_info=task.exception())

    async def drain(self, within: float = 5.0) -> None:
        """Let work in progress finish (verdicts, showings, explanations) on shutdown."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while self._tasks and loop.time() < deadline:  # work may spawn more (a late showing)
            await asyncio.wait(set(self._tasks), timeout=deadline - loop.time())
