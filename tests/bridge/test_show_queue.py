"""An expiry storm bigger than the sweeper's show queue, shown by a slow platform: the sweep
round returns without waiting for the renders, a reminder due meanwhile is posted meanwhile, the
queue never holds more than its bound, every ask is shown exactly once and its expiry counted
once; stopping the sweeper is quick whatever the backlog."""

from __future__ import annotations

import asyncio
import functools
import logging
import time

import pytest
from prometheus_client import REGISTRY

from bridge import metrics
from bridge.aio import stop
from bridge.memory_poster import MemoryPoster
from bridge.record import AskRecord, FollowUps, MessageRef
from bridge.show_queue import ShowQueue
from bridge.showing import show_final
from bridge.store.base import Store
from bridge.sweeper import Sweeper
from tests.support.engine_fixtures import StoreFactory, new_record

pytestmark = pytest.mark.parametrize("store_kind", ["memory", "redis"])
HERE = MessageRef(platform="memory", channel="C1", message_id="1")


def expired_count() -> float:
    labels = {"platform": "memory", "status": "expired"}
    return REGISTRY.get_sample_value("ask_bridge_asks_ended_total", labels) or 0.0


def expired_lines(caplog: pytest.LogCaptureFixture, ask_id: str) -> int:
    found = [getattr(r, "fields", None) for r in caplog.records if r.name == "bridge.lifecycle"]
    return sum(
        1
        for f in found
        if isinstance(f, dict) and f.get("ask_id") == ask_id and f.get("step") == "expired"
    )


class SlowPoster(MemoryPoster):
    """Each update takes a while (a rate-limited platform); notes the sweeper's backlog as each
    begins. ``hold`` makes every update wait until it is set."""

    def __init__(self, delay: float = 0.02) -> None:
        super().__init__()
        self.delay = delay
        self.sweeper: Sweeper | None = None
        self.backlogs: list[int] = []
        self.hold: asyncio.Event | None = None
        self.began = 0
        self.two_began = asyncio.Event()

    async def update(self, record: AskRecord) -> None:
        if self.sweeper is not None:
            self.backlogs.append(self.sweeper.backlog("memory"))
        self.began += 1
        if self.began >= 2:
            self.two_began.set()
        if self.hold is not None:
            await self.hold.wait()
        await asyncio.sleep(self.delay)
        await super().update(record)


async def posted(store: Store, n: int, *, expires_in: float) -> list[AskRecord]:
    recs = [new_record(expires_in=expires_in) for _ in range(n)]
    for rec in recs:
        await store.create(rec)
        await store.set_message(rec.id, HERE)
    return recs


