"""The console's poster: the terminal is the ask's one message.

Posting an ask prints its announcement and lets the prompt (:mod:`platforms.console.prompt`)
start reading answers; showing its new state prints the outcome once it has ended (answered,
expired, cancelled), as a chat message shows it under its questions.
"""

from __future__ import annotations

import asyncio
from typing import TextIO

from bridge.poster import Poster
from bridge.record import AskRecord, MessageRef
from platforms.console.markup import Style, announcement, outcome


class ConsolePoster(Poster):
    """Prints to ``out``, one ask's: made for each ask, in the event loop that asks it."""

    platform = "console"

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.style = Style.of(out)
        self.posted: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        """The posted ask's id, once it is on the screen: the prompt waits for it."""

    async def post(self, record: AskRecord) -> MessageRef:
        self.out.write(announcement(record))
        self.out.flush()
        if not self.posted.done():
            self.posted.set_result(record.id)
        return MessageRef(platform=self.platform, channel="terminal", message_id=record.id)

    async def update(self, record: AskRecord) -> None:
        line = outcome(record, self.style)
        if line is not None:
            self.out.write(line)
            self.out.flush()
