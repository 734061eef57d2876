"""An in-memory :class:`~bridge.poster.Poster`: records what would be shown, for tests and demos.

Each post and update is kept in order, and ``posted`` is an event per ask id, so a test can await
"the question set is on screen" instead of sleeping, then answer through the store as a platform
would.
"""

from __future__ import annotations

import asyncio
import itertools

from bridge.poster import Poster
from bridge.record import AskRecord, MessageRef


class MemoryPoster(Poster):
    def __init__(self, platform: str = "memory", *, fail_post: Exception | None = None) -> None:
        self.platform = platform
        self.fail_post = fail_post
        self.posts: list[AskRecord] = []
        self.updates: list[AskRecord] = []
        self.reminders: list[tuple[AskRecord, int]] = []
        self._ids = itertools.count(1)
        self._posted: dict[str, asyncio.Event] = {}
        self._any_post = asyncio.Condition()

    async def post(self, record: AskRecord) -> MessageRef:
        if self.fail_post is not None:
            raise self.fail_post
        self.posts.append(record)
        self._event(record.id).set()
        async with self._any_post:
            self._any_post.notify_all()
        channel = record.destination.channel or record.destination.user or "memory"
        return MessageRef(platform=self.platform, channel=channel, message_id=str(next(self._ids)))

    async def update(self, record: AskRecord) -> None:
        self.updates.append(record)

    async def remind(self, record: AskRecord, n: int) -> None:
        self.reminders.append((record, n))

    def _event(self, ask_id: str) -> asyncio.Event:
        return self._posted.setdefault(ask_id, asyncio.Event())

    async def next_post(self, index: int = 0) -> AskRecord:
        """Wait until at least ``index + 1`` question sets were posted; return that one."""
        async with self._any_post:
            await self._any_post.wait_for(lambda: len(self.posts) > index)
        return self.posts[index]

    def updated(self, ask_id: str) -> list[AskRecord]:
        return [r for r in self.updates if r.id == ask_id]