async def test_a_storm_bigger_than_the_queue_does_not_hold_back_the_rounds(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.lifecycle")
    store = await make_store(render_interval=0.2)  # an ask left is named again 0.2 s later
    storm = await posted(store, 30, expires_in=60)
    remind = new_record().model_copy(update={"follow_ups": FollowUps(remind_after=200)})
    await store.create(remind)
    await store.set_message(remind.id, HERE)
    poster = SlowPoster(delay=0.1)
    sweeper = Sweeper(store, {"memory": poster}, renders=2, backlog=8, batch=5)
    poster.sweeper = sweeper
    before = expired_count()
    start = time.time()

    await sweeper.sweep(now=start + 120)  # all 30 expire; 8 queued, the rest left
    assert 0 < sweeper.backlog() <= 8 and len(poster.updates) < 8  # it did not wait for them
    assert before < expired_count() < before + 30  # those left now, the rest when shown
    await sweeper.sweep(now=start + 320)  # the reminder is due: posted while the storm is shown
    assert [(r.id, n) for r, n in poster.reminders] == [(remind.id, 1)]
    assert sweeper.backlog() > 0 and len(poster.updates) < 30

    async with asyncio.timeout(30):
        while len(poster.updates) < 30:
            await sweeper.sweep(now=time.time() + 320)  # later sweeps name the rest again
            assert sweeper.backlog() <= 8
            await asyncio.sleep(0.05)
        await sweeper.drained()
    assert sorted(r.id for r in poster.updates) == sorted(r.id for r in storm)  # each once
    assert max(poster.backlogs) <= 8
    assert expired_count() == before + 30
    assert all(expired_lines(caplog, rec.id) == 1 for rec in storm)
    assert len(poster.reminders) == 1


async def test_an_ask_named_by_a_sweep_but_shown_before_it_is_offered_is_not_shown_again(
    make_store: StoreFactory,
) -> None:
    """The race of a sweep's visit and a render: the visit names an ask claimed but not yet
    marked shown; the renderer marks it and leaves the queue; the sweep then offers it. Its
    claim must not be granted again once the render interval has passed."""
    store = await make_store(render_interval=0.2)
    (rec,) = await posted(store, 1, expires_in=60)
    poster = MemoryPoster()
    shows = functools.partial(show_final, store, {"memory": poster}, unshown=True)
    queue = ShowQueue(store, shows, platform="memory", renders=2)
    async for named in store.sweep_batches(now=time.time() + 120):  # the visit: expired, named
        assert [e.ask_id for e in named] == [rec.id]
        assert await show_final(store, poster, rec.id) is not None  # meanwhile shown, marked
        await asyncio.sleep(0.25)  # the render interval passes
        for ended in named:
            assert queue.offer(ended)  # the stale naming reaches the queue
        await queue.drained()
    assert [r.id for r in poster.updates] == [rec.id]  # shown once
    assert await store.claim_render(rec.id, unshown=True) is None
    assert await store.claim_render(rec.id) is not None  # a late click's re-render still may


async def test_sweep_once_waits_for_what_it_queued(make_store: StoreFactory) -> None:
    store = await make_store()
    storm = await posted(store, 12, expires_in=60)
    poster = SlowPoster()
    sweeper = Sweeper(store, {"memory": poster}, renders=3, backlog=20)
    shown = await sweeper.sweep_once(now=time.time() + 120)
    assert sorted(r.id for r in shown) == sorted(r.id for r in storm)
    assert sweeper.backlog() == 0 and len(poster.updates) == 12
    assert sweeper.backlog("discord") == 0  # no poster here: nothing of it queued
    with pytest.raises(ValueError, match="bound"):
        Sweeper(store, {"memory": poster}, backlog=0)


async def test_stopping_with_a_backlog_is_quick_and_a_later_sweep_shows_it(
    make_store: StoreFactory,
) -> None:
    store = await make_store(render_interval=0.2)
    storm = await posted(store, 12, expires_in=0.2)
    stuck = SlowPoster()
    stuck.hold = asyncio.Event()  # the platform never answers
    sweeper = Sweeper(store, {"memory": stuck}, interval=0.05, renders=2, backlog=6)
    before = expired_count()
    await asyncio.sleep(0.3)  # past the asks' expiry: a clock, nothing to await
    running = asyncio.create_task(sweeper.run())
    async with asyncio.timeout(10):
        await stuck.two_began.wait()  # both renderers stuck on the platform
    async with asyncio.timeout(2):
        assert await stop(running) is None  # serve's SIGTERM path
    assert sweeper.backlog() == 0 and stuck.updates == []
    assert expired_count() == before + 12  # queued, stuck or left: each counted once

    await asyncio.sleep(0.3)  # the abandoned claims lapse
    poster = MemoryPoster()
    shown = await Sweeper(await make_store(render_interval=0.2), {"memory": poster}).sweep_once()
    assert sorted(r.id for r in shown) == sorted(r.id for r in storm)
    assert sorted(r.id for r in poster.updates) == sorted(r.id for r in storm)
    assert expired_count() == before + 12  # shown later, not counted again


class Limited(MemoryPoster):
    """Its client answers the first ``limited`` updates with a 429 (counted as the Slack and
    Discord clients count theirs, then waited out); notes how many updates were in flight as
    each began."""

    def __init__(self, limited: int) -> None:
        super().__init__()
        self.limited = limited
        self.in_flight = 0
        self.seen: list[int] = []

    async def update(self, record: AskRecord) -> None:
        self.in_flight += 1
        self.seen.append(self.in_flight)
        if len(self.seen) <= self.limited:
            metrics.platform_error("memory", "ratelimited")
        await asyncio.sleep(0.02)
        self.in_flight -= 1
        await super().update(record)


async def test_the_queue_slows_down_on_429s_and_speeds_up_after(store: Store) -> None:
    await posted(store, 40, expires_in=60)
    poster = Limited(limited=4)
    sweeper = Sweeper(store, {"memory": poster}, renders=4)
    async with asyncio.timeout(30):
        shown = await sweeper.sweep_once(now=time.time() + 120)
    assert len(shown) == 40
    assert poster.seen[:4] == [1, 2, 3, 4]  # all four at once, each answered 429
    assert poster.seen[4] == 1  # then one at a time
    assert max(poster.seen[5:]) == 4  # and back to four as updates pass without one
