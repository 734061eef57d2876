"""Showing ended asks' final states in the background: the sweeper's queue for one platform
(when a sweep's endings are shown; how one is shown is :mod:`bridge.showing`'s).

A sweep names the asks whose final state should be shown now (:meth:`Store.sweep_batches`);
showing one is a message update the platform rate-limits (Slack's ``chat.update`` is Tier 3,
about 50 a minute), so 100,000 asks expiring together take hours to show. The sweep round does
not wait for that -- reminders, escalations and hand-off repair would wait with it -- it offers
each ask to its platform's queue and returns, while at most ``renders`` tasks show the queued
asks, each through the ``show_final`` the sweeper hands the queue
(:func:`bridge.showing.show_final` with the store and every poster: the store's claim, so
replicas never show one ending at once). The queue is handed it instead of importing it: it
decides when, :mod:`bridge.showing` how, and neither depends on the other.

Memory stays bounded however big the storm: the queue holds :class:`~bridge.store.base.Ended`
items (ids, not records), at most ``bound`` of them, and an ask already queued or being shown is
not queued again. An ask offered to a full queue is left to a later sweep: the store keeps an
ended ask that was never marked shown (:meth:`~bridge.store.base.Store.mark_rendered`) due, so
a sweep names it again once the render interval has passed. Stopping (:meth:`ShowQueue.aclose`)
drops what is queued, for the same later sweep of any replica.

The queue slows down when the platform does: each showing that saw the platform answer a 429
(:func:`bridge.metrics.rate_limited`, counted by the platform's client, which waits out the
Retry-After itself) halves the showings in flight, down to one; each one without a 429 lets one
more run again, up to ``renders``. So a storm does not keep ``renders`` calls queued on a limit
that admits fewer, spending their clients' retries.

An expiry is counted once, by the sweep that made it (:mod:`bridge.metrics`): when the queue
shows the ask (from the record its claim read), or, for an ask the queue drops or is stopped
before showing, at once from what the sweep named (:func:`bridge.metrics.expired_unread`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from bridge import metrics
from bridge.aio import stop
from bridge.record import AskRecord
from bridge.store.base import Ended, Store

log = logging.getLogger("bridge.render_queue")
"""Named as before the module was renamed: every log line carries its logger's name, and
operators' searches and alerts match it."""

SHOW_BACKLOG = 10_000
"""Asks one platform's show queue holds at most (about 300 bytes each): a storm bigger than
this is shown this many at a time, the rest named again by later sweeps."""


class ShowQueue:
    """One platform's asks waiting to be shown, and the tasks showing them. Its tasks start when
    something is offered and end when the queue is empty, so an idle queue holds no task."""

    def __init__(
        self,
        store: Store,
        show_final: Callable[[str], Awaitable[AskRecord | None]],
        *,
        platform: str,
        renders: int,
        bound: int = SHOW_BACKLOG,
        shown: Callable[[AskRecord], object] | None = None,
    ) -> None:
        if renders < 1:
            raise ValueError(f"renders must be at least 1, not {renders}")
        if bound < 1:
            raise ValueError(f"bound must be at least 1, not {bound}")
        self.store = store
        self.show_final = show_final
        """Shows the final state of the ask of this id unless someone did since the sweep named
        it; the record shown, or ``None`` (another's claim, a failed update: logged by it). It
        holds every platform's poster: an escalated ask has messages on other platforms too."""
        self.platform = platform
        """The platform of the asks' destinations: whose 429s slow this queue down."""
        self.renders = renders
        self.bound = bound
        self._allowed = renders  # in flight at once now: fewer after a 429
        self._shown = shown
        self._waiting: deque[Ended] = deque()
        self._ids: set[str] = set()  # waiting or being shown
        self._workers: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        """Asks waiting (not those being shown): never more than :attr:`bound`."""
        return len(self._waiting)

    def offer(self, ended: Ended) -> bool:
        """Queue ``ended`` to be shown; ``False`` if the queue is full (a later sweep names it
        again; an expiry this sweep made is counted now). An ask already queued or being shown
        is not queued twice (``True``)."""
        if ended.ask_id in self._ids:
            return True
        if len(self._waiting) >= self.bound:
            if ended.expired:
                metrics.expired_unread(ended.ask_id, ended.platform)
            return False
        self._waiting.append(ended)
        self._ids.add(ended.ask_id)
        self._idle.clear()
        self._fill()
        return True

    async def drained(self) -> None:
        """Until every ask queued so far was shown (or failed to be: a later sweep tries it)."""
        await self._idle.wait()

    async def aclose(self) -> None:
        """Stop showing: what is queued is dropped (a later sweep of any replica shows it; its
        expiries are counted now), the asks being shown are abandoned mid-way (their claims lapse
        after the render interval). Quick, whatever the backlog."""
        dropped = list(self._waiting)
        self._waiting.clear()
        for ended in dropped:
            self._ids.discard(ended.ask_id)
            if ended.expired:
                metrics.expired_unread(ended.ask_id, ended.platform)
        workers = list(self._workers)
        for task in workers:
            task.cancel()  # all at once, before waiting on any: a stop is not held up by one
        for task in workers:
            await stop(task)
        if not self._workers:
            self._idle.set()

    def _fill(self) -> None:
        """As many showing tasks as are allowed now and have an ask to take."""
        while len(self._workers) < min(self._allowed, len(self._waiting)):
            self._workers.add(asyncio.create_task(self._work(), name="ask-bridge render"))

    async def _work(self) -> None:
        try:
            while self._waiting and len(self._workers) <= self._allowed:
                ended = self._waiting.popleft()
                limited = metrics.rate_limited(self.platform)
                try:
                    await self._show(ended)
                finally:
                    self._ids.discard(ended.ask_id)
                if metrics.rate_limited(self.platform) > limited:
                    self._allowed = max(1, self._allowed // 2)  # this task ends if now too many
                elif self._allowed < self.renders:
                    self._allowed += 1
                    self._fill()
        finally:
            # no await between the empty check and leaving the set: an offer made after it
            # starts a task of its own
            task = asyncio.current_task()
            if task is not None:
                self._workers.discard(task)
            if not self._workers and not self._waiting:
                self._idle.set()

    async def _show(self, ended: Ended) -> None:
        counted = not ended.expired
        try:
            record = await self.show_final(ended.ask_id)
            if record is not None and self._shown is not None:
                self._shown(record)
            if not counted:  # shown or not: a later sweep shows it, uncounted
                found = record or await self.store.get(ended.ask_id)
                if found is not None:
                    metrics.ended(found)
                    counted = True
        except Exception as exc:  # show_final logs its own failures: this is the store's
            log.warning(
                "ask %s: could not show its final state (%s: %s); a later sweep does",
                ended.ask_id,
                type(exc).__name__,
                " ".join(str(exc).split())[:300],
            )
        finally:
            if not counted:
                metrics.expired_unread(ended.ask_id, ended.platform)
