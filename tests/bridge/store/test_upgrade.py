"""Asks written by the store as it was before its rules and scripts were rebuilt are answered by
today's store: the same keys and record fields, read by new scripts.

``data/asks_written_by_31ca9b9.json`` is a Redis keyspace as the store of commit 31ca9b9 (one Lua
script for every operation) left it, dumped with every key's type, value and time to live: a
one-click ask, an approval two of three people must give (one has), an ask with reminders due a
minute after it was made, and a deferred ask already answered (its answer waiting on the feed).
Each ask expires ten years after it was written. The file is history: it is not regenerated.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from bridge.models import Answer
from bridge.record import AskStatus, Responder
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore
from tests.support.redis_server import RedisServer

WRITTEN = json.loads((Path(__file__).parent / "data" / "asks_written_by_31ca9b9.json").read_text())
PREFIX = "askbridge"
ONE, APPROVAL, REMINDED, DEFERRED = (
    "OldOneClickAsk00000001",
    "OldApprovalAsk00000002",
    "OldRemindedAsk00000003",
    "OldDeferredAsk00000004",
)
BOB = Responder(user_id="U0BOB", name="bob")
AGREED = (
    Answer(question="Question number 0?", selected=("Yes",)),
    Answer(question="Question number 1?", selected=("No", "Later")),
)


async def restore(client: Redis, keys: dict[str, Any]) -> None:
    """Write the dumped keyspace back, each key with its type and time to live."""
    await client.flushall()
    for key, held in keys.items():
        value = held["value"]
        kind = held["type"]
        if kind == "hash":
            await client.hset(key, mapping=value)
        elif kind == "list":
            await client.rpush(key, *value)
        elif kind == "set":
            await client.sadd(key, *value)
        elif kind == "zset":
            await client.zadd(key, {member: score for member, score in value})
        elif kind == "string":
            await client.set(key, value)
        elif kind == "stream":
            for entry_id, fields in value["entries"]:
                await client.xadd(key, fields, id=entry_id)
            for group in value["groups"]:
                await client.xgroup_create(key, group, id="0")
        else:
            raise AssertionError(f"{key}: a {kind} this test does not restore")
        if held["pttl"] > 0:
            await client.pexpire(key, held["pttl"])


@pytest.fixture
async def upgraded(redis_srv: RedisServer) -> AsyncIterator[RedisStore]:
    client = Redis.from_url(redis_srv.url, decode_responses=True)
    try:
        await restore(client, WRITTEN["keys"])
    finally:
        await client.aclose()
    store = RedisStore.from_url(redis_srv.url)
    try:
        yield store
    finally:
        await store.aclose()


async def test_the_old_asks_read_as_they_were_written(upgraded: RedisStore) -> None:
    pending = {r.id for r in await upgraded.list_pending()}
    assert pending == {ONE, APPROVAL, REMINDED}
    approval = await upgraded.get(APPROVAL)
    assert approval is not None and approval.required == 2
    assert [s.user_id for s in approval.submissions] == ["U0ALICE"]
    assert approval.message is not None and approval.message.channel == "C0OLD"
    kinds = [e.kind for e in await upgraded.history(APPROVAL)]
    assert kinds[0] == "created" and "posted" in kinds


async def test_a_one_click_ask_is_answered_once(upgraded: RedisStore) -> None:
    carol = Responder(user_id="U0CAROL", name="carol")
    first = await upgraded.pick(ONE, carol, 0, 1)
    assert first.outcome is SubmitOutcome.ACCEPTED
    again = await upgraded.pick(ONE, BOB, 0, 0)
    assert again.outcome is SubmitOutcome.ALREADY_ANSWERED
    record = await upgraded.get(ONE)
    assert record is not None and record.status is AskStatus.ANSWERED
    assert record.answers is not None and record.answers[0].selected == ("No",)


async def test_the_second_approver_completes_the_old_approval(upgraded: RedisStore) -> None:
    result = await upgraded.submit(APPROVAL, BOB, AGREED)
    assert result.outcome is SubmitOutcome.ACCEPTED
    record = await upgraded.get(APPROVAL)
    assert record is not None and record.status is AskStatus.ANSWERED
    assert sorted(s.user_id for s in record.submissions) == ["U0ALICE", "U0BOB"]


async def test_the_old_reminder_falls_due_and_is_claimed_once(upgraded: RedisStore) -> None:
    record = await upgraded.get(REMINDED)
    assert record is not None and record.follow_ups is not None
    due = record.created_at + 61
    claims = await upgraded.claim_timers(now=due)
    assert [(c.ask_id, c.kind) for c in claims] == [(REMINDED, "remind")]
    assert await upgraded.claim_timers(now=due) == []


async def test_the_old_deferred_answer_is_delivered_from_the_feed(upgraded: RedisStore) -> None:
    deliveries = upgraded.feed("after-the-upgrade")
    delivery = await anext(deliveries)
    assert delivery.record.id == DEFERRED and delivery.record.status is AskStatus.ANSWERED
    await upgraded.ack(delivery)
    await deliveries.aclose()  # type: ignore[attr-defined]
