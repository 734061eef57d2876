"""``ask``'s progress line on a terminal: where the question was posted, the time waited, and a
link to the message when the platform gives one. Silent when stderr is not a terminal.

It listens to the ``posted`` lifecycle step (:mod:`bridge.metrics`) rather than reaching into
the chat handler: the step carries the platform, channel, message, ask id and link. A platform
whose post carries no link but can look one up (:class:`MessageLinks`: Slack's
``chat.getPermalink``) is asked once, here: only a terminal shows the link, so only it pays the
extra call, after the post.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol, TextIO, runtime_checkable

from bridge.record import MessageRef

TICK = 1.0
log = logging.getLogger(__name__)


@runtime_checkable
class MessageLinks(Protocol):
    """Optional for a platform: the link to a posted message, when its post did not carry one."""

    name: str

    async def message_link(self, message: MessageRef) -> str | None: ...


class Progress(logging.Handler):
    """Remembers where the ask was posted, from the ``posted`` lifecycle line."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.posted: dict[str, Any] | None = None
        self._looked_up = False

    async def look_up(self, links: MessageLinks | None) -> None:
        """Once posted without a link: ask ``links`` for it (a failure leaves it out)."""
        posted = self.posted
        if links is None or self._looked_up or posted is None or posted.get("link"):
            return
        if posted.get("platform") != links.name or not posted.get("message_id"):
            return
        self._looked_up = True
        ref = MessageRef(
            platform=links.name, channel=str(posted["channel"]), message_id=posted["message_id"]
        )
        try:
            link = await links.message_link(ref)
        except Exception:
            log.warning("could not look up the message's link", exc_info=True)
            return
        if link:
            posted["link"] = link

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
async def shown(
    stream: TextIO | None = None, *, links: MessageLinks | None = None
) -> AsyncIterator[Progress | None]:
    """Show the progress line on ``stream`` (default stderr) while the context runs, if it is a
    terminal; the line is cleared at the end. ``links``: the platform to ask for the message's
    link when its post carried none."""
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
            await progress.look_up(links)
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
