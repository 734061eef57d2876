"""The sweeper over every store backend: expiry is decided by the ``now`` it is given, each ask is
expired by exactly one of several overlapping sweepers, and re-rendered once -- no sleeping. And
the one step that shows a final state (:mod:`bridge.showing`), from sweeps and from clicks."""

from __future__ import annotations

import asyncio
import time

import pytest

from bridge.answering import Answering, Caller, Outcome
from bridge.clicks import Clicks
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, MessageRef, Responder
from bridge.replies import Replies
from bridge.store.base import Store, SubmitOutcome
from bridge.sweeper import Sweeper
from tests.support.engine_fixtures import StoreFactory, new_record

ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)


async def test_sweep_once_at_a_given_time_expires_and_shows_once(
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


class CountingPoster(MemoryPoster):
    """Each update takes a while; notes how many were in flight at once, and how many asks the
    store still counted pending when each began."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self.in_flight = 0
        self.most = 0
        self.pending_seen: list[int] = []

    async def update(self, record: AskRecord) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        self.pending_seen.append(await self.store.count_pending())
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        await super().update(record)


async def test_a_storm_is_rendered_while_the_store_expires_it_with_bounded_concurrency(
    store: Store,
) -> None:
    recs = [new_record(expires_in=60) for _ in range(24)]
    for rec in recs:
        await store.create(rec)
        await store.set_message(rec.id, MessageRef(platform="memory", channel="C1", message_id="1"))
    poster = CountingPoster(store)
    elsewhere = MemoryPoster("discord")  # its queue stays empty: nothing of this storm is its
    sweeper = Sweeper(store, {"memory": poster, "discord": elsewhere}, renders=3, batch=5)
    shown = await sweeper.sweep_once(now=time.time() + 120)
    assert sorted(r.id for r in shown) == sorted(r.id for r in recs)
    assert sorted(r.id for r in poster.updates) == sorted(r.id for r in recs)
    assert poster.most == 3  # concurrent, never more than the platform's share
    assert poster.pending_seen[0] > 0  # the first update began before the store was done
    assert elsewhere.updates == []
    with pytest.raises(ValueError, match="renders"):
        Sweeper(store, renders=0)


async def test_an_answer_stored_but_never_shown_is_rendered_by_one_sweep(
    make_store: StoreFactory,
) -> None:
    """The replica that stored the answer was killed before it re-rendered the message: a later
    sweep shows the final state, once, however many sweepers run."""
    poster = MemoryPoster()
    first, second = await make_store(), await make_store()
    rec = new_record(deferred=True)
    await first.create(rec)
    await first.set_message(rec.id, MessageRef(platform="memory", channel="C1", message_id="1"))
    assert (await first.submit(rec.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
    sweepers = [Sweeper(first, {"memory": poster}), Sweeper(second, {"memory": poster})]
    at = time.time() + 60
    swept = await asyncio.gather(*(s.sweep_once(now=at) for s in sweepers))
    assert sorted(len(s) for s in swept) == [0, 1]
    (update,) = poster.updated(rec.id)
    assert update.status is AskStatus.ANSWERED and update.answers == YES
    later = await asyncio.gather(*(s.sweep_once(now=at + 3600) for s in sweepers))
    assert later == [[], []] and len(poster.updated(rec.id)) == 1  # shown: done with it


async def test_late_clicks_cost_one_update_per_interval(make_store: StoreFactory) -> None:
    poster = MemoryPoster()
    replicas = [await make_store(), await make_store()]
    answering = [Answering(s, poster, Replies(mention=lambda who: who, text=str)) for s in replicas]
    clicks = [Clicks(a) for a in answering]
    rec = new_record()
    await replicas[0].create(rec)
    ref = await poster.post(rec)
    await replicas[0].set_message(rec.id, ref)
    first = await answering[0].pick(rec.id, 0, 0, Caller("U_ALICE"))
    assert first.outcome is Outcome.ACCEPTED
    clicks[0].show(first)
    for i in range(50):
        verdict = await answering[i % 2].pick(rec.id, 0, 1, Caller(f"U_LATE{i}"))
        assert verdict.outcome is Outcome.ALREADY_ANSWERED and verdict.show_final
        clicks[i % 2].show(verdict)
    for c in clicks:
        await c.drain()
    (update,) = poster.updated(rec.id)
    assert update.status is AskStatus.ANSWERED


class _Gate(MemoryPoster):
    """Every update waits until ``width`` updates are in flight at once, so serial rendering
    never finishes; counts the most that were in flight."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width
        self.in_flight = 0
        self.most = 0
        self.wide = asyncio.Event()

    async def update(self, record: AskRecord) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight >= self.width:
            self.wide.set()
        await self.wide.wait()
        self.in_flight -= 1
        await super().update(record)


async def test_an_expiry_storm_is_shown_concurrently_within_the_bound(
    make_store: StoreFactory,
) -> None:
    store = await make_store()
    poster = _Gate(width=3)
    recs = [new_record(expires_in=60) for _ in range(10)]
    for rec in recs:
        await store.create(rec)
        await store.set_message(rec.id, MessageRef(platform="memory", channel="C1", message_id="1"))
    sweeper = Sweeper(store, {"memory": poster}, renders=3)
    async with asyncio.timeout(10):
        shown = await sweeper.sweep_once(now=time.time() + 120)
    assert sorted(r.id for r in shown) == sorted(r.id for r in recs)
    assert poster.most == 3
    assert all(len(poster.updated(r.id)) == 1 for r in recs)
