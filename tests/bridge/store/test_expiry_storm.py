"""An expiry storm's server side on Redis: a sweep's script call ends many asks, and what each
ending promises still holds -- every waiting process is woken, the pending index is left, the
wakers go -- while it skips what nobody needs: no wake-up published on a channel nobody listens
on (a stopped process's), no body read for the platform."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any

import pytest
from redis.asyncio import Redis

from bridge.record import AskStatus, MessageRef
from bridge.store.keys import Fields
from bridge.store.redis import RedisStore
from tests.support.engine_fixtures import new_record, url_for

MESSAGE = MessageRef(platform="memory", channel="C1", message_id="1")


async def _drained(store: RedisStore, now: float) -> list[Any]:
    return [e for batch in [b async for b in store.sweep_batches(now, size=500)] for e in batch]


async def test_a_storm_wakes_who_listens_and_publishes_nothing_to_a_stopped_process(
    request: pytest.FixtureRequest,
) -> None:
    url = url_for("redis", request)
    assert url is not None
    prefix = f"storm{secrets.token_hex(3)}"
    waiting, stopped, sweeper = (RedisStore.from_url(url, prefix=prefix) for _ in range(3))
    raw = Redis.from_url(url, decode_responses=True)
    # a pattern subscription is not counted by PUBSUB NUMSUB: it sees what is published on the
    # stopped process's channel, and on the shared one, without making them heard ones
    spy = raw.pubsub()
    await spy.psubscribe(stopped._wakeups.channel, sweeper.keys.events)
    try:
        theirs = [new_record(expires_in=60) for _ in range(40)]  # two script calls of 20
        gone = [new_record(expires_in=90) for _ in range(7)]  # the third call: none heard
        for i, rec in enumerate(theirs):
            await waiting.create(rec)
            if i % 2:
                await waiting.set_message(rec.id, MESSAGE)
        for rec in gone:  # created by a process that stopped: its channel stays a waker
            await stopped.create(rec)
            await stopped.set_message(rec.id, MESSAGE)
        # one waited for by a process from before per-process channels: a lease, no wakers
        await raw.delete(sweeper.keys.ask_keys(gone[3].id)[4])
        waits = [asyncio.create_task(waiting.wait(theirs[i].id, 10)) for i in (0, 21, 39)]
        await waiting.listening()
        ended = await _drained(sweeper, time.time() + 120)
        assert sorted(e.ask_id for e in ended) == sorted(r.id for r in theirs + gone)
        assert all(e.expired and e.platform == "memory" for e in ended)
        for done in await asyncio.gather(*waits):
            assert done is not None and done.status is AskStatus.EXPIRED
        published = []
        while (message := await spy.get_message(timeout=0.5)) is not None:
            if message["type"] == "pmessage":
                published.append((message["channel"], message["data"]))
        # nothing sent to nobody; the old waiter hears the shared channel
        assert published == [(sweeper.keys.events, gone[3].id)]
        for rec in theirs + gone:
            assert await raw.exists(sweeper.keys.ask_keys(rec.id)[4]) == 0  # the wakers went
        assert await sweeper.count_pending() == 0
    finally:
        await spy.aclose()
        await raw.aclose()
        for store in (waiting, stopped, sweeper):
            await store.aclose()


async def test_an_ask_created_without_the_platform_field_expires_alike(
    request: pytest.FixtureRequest,
) -> None:
    """An earlier version wrote no 'platform' field: the sweep finds it in the body, and the ask
    leaves the pending index under its platform. A settled ask keeps no such field."""
    url = url_for("redis", request)
    assert url is not None
    store = RedisStore.from_url(url, prefix=f"old{secrets.token_hex(3)}")
    raw = Redis.from_url(url, decode_responses=True)
    try:
        recs = [new_record(expires_in=60) for _ in range(25)]
        for i, rec in enumerate(recs):
            await store.create(rec)
            assert await raw.hget(store.keys.rec(rec.id), Fields.PLATFORM) == "memory"
            if i % 3 == 0:
                await raw.hdel(store.keys.rec(rec.id), Fields.PLATFORM)  # as an earlier version
        assert await store.count_pending("memory") == len(recs)
        at = time.time() + 120
        ended = await _drained(store, at)
        assert sorted((e.ask_id, e.platform) for e in ended) == sorted(
            (r.id, "memory") for r in recs
        )
        assert await store.count_pending("memory") == 0
        for rec in recs:  # unposted: settled by the ending itself
            got = await store.get(rec.id)
            assert got is not None and got.status is AskStatus.EXPIRED and got.closed_at == at
            fields = await raw.hkeys(store.keys.rec(rec.id))
            assert Fields.PLATFORM not in fields and Fields.BODY in fields
    finally:
        await raw.aclose()
        await store.aclose()


async def test_the_platform_read_from_a_body_is_the_destinations_whatever_comes_before_it(
    request: pytest.FixtureRequest,
) -> None:
    """The body search for the platform (an ask without the 'platform' field) stops at the first
    '{"platform":"'; in a body whose fields come in another order -- a context object holding a
    "platform" key before the destination -- that one is not the destination's, and the search
    goes on to the destination's own."""
    url = url_for("redis", request)
    assert url is not None
    store = RedisStore.from_url(url, prefix=f"order{secrets.token_hex(3)}")
    raw = Redis.from_url(url, decode_responses=True)
    try:
        rec = new_record(expires_in=60).model_copy(update={"context": {"platform": "decoy"}})
        await store.create(rec)
        key = store.keys.rec(rec.id)
        body = json.loads(await raw.hget(key, Fields.BODY))
        reordered = {"context": body.pop("context"), **body}  # the decoy first
        text = json.dumps(reordered, separators=(",", ":"))
        assert text.index('{"platform":"decoy"') < text.index('"destination":{"platform":"memory"')
        await raw.hset(key, Fields.BODY, text)
        await raw.hdel(key, Fields.PLATFORM)  # as an earlier version: the body is searched
        ended = await _drained(store, time.time() + 120)
        assert [(e.ask_id, e.platform) for e in ended] == [(rec.id, "memory")]
        assert await store.count_pending("memory") == 0
    finally:
        await raw.aclose()
        await store.aclose()
