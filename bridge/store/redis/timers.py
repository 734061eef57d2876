"""Reminders and escalations (:mod:`bridge.followups`): the ``timers`` index says when an ask's
next step is due; a sweeper claims it (one claim per step at a time, re-claimable once
``timer_retry`` passed), posts it, and marks it done."""

from __future__ import annotations

import json
import secrets
import time

from bridge.record import AskRecord, AskStatus, MessageRef
from bridge.store.redis import codec
from bridge.store.redis.connect import PIPELINE_CHUNK
from bridge.store.redis.faults import guarded
from bridge.store.redis.indexes import Indexes
from bridge.store.redis.scripts import Timer, TimerDone
from bridge.store.terms import TIMER_TRIES, TimerClaim, parse_step, timer_detail


class Timers(Indexes):
    """The follow-ups' half of the contract."""

    @guarded("claim_timers")
    async def claim_timers(self, now: float | None = None) -> list[TimerClaim]:
        await self._init()
        now = time.time() if now is None else now
        ids = await self._r.zrangebyscore(
            self.keys.timers, "-inf", now, start=0, num=PIPELINE_CHUNK
        )
        # a token per round: a re-sent claim is granted again (one claim per ask per round)
        timer = Timer(self.timer_retry, secrets.token_hex(8), TIMER_TRIES)
        replies = await self._run_many([(ask_id, timer) for ask_id in ids], now=now)
        claims: list[TimerClaim] = []
        later: dict[str, float] = {}
        busy: dict[str, float] = {}
        drop: list[str] = []
        for ask_id, reply in zip(ids, replies, strict=True):
            if reply[0] == "later":
                later[ask_id] = float(reply[1])
            elif reply[0] == "busy":
                busy[ask_id] = float(reply[1])
            elif reply[0] == "claimed":
                record = codec.record(codec.pairs(reply[2]))
                claims.append(parse_step(ask_id, str(reply[1]), record))
                later[ask_id] = now + self.timer_retry  # claimed again then, unless done
            else:  # ended, done, missing
                drop.append(ask_id)
        if drop:
            await self._r.zrem(self.keys.timers, *drop)
        if later:
            await self._time(later)
        if busy:  # never later than what the claimant's timer_done wrote meanwhile
            await self._r.zadd(self.keys.timers, busy, lt=True)
        return claims

    @guarded("timer_done")
    async def timer_done(
        self, claim: TimerClaim, message: MessageRef | None = None, *, now: float | None = None
    ) -> AskRecord | None:
        await self._init()
        detail = json.dumps(timer_detail(claim, message))
        posted = message.model_dump_json() if message is not None else ""
        done = TimerDone(claim.step, posted, detail)
        reply = await self._run(claim.ask_id, done, now=now)
        if reply[0] != "ok":
            return None
        record = codec.record(codec.pairs(reply[2]))
        if record.status is AskStatus.PENDING:
            if reply[1]:
                await self._time({claim.ask_id: float(reply[1])})
            else:
                await self._r.zrem(self.keys.timers, claim.ask_id)
        elif message is not None:  # ended meanwhile: the sweeper shows it on this message too
            await self._index({claim.ask_id: time.time()})
        return record
