"""The sweeper: expire asks past ``expires_at``, finish hand-offs that a dead process left, show
final states nobody showed, and post the reminders and escalations that are due.

Run one in every replica (``ask-bridge serve`` does); they may overlap freely, because the store
expires each ask in one atomic step, and each final state is shown through one claim
(:func:`bridge.showing.show_final`) with the posters of every configured platform. (An ask
that a click finds past ``expires_at`` before any sweep is expired by that submission instead, and
shown by whoever handled the click: see :meth:`bridge.store.base.Store.submit`.) An ask whose
final state was stored but never shown -- the replica that ended it was killed before it showed
it -- comes back from a later sweep and is shown then. Final states are shown in the background,
by one bounded queue per platform (:mod:`bridge.show_queue`): a round never waits for them, so
reminders keep coming while an expiry storm is shown at the platform's rate.

Reminders and escalations (:mod:`bridge.followups`) come from the store's due-time index
(:meth:`~bridge.store.base.Store.claim_timers`): each is claimed by one sweeper, posted through
the poster of the platform it goes to, then marked done
(:meth:`~bridge.store.base.Store.timer_done`).
A sweeper killed between posting and marking leaves a claim that another claims again after the
store's timer-retry interval, so nothing is lost; the step is posted twice only then. A post
that fails is logged in one line, recorded (``follow_up_failed``) and tried again the same way,
:data:`~bridge.store.base.TIMER_TRIES` claims at most.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping

from bridge import metrics
from bridge.logs import StateLog
from bridge.poster import Poster
from bridge.record import AskRecord, AskStatus
from bridge.redis_acl import refusal
from bridge.show_queue import SHOW_BACKLOG, ShowQueue
from bridge.showing import show_final
from bridge.store.base import (
    SWEEP_BATCH,
    TIMER_TRIES,
    Store,
    StoreUnavailable,
    TimerClaim,
)

log = logging.getLogger(__name__)


class Sweeper:
    def __init__(
        self,
        store: Store,
        posters: Mapping[str, Poster] | None = None,
        interval: float = 5.0,
        *,
        renders: int = 8,
        batch: int = SWEEP_BATCH,
        backlog: int = SHOW_BACKLOG,
    ) -> None:
        if renders < 1:
            raise ValueError(f"renders must be at least 1, not {renders}")
        self.store = store
        self.posters = dict(posters or {})
        self.interval = interval
        self.renders = renders
        """Message updates in flight at once per platform (and reminders or escalations posted at
        once). An expiry storm is shown concurrently, but boundedly: each platform's client
        waits out its own rate limits (a 429's Retry-After: Slack's ``chat.update`` is Tier 3,
        about 50 a minute with bursts; Discord buckets edits per channel) while it holds one of
        these, so a storm never has more than this many updates waiting on a platform, however
        many asks expired."""
        self.batch = batch
        """Asks the store expires per step (:meth:`Store.sweep_batches`)."""
        self._queues = {
            platform: ShowQueue(
                store,
                functools.partial(show_final, store, self.posters, unshown=True),
                platform=platform,
                renders=renders,
                bound=backlog,
                shown=self._note,
            )
            for platform in self.posters
        }
        self._watching: list[list[AskRecord]] = []

    def backlog(self, platform: str | None = None) -> int:
        """Asks waiting in the show queue of ``platform`` (default: of every platform), each
        at most ``backlog`` long (:class:`~bridge.show_queue.ShowQueue`); 0 for a platform
        with no poster here (nothing of it is queued)."""
        if platform is not None:
            queue = self._queues.get(platform)
            return 0 if queue is None else len(queue)
        return sum(len(queue) for queue in self._queues.values())

    async def sweep(self, now: float | None = None) -> None:
        """One round at ``now`` (default: the clock): expire what is due and finish hand-offs
        (:meth:`Store.sweep_batches`), queue the final state of each ask the store named to be
        shown in the background (:class:`~bridge.show_queue.ShowQueue`), then post the
        reminders and escalations due. Returns without waiting for the queued showings, so a
        storm that takes the platform hours to show never holds back the next rounds."""
        now = time.time() if now is None else now
        await self._round(now)
        await self.follow_up(now)

    async def sweep_once(self, now: float | None = None) -> list[AskRecord]:
        """:meth:`sweep`, then wait until the show queues are empty (a test's or a one-off
        sweep's view; ``serve`` runs :meth:`run`). Returns the asks this sweeper showed
        meanwhile, as shown: another sweeper's claim may have taken some, and asks a full queue
        left are shown by a later sweep.

        An expiry is counted by the sweep that made it, not again when a later sweep shows an
        ask whose showing process died, nor for an ask a click expired (that click counted it,
        :func:`bridge.metrics.judged`)."""
        shown: list[AskRecord] = []
        self._watching.append(shown)
        try:
            await self.sweep(now)
            await self.drained()
        finally:
            self._watching.remove(shown)
        return shown

    async def drained(self) -> None:
        """Until every ask queued to be shown so far is done (shown, or failed: a later sweep
        retries)."""
        for queue in self._queues.values():
            await queue.drained()

    async def aclose(self) -> None:
        """Stop the show queues (:meth:`ShowQueue.aclose`): quick, whatever the backlog;
        what they held is shown by a later sweep of any replica."""
        for queue in self._queues.values():
            await queue.aclose()

    def _note(self, record: AskRecord) -> None:
        for shown in self._watching:
            shown.append(record)

    async def _round(self, now: float) -> None:
        """The store's batches, each ask offered to its platform's queue as the batch comes (the
        first showings start while the store expires the next batch). An ask of a platform with no
        poster here is left to a replica that has one to show (an expiry this sweep made is
        counted here all the same: the sweep that expires an ask counts it); one a full queue
        refuses, to a later sweep (logged once a round)."""
        left: dict[str, int] = {}
        async for batch in self.store.sweep_batches(now, size=self.batch):
            for ended in batch:
                queue = self._queues.get(ended.platform)
                if queue is None:
                    if ended.expired:  # this sweep made the expiry: count it here, once
                        metrics.expired_unread(ended.ask_id, ended.platform)
                elif not queue.offer(ended):
                    left[ended.platform] = left.get(ended.platform, 0) + 1
            await asyncio.sleep(0)  # the queues start showing this batch before the next one
        for platform, count in left.items():
            log.info(
                "sweep: %d asks wait to be shown in %s, %d more left to a later sweep",
                self._queues[platform].bound,
                platform,
                count,
            )

    async def follow_up(self, now: float | None = None) -> int:
        """Claim the reminders and escalations due at ``now`` (default: the clock) and post
        them; how many were posted (another sweeper's claims are not among them)."""
        claims = iter(await self.store.claim_timers(now))
        posted = 0

        async def poster() -> None:
            nonlocal posted
            for claim in claims:  # shared: each claim goes to one task
                posted += await self._post(claim, now)

        await asyncio.gather(*(poster() for _ in range(self.renders)))
        return posted

    async def _post(self, claim: TimerClaim, now: float | None) -> bool:
        """Post one claimed step and mark it done; a failure is logged (the claim is tried
        again after the store's timer-retry interval)."""
        record = claim.record
        try:
            if claim.kind == "remind":
                if record.message is None:
                    return False  # claimed only once posted: cannot happen
                where = record.message.platform
                poster = self.posters.get(where)
                if poster is None:
                    log.warning("ask %s: no %s poster here to remind with", record.id, where)
                    return False
                await poster.remind(record, claim.n)
                await self.store.timer_done(claim, now=now)
                metrics.reminded(record, claim.n)
                return True
            follow = record.follow_ups
            to = follow.escalate_to if follow is not None else None
            if to is None:
                return False  # claimed only with a destination: cannot happen
            poster = self.posters.get(to.platform)
            if poster is None:
                log.warning("ask %s: no %s poster here to escalate to", record.id, to.platform)
                return False
            message = await poster.post(record.model_copy(update={"destination": to}))
            done = await self.store.timer_done(claim, message, now=now)
            metrics.escalated(record)
            if done is not None and done.status is not AskStatus.PENDING:
                await show_final(self.store, self.posters, done)  # it ended while posting
            return True
        except StoreUnavailable:
            raise
        except Exception as exc:
            await self._failed(claim, exc)
            return False

    async def _failed(self, claim: TimerClaim, exc: Exception) -> None:
        """A step whose post the platform refused (a channel the bot cannot post to, a deleted
        message to reply to): one line in the log and a ``follow_up_failed`` event in the audit
        trail, no traceback -- the claim is tried again after the store's timer-retry interval,
        :data:`~bridge.store.base.TIMER_TRIES` claims at most, then given up."""
        record = claim.record
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        follow = record.follow_ups
        to = follow.escalate_to if follow is not None else None
        if claim.kind == "escalate" and to is not None:
            where = f"the escalation to {to.platform}:{to.channel or 'user:' + str(to.user)}"
        else:
            where = f"reminder {claim.n}"
        log.warning(
            "ask %s: could not post %s (%s: %s); claimed again later, %d claims at most",
            record.id,
            where,
            type(exc).__name__,
            reason,
            TIMER_TRIES,
        )
        metrics.platform_error(metrics.platform_of(record), "post")
        await self.store.record_event(
            record.id, "follow_up_failed", step=claim.step, error=f"{type(exc).__name__}: {reason}"
        )

    async def run(self) -> None:
        """Sweep every ``interval`` seconds until cancelled, the showings running in the
        background meanwhile (stopped with it: :meth:`aclose`); a failed round is logged, not
        fatal (a store that is down once when it goes and once when it is back, not every
        round)."""
        store_state = StateLog(log, "sweep: store unavailable")
        refused: str | None = None  # Redis refusing its user a command: said once, not per round
        try:
            while True:
                try:
                    await self.sweep()
                    store_state.ok()
                    refused = None
                except StoreUnavailable as exc:
                    metrics.store_error("sweep")
                    store_state.failed(exc)
                except Exception as exc:
                    if (said := refusal(exc)) is None:
                        log.warning(
                            "sweep failed; retrying in %.1f s", self.interval, exc_info=True
                        )
                    elif said != refused:
                        log.error("sweep failed: %s", said)
                    refused = said
                await asyncio.sleep(self.interval)
        finally:
            await self.aclose()
