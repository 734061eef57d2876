"""An in-memory :class:`~bridge.poster.Poster`: records what would be shown, for tests and demos.

Each post and update is kept in order, and :meth:`MemoryPoster.next_post` awaits "the question set
is on screen" instead of sleeping, so a test can then answer through the store as a platform
would -- from any loop or thread: the poster may be used by a synchronous agent on the bridge's
loop while the test awaits on its own (:class:`~bridge.loops.Flag`).
"""

from __future__ import annotations

import itertools

from bridge.loops import Flag
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
        self._posted = Flag()
        """Raised (and replaced) at each post."""

    async def post(self, record: AskRecord) -> MessageRef:
        if self.fail_post is not None:
            raise self.fail_post
        self.posts.append(record)
        posted, self._posted = self._posted, Flag()
        posted.set()
        channel = record.destination.channel or record.destination.user or "memory"
        return MessageRef(platform=self.platform, channel=channel, message_id=str(next(self._ids)))

    async def update(self, record: AskRecord) -> None:
        self.updates.append(record)

    async def remind(self, record: AskRecord, n: int) -> None:
        self.reminders.append((record, n))

    async def next_post(self, index: int = 0) -> AskRecord:
        """Wait until at least ``index + 1`` question sets were posted; return that one."""
        while True:
            posted = self._posted  # before the check: a post after it raises this one
            if len(self.posts) > index:
                return self.posts[index]
            await posted.wait()

    def updated(self, ask_id: str) -> list[AskRecord]:
        return [r for r in self.updates if r.id == ask_id]
