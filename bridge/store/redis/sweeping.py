"""Sweeping: visiting the asks the ``due`` index says are due -- expiring the overdue, handing
a lapsed waiter's answer to the feed, telling the ended-asks stream what an ender died before
telling -- and showing an ended ask's final state (a claim per render interval)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncGenerator, Sequence

from bridge.aio import stop
from bridge.record import AskRecord, MessageRef
from bridge.store.keys import pending_member
from bridge.store.redis import codec
from bridge.store.redis.connect import Outgoing
from bridge.store.redis.connected import INDEX_TTL
from bridge.store.redis.faults import guarded, reaching
from bridge.store.redis.indexes import Indexes
from bridge.store.redis.scripts import Claim, Rendered, Settle, argv, posted, script_call
from bridge.store.terms import Ended

_SWEEP_AHEAD = 3
"""Sweep batches in flight at once (of the store's connections, 4 by default)."""
MARK_LINGER = 0.025
"""Seconds a mark made ``together`` (:meth:`Sweeping.mark_rendered`) waits for other script
calls to go with: at 40 clicks a second or more, a click's mark rides the next click's
submission, a round trip less each (on a loopback socket a write alone costs the writer some
100 us of CPU, the server's wake-up included)."""
_SETTLE_PER_CALL = 20
"""Asks one ``settle`` script call visits (not on Cluster): the script's setup, about as dear as
an expiry's own work, is paid once for them all, while Redis stays busy with one call for at most
a few milliseconds (others' commands wait no longer than behind a pipeline's)."""


class Sweeping(Indexes):
    """The sweeper's half of the contract."""

    async def _sweep_batches(self, now: float, size: int) -> AsyncGenerator[list[Ended]]:
        """Each batch: the next ``size`` asks due in the index, settled by one pipeline of
        per-ask scripts (one round trip; each ask still its own atomic step, in its own slot on
        Cluster) that answer a few words each, not the record, then one pipeline updating the
        indexes."""
        with reaching("sweep"):
            await self._init()
            await self._check_epoch()
            # A few batches in flight, each on its own connection: Redis runs one batch's
            # scripts while this process encodes the next. A visited ask leaves the due range
            # (rescored past ``now``, or dropped) when its batch is done; the next batch is the
            # first asks due that no batch in flight holds.
            flight: dict[asyncio.Task[list[Ended]], list[str]] = {}
            more = True
            try:
                while True:
                    while more and len(flight) < _SWEEP_AHEAD:
                        held = {a for batch in flight.values() for a in batch}
                        found = await self._r.zrangebyscore(
                            self.keys.due, "-inf", now, start=0, num=size + len(held)
                        )
                        fresh = [a for a in found if a not in held]
                        # more may follow: the range was full, or it held more than a batch
                        more = len(found) == size + len(held) or len(fresh) > size
                        ids = fresh[:size]
                        if ids:
                            flight[asyncio.create_task(self._settle(ids, now))] = ids
                        else:
                            break  # all that is due is in flight
                    if not flight:
                        return
                    done, _ = await asyncio.wait(flight, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        del flight[task]
                        shown = task.result()
                        if shown:
                            yield shown
            finally:
                for task in flight:
                    await stop(task)

    async def _visit(self, ids: Sequence[str], now: float) -> list[list[str]]:
        """``settle`` for each ask, one reply each (its words: ``lua/settle.lua`` answers them
        as one line): on Cluster one script call per ask (each in its own slot), elsewhere
        :data:`_SETTLE_PER_CALL` asks per call, the calls pipelined."""
        if self._cluster:
            visit = Settle(self.lease_ttl, self.render_interval)
            runs = (self._run(a, visit, now=now) for a in ids)
            return [str(replies[0]).split("\n") for replies in await asyncio.gather(*runs)]
        calls: list[Outgoing] = []
        for at in range(0, len(ids), _SETTLE_PER_CALL):
            chunk = ids[at : at + _SETTLE_PER_CALL]
            keys = self._keys(chunk[0])
            for ask_id in chunk[1:]:
                keys += self.keys.ask_keys(ask_id)
            visit = Settle(self.lease_ttl, self.render_interval, tuple(chunk[1:]))
            head = self._head(visit.OP, chunk[0], now)
            calls.append(script_call(visit.OP, keys, argv(head, visit)))
        out: list[list[str]] = []
        for replies in await self._sent_now(calls):
            if isinstance(replies, Exception):
                raise replies
            out += (str(reply).split("\n") for reply in replies)
        return out

    async def _settle(self, ids: Sequence[str], now: float) -> list[Ended]:
        """One batch of a sweep: each ask's ``settle`` visit, then the indexes brought up to
        date (every new score is past ``now``, so the next round sees other asks)."""
        replies = await self._visit(ids, now)
        shown: list[Ended] = []
        later: dict[str, float] = {}
        unindex: list[str] = []
        ended: list[tuple[str, str]] = []  # (platform, id) to drop from the indexes on Cluster
        untime: list[str] = []  # expired: no reminder or escalation is due any more
        # expired here, or its ender died before telling (verdict 'tell'): told in one go
        tell = [
            ask_id
            for ask_id, reply in zip(ids, replies, strict=True)
            if reply[0] not in ("later", "missing", "done") and reply[4] == "0"
        ]
        told = dict(zip(tell, await self._tell(tell), strict=True))
        for ask_id, reply in zip(ids, replies, strict=True):
            verdict = reply[0]
            if verdict == "later":
                later[ask_id] = float(reply[1])
                continue
            if verdict == "missing":
                unindex.append(ask_id)
                continue
            platform = str(reply[1])
            ended.append((platform, ask_id))
            if verdict == "done":
                unindex.append(ask_id)
                continue
            if verdict in ("expired", "show"):
                shown.append(Ended(ask_id, platform, verdict == "expired"))
            if verdict == "expired":
                untime.append(ask_id)
            settled = told[ask_id] if ask_id in told else reply[3] == "1"
            if reply[2] == "feed":
                settled = await self._to_feed(ask_id)
            elif settled:
                unindex.append(ask_id)
            if not settled:  # to show: visit again should nobody mark it shown
                later[ask_id] = now + self.render_interval
        async with self._r.pipeline(transaction=False) as pipe:
            if self._cluster and ended:
                pipe.zrem(self.keys.pending, *(pending_member(*each) for each in ended))
                pipe.zrem(self.keys.created, *(ask_id for _, ask_id in ended))
            if untime:
                pipe.zrem(self.keys.timers, *untime)
            if unindex:
                pipe.zrem(self.keys.due, *unindex)
            if later:
                pipe.zadd(self.keys.due, later)
                pipe.expire(self.keys.due, INDEX_TTL + int(self.retention))
            await pipe.execute()
        return shown

    @guarded("claim_render")
    async def _claim_render(
        self,
        ask_id: str,
        now: float,
        message: MessageRef | None,
        unshown: bool,
        known: AskRecord | None,
    ) -> AskRecord | None:
        await self._init()
        # a token per claim: redis-py's re-send of this very claim is granted again
        token = secrets.token_hex(8)
        text, detail = ("", "{}") if message is None else posted(message)
        brief = "0" if known is None else "1"
        claim = Claim(self.render_interval, token, text, detail, "1" if unshown else "0", brief)
        if message is None:
            reply = await self._run(ask_id, claim, now=now, alone=True)
        else:  # it may learn the message here: indexed, so a failed render is retried by a sweep
            mark = time.time() + self.render_interval
            reply = await self._index_and_run(ask_id, claim, mark, now=now, nx=True, alone=True)
        if reply[0] != "claimed":
            return None
        if known is None:
            return codec.record(codec.pairs(reply[1]))
        return codec.with_messages(known, str(reply[1]), str(reply[2]))

    @guarded("mark_rendered")
    async def mark_rendered(self, ask_id: str, *, together: bool = False) -> None:
        await self._init()
        if not self._cluster:  # the script drops a settled ask from the due index itself
            call = Rendered()
            keys = [*self._keys(ask_id), self.keys.due]
            args = argv(self._head(call.OP, ask_id, None), call)
            if together:
                await self._call(call.OP, keys, args, linger=MARK_LINGER)
            else:
                await self._call(call.OP, keys, args, alone=True)
            return
        reply = await self._run(ask_id, Rendered(), alone=True)
        if reply[0] == "ok" and reply[1] == "1":
            await self._r.zrem(self.keys.due, ask_id)
