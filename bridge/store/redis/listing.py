"""Reading asks without changing them: the pending asks (listed, counted, paged through by age)
and an ask's audit trail."""

from __future__ import annotations

import json
from collections.abc import Sequence

from bridge.record import AskRecord
from bridge.store.keys import Fields, platform_range
from bridge.store.redis import codec
from bridge.store.redis.connect import PIPELINE_CHUNK
from bridge.store.redis.faults import guarded
from bridge.store.redis.indexes import Indexes
from bridge.store.redis.scripts import IndexCreated
from bridge.store.terms import HistoryEvent, PageQuery, PendingPage, merge_history, page_cursor


class Listing(Indexes):
    """The listing half of the contract."""

    @guarded("history")
    async def history(self, ask_id: str) -> list[HistoryEvent]:
        await self._init()
        async with self._r.pipeline(transaction=False) as pipe:  # one slot: one node
            pipe.lrange(self.keys.log(ask_id), 0, -1)
            pipe.lrange(self.keys.noise(ask_id), 0, -1)
            pipe.hget(self.keys.rec(ask_id), Fields.NOISE_DROPPED)
            lifecycle, noise, dropped = await pipe.execute()
        return merge_history(_events(lifecycle), _events(noise), int(dropped or 0))

    @guarded("list_pending")
    async def list_pending(self) -> list[AskRecord]:
        await self._init()
        ids = await self._r.zrange(self.keys.due, 0, -1)
        found: list[AskRecord] = []
        for start in range(0, len(ids), PIPELINE_CHUNK):
            chunk = ids[start : start + PIPELINE_CHUNK]
            async with self._r.pipeline(transaction=False) as pipe:
                for ask_id in chunk:
                    pipe.hgetall(self.keys.rec(ask_id))
                raws = await pipe.execute()
            found.extend(
                codec.record(raw) for raw in raws if raw and raw[Fields.STATUS] == "pending"
            )
        return sorted(found, key=lambda r: r.created_at)

    @guarded("count_pending")
    async def count_pending(self, platform: str | None = None) -> int:
        """One ZCARD (or ZLEXCOUNT for a platform) of the pending index: no ask is read."""
        await self._init()
        if platform is None:
            count: int = await self._r.zcard(self.keys.pending)
        else:
            count = await self._r.zlexcount(self.keys.pending, *platform_range(platform))
        return count

    @guarded("pending_page")
    async def _pending_page(self, query: PageQuery) -> PendingPage:
        """Walks the ``created`` index from the newest ask down, within the age bounds (score
        bounds: no ask outside them is read), one batch per round trip, and parses a record only
        once its body passed the channel filter."""
        await self._init()
        after, before = query.after, query.created_before
        if after is None:
            await self._index_created()
        top = "+inf" if before is None else repr(float(before))
        if after is not None and (before is None or after[0] < before):
            top = repr(after[0])  # ties at the cursor's time are skipped below
        bottom = "-inf" if query.created_after is None else repr(float(query.created_after))
        found: list[AskRecord] = []
        offset = 0
        while True:
            batch: list[tuple[str, float]] = await self._r.zrevrangebyscore(
                self.keys.created, top, bottom, start=offset, num=PIPELINE_CHUNK, withscores=True
            )
            offset += len(batch)
            last = len(batch) < PIPELINE_CHUNK
            if after is not None:
                batch = [(ask_id, at) for ask_id, at in batch if (at, ask_id) < after]
            async with self._r.pipeline(transaction=False) as pipe:
                for ask_id, _ in batch:
                    pipe.hgetall(self.keys.rec(ask_id))
                raws = await pipe.execute()
            for i, ((ask_id, at), raw) in enumerate(zip(batch, raws, strict=True)):
                if not raw or raw[Fields.STATUS] != "pending":
                    continue  # ended (on Cluster its ender may not have unindexed it yet)
                if query.channel is not None and not _in_channel(raw, query.channel):
                    continue
                found.append(codec.record(raw))
                if len(found) == query.limit:
                    end = last and i == len(batch) - 1
                    return PendingPage(found, None if end else page_cursor(at, ask_id))
            if last:
                return PendingPage(found, None)

    async def _index_created(self) -> None:
        """Pending asks that a version before the ``created`` index made (it wrote only the
        ``pending`` index) join it, so a listing shows them. Run by a listing's first page; reads
        the two indexes' sizes only, unless they differ (during a rolling upgrade, or on Cluster
        for an instant after an ask ended): then each member of ``pending`` that ``created``
        lacks is indexed by a script step of its own ask, only while it is pending."""
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.zcard(self.keys.pending)
            pipe.zcard(self.keys.created)
            pending, created = await pipe.execute()
        if created >= pending:
            return
        for start in range(0, pending, PIPELINE_CHUNK):
            members = await self._r.zrange(self.keys.pending, start, start + PIPELINE_CHUNK - 1)
            ids = [str(member).partition("\0")[2] for member in members]
            if not ids:
                return
            scores = await self._r.zmscore(self.keys.created, ids)
            missing = [ask_id for ask_id, at in zip(ids, scores, strict=True) if at is None]
            replies = await self._run_many([(ask_id, IndexCreated()) for ask_id in missing])
            if self._cluster:  # the script could not: another slot
                found = {
                    ask_id: float(reply[1])
                    for ask_id, reply in zip(missing, replies, strict=True)
                    if reply[0] == "pending" and reply[1]
                }
                if found:
                    await self._r.zadd(self.keys.created, found)


def _in_channel(raw: dict[str, str], channel: str) -> bool:
    """Whether the stored body was posted to ``channel`` (a channel or DM user id), before any
    record is built (:meth:`~bridge.store.base.PageQuery.matches`)."""
    where = json.loads(raw[Fields.BODY])["destination"]
    return channel in (where.get("channel"), where.get("user"))


def _events(lines: Sequence[str]) -> list[tuple[int, HistoryEvent]]:
    """Audit-trail lines with their sequence numbers (0 for lines written before there were)."""
    out = []
    for line in lines:
        data = json.loads(line)
        out.append((int(data.pop("seq", 0)), HistoryEvent.model_validate(data)))
    return out
