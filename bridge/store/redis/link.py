"""What a :class:`~bridge.store.redis.RedisStore` holds on one event loop.

Connections, the wake-up subscription and its tasks, the script batcher and the start-up state are
all bound to the loop that made them (:mod:`bridge.loops`), so a store keeps one :class:`Link` per
loop that uses it: a process's synchronous ``ask_user`` calls (on the bridge loop) and its async
ones (on the caller's loop) each get their own, at the same time. What is not bound to a loop --
the key scheme, settings, the deployment's epoch -- stays on the store itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from bridge.aio import stop
from bridge.store.redis.batch import Pipelined
from bridge.store.redis.wakeups import Wakeups


@dataclass
class Link:
    """One loop's connections and background work of one store."""

    client: Any
    """The command client (its pool's connections are this loop's)."""
    subscriber: Any
    """What carries the wake-ups (the client itself on a standalone server)."""
    scripts: dict[str, Any]
    """Each op's script registered with :attr:`client`, by op (:mod:`.scripts`; a script's
    ``sha`` is the same everywhere)."""
    wakeups: Wakeups
    pipelined: Pipelined
    ready: bool
    """Whether the client is ready for concurrent use (a Cluster learns its slots first)."""
    starting: asyncio.Task[None] | None = None
    follower: asyncio.Task[None] | None = None
    """Following Sentinel's master switches, from this loop's first use on."""
    _closed: bool = field(default=False, repr=False)

    async def aclose(self) -> None:
        """Stop the background tasks, then close every connection (on this link's loop)."""
        if self._closed:
            return
        self._closed = True
        if self.starting is not None and not self.starting.done():
            await stop(self.starting)
        if self.follower is not None:
            await stop(self.follower)  # not a bare cancel: see bridge.aio
            self.follower = None
        await self.wakeups.aclose()
        await self.pipelined.aclose()
        if self.subscriber is not self.client:
            await self.subscriber.aclose()
        await self.client.aclose()
