"""The global indexes and streams an ask's scripts cannot always write themselves.

The ``due``, ``pending``, ``created`` and ``timers`` indexes and the feed and ended-asks streams
live outside an ask's hash slot (:mod:`bridge.store.keys`). Outside Cluster an ask's script
writes ``pending``, ``created``, the ended-asks stream and (for the ops that take it) ``due``
itself; on Cluster, and for what no script writes (the feed, ``timers``), the process that ran
the step writes them right after it. ``due`` holds an ask until its hand-off is settled, so a
sweeper repairs whatever a crashed process left half-done.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bridge.record import AskRecord, AskStatus
from bridge.store.keys import Fields, pending_member
from bridge.store.redis import codec
from bridge.store.redis.connected import INDEX_TTL, Connected
from bridge.store.redis.scripts import Sent, Told
from bridge.store.terms import RENDER_TRIES, tell_handed_to_feed


class Indexes(Connected):
    """Bringing the global indexes and streams up to date after an ask's step."""

    def _ttl_ms(self, record: AskRecord) -> int:
        return int((max(record.expires_at - time.time(), 0) + self.retention) * 1000)

    async def _unpend(self, record: AskRecord) -> None:
        """On Cluster, drop an ask that just ended from the pending and created indexes
        (elsewhere its script did)."""
        if self._cluster and record.status is not AskStatus.PENDING:
            member = pending_member(record.destination.platform, record.id)
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zrem(self.keys.pending, member)
                pipe.zrem(self.keys.created, record.id)
                await pipe.execute()

    async def _to_feed(self, ask_id: str) -> bool:
        """Put a finished ask on the feed, then mark it sent; a crash between repeats the XADD
        later (the feed drops duplicate entries at delivery, see ``deliver.lua``). Told
        (:func:`~bridge.store.base.tell_handed_to_feed`) here, by the process that put it there.
        Whether the ask left ``due`` (settled: its final state is shown, or nothing to show)."""
        min_id = f"{int((time.time() - self.retention) * 1000)}-0"
        await self._r.xadd(self.keys.feed, {"ask": ask_id}, minid=min_id, approximate=True)
        await self._r.expire(self.keys.feed, int(self.retention) + 86400)
        tell_handed_to_feed(ask_id)
        reply = await self._run(ask_id, Sent())
        settled: bool = reply[0] != "ok" or reply[1] == "1"
        if settled:
            await self._r.zrem(self.keys.due, ask_id)
        return settled

    async def _index(self, mapping: dict[str, float]) -> None:
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.due, mapping)
            pipe.expire(self.keys.due, INDEX_TTL + int(self.retention))
            await pipe.execute()

    async def _untime(self, ask_id: str, raw: dict[str, str]) -> None:
        """An ask with follow-ups ended: nothing is due for it any more (a sweep that visits it
        first drops it as well)."""
        if codec.has_follow_ups(raw):
            await self._r.zrem(self.keys.timers, ask_id)

    async def _tell(self, ask_ids: Sequence[str]) -> list[bool]:
        """Put ended asks on the ended-asks stream (one round trip), then mark them told (one
        more); a crash between repeats the XADD at a sweep (a duplicate entry is dropped at
        delivery). Whether each is settled."""
        if not ask_ids:
            return []
        min_id = f"{int((time.time() - self.retention) * 1000)}-0"
        async with self._r.pipeline(transaction=False) as pipe:
            for ask_id in ask_ids:
                pipe.xadd(self.keys.ended, {"ask": ask_id}, minid=min_id, approximate=True)
            pipe.expire(self.keys.ended, int(self.retention) + 86400)
            await pipe.execute()
        replies = await self._run_many([(ask_id, Told()) for ask_id in ask_ids])
        return [reply[0] != "ok" or reply[1] == "1" for reply in replies]

    async def _ended(self, ask_id: str, raw: dict[str, str]) -> None:
        """An ask just left ``pending`` (by this process's step): tell the ended-asks stream,
        feed it if the answers feed gets it, drop it from ``due`` if nothing is left to do (its
        final state is shown), and from ``timers``."""
        await self._untime(ask_id, raw)
        if raw.get(Fields.TOLD) == "0":
            (settled,) = await self._tell([ask_id])
            raw = {**raw, Fields.TOLD: "1"}
        else:
            settled = is_settled(raw)
        if raw.get(Fields.HANDOFF) == "feed":
            await self._to_feed(ask_id)
        elif settled:
            await self._r.zrem(self.keys.due, ask_id)

    async def _time(self, mapping: dict[str, float]) -> None:
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.timers, mapping)
            pipe.expire(self.keys.timers, INDEX_TTL + int(self.retention))
            await pipe.execute()


def is_settled(raw: dict[str, str]) -> bool:
    """Nothing left for a sweeper to do: the ask ended, its hand-off is settled, and its final
    state is shown (or there is no message to show it on, or showing it failed too often)."""
    if raw.get(Fields.STATUS, "pending") == "pending":
        return False
    if raw.get(Fields.HANDOFF) not in ("none", "sent", "confirmed"):
        return False
    if raw.get(Fields.TOLD) == "0":
        return False
    return (
        not raw.get(Fields.MESSAGE)
        or raw.get(Fields.RENDERED) == "1"
        or int(raw.get(Fields.RENDER_TRIES) or 0) >= RENDER_TRIES
    )
