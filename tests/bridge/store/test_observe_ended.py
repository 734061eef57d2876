"""The store contract for pipelines, over every backend: ``observe`` watches an ask end without
taking its outcome (``ask-bridge wait``), and the ended-asks stream hands every ending to the
outcome notifications once per consumer group."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from bridge.aio import next_within, stop
from bridge.models import Answer
from bridge.record import AskStatus, Responder
from bridge.store.base import Store
from bridge.store.redis import RedisStore
from bridge.store.terms import Delivery
from tests.support.engine_fixtures import StoreFactory, new_record, url_for

ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)


def raw_client(kind: str, url: str) -> Any:
    if kind == "cluster":
        return RedisCluster.from_url(url.replace("+cluster", ""), decode_responses=True)
    return Redis.from_url(url, decode_responses=True)


async def deliveries(
    source: Store, consumer: str, *, within: float = 3.0, feed: bool = False
) -> list[Delivery]:
    """What ``consumer`` is handed within ``within`` seconds (ended-asks stream, or the feed)."""
    stream = source.feed(consumer) if feed else source.ended(consumer)
    got: list[Delivery] = []
    deadline = time.monotonic() + within
    try:
        while (left := deadline - time.monotonic()) > 0:
            delivery = await next_within(stream, left)
            if delivery is None:
                break
            got.append(delivery)
    finally:
        await stream.aclose()  # type: ignore[attr-defined]
    return got


async def test_observe_sees_the_end_and_leaves_the_answer_to_the_waiter(
    make_store: StoreFactory,
) -> None:
    waiting, watching, clicking = await make_store(), await make_store(), await make_store()
    rec = new_record()
    await waiting.create(rec)
    waiter = asyncio.create_task(waiting.wait(rec.id, 10))
    observers = [asyncio.create_task(watching.observe(rec.id, 10)) for _ in range(3)]
    await asyncio.sleep(0.2)
    assert not any(o.done() for o in observers)
    await clicking.submit(rec.id, ALICE, YES)
    for observer in observers:
        seen = await observer
        assert seen is not None and seen.status is AskStatus.ANSWERED and seen.answers == YES
    got = await waiter
    assert got is not None and got.answers == YES and not got.deferred  # taken by the waiter
    await waiting.confirm(rec.id)
    assert await watching.observe(rec.id, 1) == await watching.get(rec.id)  # ended: at once


async def test_observe_leaves_a_deferred_answer_to_the_feed(make_store: StoreFactory) -> None:
    store = await make_store()
    rec = new_record(deferred=True)
    await store.create(rec)
    observer = asyncio.create_task(store.observe(rec.id, 10))
    await asyncio.sleep(0.2)
    await store.submit(rec.id, ALICE, YES)
    assert (await observer).status is AskStatus.ANSWERED  # type: ignore[union-attr]
    fed = await deliveries(store, "c1", feed=True, within=2)
    assert [d.record.id for d in fed] == [rec.id]


async def test_an_observer_holds_no_lease(make_store: StoreFactory) -> None:
    """The creator's lease lapsed (it died): an observer must not make the answer wait for a
    waiter that will never take it -- it goes to the feed at once, as without the observer."""
    store = await make_store(lease_ttl=0.2)
    rec = new_record()
    await store.create(rec)
    await asyncio.sleep(0.4)
    observer = asyncio.create_task(store.observe(rec.id, 10))
    await asyncio.sleep(0.5)  # longer than a lease: nothing may have refreshed one
    await store.submit(rec.id, ALICE, YES)
    assert (await observer).deferred  # type: ignore[union-attr]
    fed = await deliveries(store, "c1", feed=True, within=2)
    assert [d.record.id for d in fed] == [rec.id]


async def test_observe_times_out_and_knows_no_unknown_ask(store: Store) -> None:
    rec = new_record()
    await store.create(rec)
    t0 = time.monotonic()
    assert await store.observe(rec.id, 0.3) is None
    assert time.monotonic() - t0 >= 0.29
    assert await store.observe("unknown", 5) is None
    assert (await store.get(rec.id)).status is AskStatus.PENDING  # type: ignore[union-attr]


async def test_every_ending_reaches_the_ended_stream_once(make_store: StoreFactory) -> None:
    store = await make_store()
    answered, deferred, expired, cancelled, pending = (new_record() for _ in range(5))
    deferred = new_record(deferred=True)
    expired = new_record(expires_in=60)
    for rec in (answered, deferred, expired, cancelled, pending):
        await store.create(rec)
    await store.submit(answered.id, ALICE, YES)
    await store.submit(answered.id, ALICE, YES)  # a repeat ends nothing
    await store.submit(deferred.id, ALICE, YES)
    await store.close(cancelled.id, AskStatus.CANCELLED)
    await store.close(cancelled.id, AskStatus.CANCELLED)  # a retry ends nothing more
    await store.sweep(time.time() + 120)
    got = await deliveries(store, "w1")
    assert sorted(d.record.id for d in got) == sorted(
        r.id for r in (answered, deferred, expired, cancelled)
    )
    status = {d.record.id: d.record.status for d in got}
    assert status[expired.id] is AskStatus.EXPIRED
    assert status[cancelled.id] is AskStatus.CANCELLED
    # not acknowledged: the same consumer gets them again after a restart
    again = await deliveries(store, "w1", within=1)
    assert {d.delivery_id for d in again} == {d.delivery_id for d in got}
    for delivery in again:
        await store.ack_ended(delivery)
    assert await deliveries(store, "w1", within=1) == []
    # the answers feed is unchanged by the ended stream: only the deferred answer is there
    fed = await deliveries(store, "f1", feed=True, within=1)
    assert {d.record.id for d in fed} == {deferred.id}


async def test_consumers_share_the_ended_stream_and_take_over_the_idle(
    make_store: StoreFactory,
) -> None:
    a, b = await make_store(ended_idle=2.0), await make_store(ended_idle=2.0)
    recs = [new_record() for _ in range(20)]
    for rec in recs:
        await a.create(rec)
    stream_a, stream_b = a.ended("wa"), b.ended("wb")
    got: dict[str, list[Delivery]] = {"wa": [], "wb": []}
    all_in = asyncio.Event()

    async def consume(name: str, stream: object, store: Store) -> None:
        while True:
            delivery = await anext(stream)  # type: ignore[call-overload]
            got[name].append(delivery)
            await store.ack_ended(delivery)
            if len(got["wa"]) + len(got["wb"]) >= len(recs):
                all_in.set()

    tasks = [
        asyncio.create_task(consume("wa", stream_a, a)),
        asyncio.create_task(consume("wb", stream_b, b)),
    ]
    await asyncio.sleep(0.3)
    for rec in recs:
        await (a if len(rec.id) % 2 else b).close(rec.id, AskStatus.CANCELLED)
    await asyncio.wait_for(all_in.wait(), 10)
    await asyncio.sleep(2.2)  # past the idle time: nothing is handed out twice all the same
    for task in tasks:
        await stop(task)  # one cancel can be swallowed by redis-py on 3.11: see bridge.aio
    for stream in (stream_a, stream_b):
        await stream.aclose()
    ids = [d.record.id for d in got["wa"] + got["wb"]]
    assert sorted(ids) == sorted(r.id for r in recs)  # each once, across both

    # a consumer that died holding a delivery: another takes it over once it is idle
    late = new_record()
    await a.create(late)
    await a.close(late.id, AskStatus.CANCELLED)
    (held,) = await deliveries(a, "dead", within=0.5)
    assert await deliveries(b, "wb", within=0.3) == []  # not idle yet
    await a.keep_ended("dead", [held])  # ... and kept alive by its consumer
    await asyncio.sleep(1.5)
    assert await deliveries(b, "wb", within=0.2) == []
    await asyncio.sleep(1.0)  # its consumer is gone: idle past ended_idle
    (taken,) = await deliveries(b, "wb", within=1.0)
    assert taken.delivery_id == held.delivery_id


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_an_ending_whose_process_died_is_told_by_a_sweep(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The process that ended the ask died before adding it to the ended stream (seen here as
    the stream losing the entry and the record still saying ``told`` 0): a sweep adds it."""
    url = url_for(kind, request)
    assert url is not None
    prefix = f"told{secrets.token_hex(3)}"
    store = RedisStore.from_url(url, prefix=prefix)
    node = raw_client(kind, url)
    try:
        rec = new_record()
        await store.create(rec)
        await store.close(rec.id, AskStatus.CANCELLED)
        (first,) = await deliveries(store, "w1", within=1)
        await store.ack_ended(first)
        await node.hset(store.keys.rec(rec.id), mapping={"told": "0"})
        await node.hdel(store.keys.rec(rec.id), "told_by")
        await node.zadd(store.keys.due, {rec.id: 0})
        await store.sweep()
        (again,) = await deliveries(store, "w1", within=1)
        assert again.record.id == rec.id
        await store.ack_ended(again)
        assert await node.zscore(store.keys.due, rec.id) is None  # settled now
    finally:
        await store.aclose()
        await node.aclose()
