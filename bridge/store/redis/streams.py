"""Reading the two streams an ask's outcome travels on: the answers feed (answers nobody waits
for) and the ended-asks stream (outcome webhooks), each through a consumer group; an entry
delivers its ask once (the first entry for it: ``deliver.lua``), duplicates are acknowledged
unread."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from redis.exceptions import ResponseError

from bridge.store.keys import Fields
from bridge.store.redis import codec
from bridge.store.redis.connect import PIPELINE_CHUNK
from bridge.store.redis.faults import guarded, reaching
from bridge.store.redis.indexes import Indexes
from bridge.store.redis.scripts import Acked, Deliver
from bridge.store.terms import Delivery

ENDED_GROUP = "notify"
"""The consumer group reading the ended-asks stream (:meth:`Streams.ended`)."""


class Streams(Indexes):
    """The feed's half of the contract."""

    async def _ensure_group(self, stream: str, group: str) -> None:
        try:
            await self._r.xgroup_create(stream, group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        await self._r.expire(stream, int(self.retention) + 86400, nx=True)

    async def _deliveries(
        self, stream: str, group: str, marker: str, entries: Sequence[Any]
    ) -> list[Delivery]:
        out: list[Delivery] = []
        for entry_id, fields in entries:
            ask_id = (fields or {}).get("ask")
            reply = await self._run(ask_id, Deliver(entry_id, marker)) if ask_id else ["gone"]
            if reply[0] == "deliver":
                out.append(Delivery(entry_id, codec.record(codec.pairs(reply[1]))))
            else:  # trimmed, past retention, or a duplicate entry of an ask already delivered
                await self._r.xack(stream, group, entry_id)
        return out

    async def _read(
        self, stream: str, group: str, marker: str, consumer: str, idle: float
    ) -> AsyncIterator[Delivery]:
        """Deliveries for ``consumer``: first its own unacknowledged ones (after a restart), then
        entries idle too long at other consumers (they died), then new ones."""
        with reaching("feed"):
            await self._init()
            await self._ensure_group(stream, group)
            pending = await self._r.xreadgroup(group, consumer, {stream: "0"}, count=PIPELINE_CHUNK)
            for _, entries in pending:
                for delivery in await self._deliveries(stream, group, marker, entries):
                    yield delivery
            idle_ms = int(idle * 1000)
            while True:
                try:
                    claimed = await self._r.xautoclaim(
                        stream, group, consumer, idle_ms, "0-0", count=100
                    )
                    for delivery in await self._deliveries(stream, group, marker, claimed[1]):
                        yield delivery
                    fresh = await self._r.xreadgroup(
                        group, consumer, {stream: ">"}, count=100, block=1000
                    )
                except ResponseError as exc:
                    if "NOGROUP" not in str(exc):
                        raise
                    await self._ensure_group(stream, group)
                    continue
                for _, entries in fresh or []:
                    for delivery in await self._deliveries(stream, group, marker, entries):
                        yield delivery

    def feed(self, consumer: str) -> AsyncIterator[Delivery]:
        return self._read(self.keys.feed, self.group, Fields.FED, consumer, self.claim_idle)

    @guarded("ack")
    async def ack(self, delivery: Delivery) -> None:
        """XACK, then ``acked``: the descriptions go only once the entry can no longer be handed
        out again (should the second step fail, they stay for the retention)."""
        await self._init()
        await self._r.xack(self.keys.feed, self.group, delivery.delivery_id)
        await self._run(delivery.record.id, Acked(delivery.delivery_id))

    def ended(self, consumer: str) -> AsyncIterator[Delivery]:
        return self._read(self.keys.ended, ENDED_GROUP, Fields.TOLD_BY, consumer, self.ended_idle)

    @guarded("ack_ended")
    async def ack_ended(self, delivery: Delivery) -> None:
        await self._init()
        await self._r.xack(self.keys.ended, ENDED_GROUP, delivery.delivery_id)

    @guarded("keep_ended")
    async def keep_ended(self, consumer: str, deliveries: Sequence[Delivery]) -> None:
        """XCLAIM to ``consumer`` with JUSTID: their idle time starts again, nothing else."""
        if not deliveries:
            return
        await self._init()
        ids = [d.delivery_id for d in deliveries]
        for start in range(0, len(ids), PIPELINE_CHUNK):
            chunk = ids[start : start + PIPELINE_CHUNK]
            await self._r.xclaim(self.keys.ended, ENDED_GROUP, consumer, 0, chunk, justid=True)
