"""``ask``'s progress line on a terminal: where the question was posted, the time waited, and a
link to the message when the platform gives one. Silent when stderr is not a terminal.

It listens to the ``posted`` lifecycle step (:mod:`bridge.metrics`) rather than reaching into
the chat handler: the step carries the platform, channel, ask id and link.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TextIO

TICK = 1.0


class Progress(logging.Handler):
    """Remembers where the ask was posted, from the ``posted`` lifecycle line."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.posted: dict[str, Any] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict) and fields.get("step") == "posted":
            self.posted = fields

    def line(self, elapsed: float) -> str:
        minutes, seconds = divmod(int(elapsed), 60)
        if self.posted is None:
            return f"posting the questions... {minutes}:{seconds:02d}"
        where = f"{self.posted.get('platform')} {self.posted.get('channel') or ''}".strip()
        link = f" {self.posted['link']}" if self.posted.get("link") else ""
        ask = self.posted.get("ask_id")
        return f"waiting for an answer in {where} (ask {ask}), {minutes}:{seconds:02d}{link}"


@asynccontextmanager
async def shown(stream: TextIO | None = None) -> AsyncIterator[Progress | None]:
    """Show the progress line on ``stream`` (default stderr) while the context runs, if it is a
    terminal; the line is cleared at the end."""
    out = stream or sys.stderr
    if not out.isatty():
        yield None
        return
    progress = Progress()
    lifecycle = logging.getLogger("bridge.lifecycle")
    level = lifecycle.level
    lifecycle.setLevel(logging.INFO)
    lifecycle.addHandler(progress)
    started = time.monotonic()

    async def tick() -> None:
        while True:
            out.write("\r\x1b[2K" + progress.line(time.monotonic() - started))
            out.flush()
            await asyncio.sleep(TICK)

    ticking = asyncio.create_task(tick())
    try:
        yield progress
    finally:
        ticking.cancel()
        await asyncio.gather(ticking, return_exceptions=True)
        out.write("\r\x1b[2K")
        out.flush()
        lifecycle.removeHandler(progress)
        lifecycle.setLevel(level)
