"""Script calls from many coroutines of one process, sent together: one round trip per batch.

Every script call a store makes (:mod:`.scripts`; not on Cluster, whose pipelines take no
scripts) joins a queue; one sender takes whatever queued while its previous batch was in flight
and sends it in one write (:func:`~bridge.store.redis.connect.send_together`; each script still
atomic on its own ask). A lone call leaves on the event loop's next turn, alone. Two reasons:

* When 100,000 waiting calls are answered at once, each confirms it returned its answer. One
  command each would queue 100,000 commands for the store's few connections, and the lease
  renewals that keep the other waits' answers coming to them would wait behind them: leases
  lapsed, and answers went to the feed. Batched, one batch at a time holds a connection.
* A busy process (64 calls in flight) pays one pool checkout and one socket write per batch
  rather than per command.

The sender outlives its callers, so a caller that stops waiting withdraws its call
(:meth:`Pipelined.call`): an operation whose caller was told it failed never takes effect later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from bridge.aio import stop
from bridge.store.redis.connect import PIPELINE_CHUNK, WITHDRAWN, Outgoing
from bridge.store.terms import give_up_at

Send = Callable[[list[Outgoing]], Awaitable[list[Any]]]
"""Sends calls in one round trip; each reply, or the exception that call raised, or
:data:`~bridge.store.redis.connect.WITHDRAWN`."""


class GaveUp(Exception):
    """The caller's deadline (:func:`bridge.store.base.giving_up_after`) passed before its call's
    reply came. ``sent``: an attempt wrote the call, so it may have run; else it never will."""

    def __init__(self, sent: bool) -> None:
        super().__init__("sent, no reply in time" if sent else "never sent: withdrawn")
        self.sent = sent


class Pipelined:
    """The queue and sender of one store on one event loop."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._queue: list[tuple[Outgoing, asyncio.Future[Any]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def call(self, call: Outgoing) -> Any:
        """Send ``call`` in the next batch; its reply or error.

        A caller that stops waiting -- cancelled, or past its deadline (:class:`GaveUp`) --
        withdraws the call: a batch still trying to reach Redis (its connection retries for
        seconds) never writes it, so it cannot take effect once the caller was told it did not.
        """
        loop = asyncio.get_running_loop()  # one loop's: a store keeps one per loop (.link)
        fut: asyncio.Future[Any] = loop.create_future()
        self._queue.append((call, fut))
        if self._sender is None:
            self._sender = loop.create_task(self._send_all(), name="ask-bridge scripts")
        deadline = asyncio.timeout_at(give_up_at())
        try:
            async with deadline:
                return await fut
        except TimeoutError:
            if not deadline.expired():
                raise  # the call's own error
            call.withdrawn = True
            raise GaveUp(call.sent) from None
        except asyncio.CancelledError:
            call.withdrawn = True
            raise

    async def _send_all(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[:PIPELINE_CHUNK], self._queue[PIPELINE_CHUNK:]
                batch = [(call, fut) for call, fut in batch if not call.withdrawn]
                if not batch:
                    continue
                try:
                    replies = await self._send([call for call, _ in batch])
                except Exception as exc:  # each caller raises it (its call's `sent` says more)
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                    continue
                except BaseException:  # the store is closing: its callers are let go
                    for call, fut in batch:
                        call.withdrawn = True
                        fut.cancel()
                    raise
                for (_, fut), reply in zip(batch, replies, strict=True):
                    if fut.done() or reply is WITHDRAWN:  # its caller gave up meanwhile
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
        for call, fut in self._queue:
            call.withdrawn = True
            fut.cancel()
        self._queue = []
