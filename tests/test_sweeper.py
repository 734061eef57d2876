"""The sweeper over every store backend: expiry is decided by the ``now`` it is given, each ask is
expired by exactly one of several overlapping sweepers, and re-rendered once -- no sleeping."""

from __future__ import annotations

import asyncio
import time

from engine_fixtures import StoreFactory, new_record

from bridge.ask import AskStatus, MessageRef
from bridge.memory_poster import MemoryPoster
from bridge.sweeper import Sweeper


async def test_sweep_once_at_a_given_time_expires_and_rerenders_once(
    make_store: StoreFactory,
) -> None:
    poster = MemoryPoster()
    first, second = await make_store(), await make_store()
    due, later = new_record(expires_in=60), new_record(expires_in=600)
    for rec in (due, later):
        await first.create(rec)
        await first.set_message(rec.id, MessageRef(platform="memory", channel="C1", message_id="1"))
    sweepers = [Sweeper(first, {"memory": poster}), Sweeper(second, {"memory": poster})]
    assert await sweepers[0].sweep_once() == []  # the clock: nothing is due yet
    at = time.time() + 120
    swept = await asyncio.gather(*(s.sweep_once(now=at) for s in sweepers))
    assert sorted(len(s) for s in swept) == [0, 1]
    (update,) = poster.updated(due.id)
    assert update.status is AskStatus.EXPIRED and update.closed_at == at
    assert poster.updated(later.id) == []
    assert [r.id for r in await second.list_pending()] == [later.id]
