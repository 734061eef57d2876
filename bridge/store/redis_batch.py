"""Script calls from many coroutines of one process, sent together: one round trip per batch.

Every call of ``ask.lua`` a store makes (not on Cluster, whose pipelines take no scripts) joins a
queue; one sender takes whatever queued while its previous batch was in flight and sends it in
one write (:func:`~bridge.store.redis_connect.send_together`; each script still atomic on its own
ask). A lone call leaves on the event loop's next turn, alone. Two reasons:

* When 100,000 waiting calls are answered at once, each confirms it returned its answer. One
  command each would queue 100,000 commands for the store's few connections, and the lease
  renewals that keep the other waits' answers coming to them would wait behind them: leases
  lapsed, and answers went to the feed. Batched, one batch at a time holds a connection.
* A busy process (64 calls in flight) pays one pool checkout and one socket write per batch
  rather than per command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from bridge.aio import stop
from bridge.store.redis_connect import PIPELINE_CHUNK

Call = tuple[list[str], list[Any]]
"""One script call: its KEYS and ARGV."""
Send = Callable[[list[Call]], Awaitable[list[Any]]]
"""Sends calls in one round trip; each reply, or the exception that call raised."""


class Pipelined:
    """The queue and sender of one store on one event loop."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._queue: list[tuple[list[str], list[Any], asyncio.Future[Any]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def call(self, keys: list[str], argv: list[Any]) -> Any:
        """Run the script over ``keys`` with ``argv`` in the next batch; its reply or error."""
        loop = asyncio.get_running_loop()  # one loop's: a store keeps one per loop (.redis_link)
        fut: asyncio.Future[Any] = loop.create_future()
        self._queue.append((keys, argv, fut))
        if self._sender is None:
            self._sender = loop.create_task(self._send_all(), name="ask-bridge scripts")
        return await fut

    async def _send_all(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:PIPELINE_CHUNK], self._queue[PIPELINE_CHUNK:]
                try:
                    replies = await self._send([(keys, argv) for keys, argv, _ in batch])
                except Exception as exc:  # each caller raises it: nothing known to have run
                    for *_, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                except BaseException:  # the store is closing: its callers are let go
                    for *_, fut in batch:
                        fut.cancel()
                    raise
                for (*_, fut), reply in zip(batch, replies, strict=True):
                    if fut.done():  # its caller was cancelled meanwhile
                        continue
                    if isinstance(reply, Exception):
                        fut.set_exception(reply)
                    else:
                        fut.set_result(reply)
        finally:
            self._sender = None

    async def aclose(self) -> None:
        if self._sender is not None:
            await stop(self._sender)
        for *_, fut in self._queue:
            fut.cancel()
        self._queue = []
