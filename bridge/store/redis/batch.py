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
        self._lingering: list[tuple[Outgoing, asyncio.Future[Any]]] = []
        """Calls waiting for a batch to go with (:meth:`call`'s ``linger``)."""
        self._timer: asyncio.TimerHandle | None = None
        """Sends the lingering calls once the first of them has waited its ``linger``."""

    async def call(self, call: Outgoing, *, linger: float = 0.0) -> Any:
        """Send ``call`` in the next batch; its reply or error. ``linger``: seconds the call may
        wait for a batch to go with, when none is on its way (then it leaves alone): a caller
        whom nothing waits on (a click's mark that its showing is done) costs no round trip of
        its own while calls keep coming.

        A caller that stops waiting -- cancelled, or past its deadline (:class:`GaveUp`) --
        withdraws the call: a batch still trying to reach Redis (its connection retries for
        seconds) never writes it, so it cannot take effect once the caller was told it did not.
        """
        loop = asyncio.get_running_loop()  # one loop's: a store keeps one per loop (.link)
        fut: asyncio.Future[Any] = loop.create_future()
        if linger > 0:
            self._lingering.append((call, fut))
            if self._timer is None:
                self._timer = loop.call_later(linger, self._linger_over, loop)
        else:
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

    def _linger_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """The first lingering call has waited its ``linger``: they all go in the next batch."""
        self._timer = None
        self._queue[:0], self._lingering = self._lingering, []
        if self._sender is None and self._queue:
            self._sender = loop.create_task(self._send_all(), name="ask-bridge scripts")

    async def _send_all(self) -> None:
        try:
            while self._queue:
                if self._lingering:  # they go with this batch: no round trip of their own
                    self._queue[:0], self._lingering = self._lingering, []
                    if self._timer is not None:
                        self._timer.cancel()
                        self._timer = None
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
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._sender is not None:
            await stop(self._sender)
        for call, fut in [*self._lingering, *self._queue]:
            call.withdrawn = True
            fut.cancel()
        self._queue, self._lingering = [], []
