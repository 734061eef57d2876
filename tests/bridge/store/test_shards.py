"""Wake-ups on a real 3-node Cluster go through sharded pub/sub, to the waiting process only, and
none is lost when a node's connection drops or a slot moves to another node.

Each test looks from outside: spies subscribed on the nodes, and each node's ``CLIENT LIST``
(``ssub`` counts a connection's sharded subscriptions, ``tot-net-out`` the bytes the node sent it).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from bridge.models import Answer
from bridge.record import AskRecord, Responder
from bridge.store.redis import RedisStore
from bridge.store.redis.shards import slot_tag
from bridge.store.terms import SubmitOutcome
from tests.support.engine_fixtures import new_record
from tests.support.redis_server import RedisServer, redis_cluster

ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)


def test_every_slot_has_a_tag_that_hashes_to_it() -> None:
    tags = [slot_tag(slot) for slot in range(REDIS_CLUSTER_HASH_SLOTS)]
    assert [key_slot(f"p:wake:t:{{{t}}}".encode()) for t in tags] == list(range(len(tags)))
    assert max(len(t) for t in tags) <= 5


@pytest.fixture
async def nodes(cluster: list[RedisServer]) -> AsyncIterator[list[Redis]]:
    """A plain client on each node (to spy and to read its CLIENT LIST)."""
    clients = [Redis.from_url(node.url, decode_responses=True) for node in cluster]
    yield clients
    for client in clients:
        await client.aclose()


def serving(nodes: list[Redis], key: str) -> int:
    """Which node serves ``key`` (the test cluster splits the slots in three equal ranges)."""
    return min(key_slot(key.encode()) // (REDIS_CLUSTER_HASH_SLOTS // len(nodes)), len(nodes) - 1)


async def subscribers(node: Redis) -> dict[str, dict[str, Any]]:
    """The node's connections holding any subscription, by id."""
    return {
        c["id"]: c
        for c in await node.client_list()
        if any(int(c.get(k, 0)) for k in ("sub", "psub", "ssub"))
    }


async def sharded_on(node: Redis, channel: str, count: int = 1) -> None:
    """Return once ``count`` connections SSUBSCRIBEd ``channel`` on this node."""
    async with asyncio.timeout(10):
        while True:
            if (await node.execute_command("PUBSUB", "SHARDNUMSUB", channel))[1] == count:
                return
            await asyncio.sleep(0.02)


def stores(url: str, prefix: str, n: int) -> list[RedisStore]:
    return [RedisStore.from_url(url, prefix=prefix) for _ in range(n)]


def url_of(cluster: list[RedisServer]) -> str:
    return f"redis+cluster://127.0.0.1:{cluster[0].port}"


async def spread(store: RedisStore, nodes: list[Redis], per_node: int) -> list[AskRecord]:
    """Created asks, ``per_node`` on each node (by their keys' slot)."""
    by_node: list[list[AskRecord]] = [[] for _ in nodes]
    while min(len(group) for group in by_node) < per_node:
        rec = new_record()
        group = by_node[serving(nodes, store.keys.rec(rec.id))]
        if len(group) < per_node:
            group.append(rec)
            await store.create(rec)
    return [rec for group in by_node for rec in group]


async def test_a_wake_up_is_spublished_in_its_slot_and_never_broadcast(
    cluster: list[RedisServer], nodes: list[Redis]
) -> None:
    prefix = f"sh{secrets.token_hex(3)}"
    mine, clicks = stores(url_of(cluster), prefix, 2)
    try:
        x = new_record()
        await mine.create(x)
        waiting = asyncio.create_task(mine.wait(x.id, 10))
        await mine.listening()
        home = serving(nodes, mine.keys.rec(x.id))
        channel = mine._wakeups.channel_for(x.id)
        assert key_slot(channel.encode()) == key_slot(mine.keys.rec(x.id).encode())
        await sharded_on(nodes[home], channel)
        # spies: every plain channel of the deployment, on each other node; the sharded one
        plain = [nodes[i].pubsub() for i in range(len(nodes)) if i != home]
        for spy in plain:
            await spy.psubscribe(f"{prefix}:*")
        sharded = nodes[home].pubsub()
        await sharded.ssubscribe(channel)
        await sharded_on(nodes[home], channel, 2)
        assert (await clicks.submit(x.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        async with asyncio.timeout(5):
            done = await waiting
        assert done is not None and done.answers == YES and not done.deferred
        heard = []
        while (message := await sharded.get_message(timeout=0.5)) is not None:
            if message["type"] == "smessage":
                heard.append(message["data"])
        assert len(heard) == 1
        ask_id, _, carried = heard[0].partition("\n")
        assert ask_id == x.id and "answered" in json.loads(carried)
        # a plain PUBLISH reaches every node: these spies would have heard one (the control)
        await nodes[home].publish(f"{prefix}:control", "x")
        for spy in plain:
            kinds = []
            while (message := await spy.get_message(timeout=0.5)) is not None:
                if message["type"] == "pmessage":
                    kinds.append(message["channel"])
            assert kinds == [f"{prefix}:control"]
            await spy.aclose()
        await sharded.aclose()
    finally:
        for store in (mine, clicks):
            await store.aclose()


async def test_an_answer_costs_a_replica_that_waits_in_the_same_slot_nothing(
    cluster: list[RedisServer], nodes: list[Redis]
) -> None:
    """Another replica waits for another ask of the very same slot (so it holds that slot's
    subscription too): not one byte reaches it when this one's ask is answered."""
    prefix = f"sr{secrets.token_hex(3)}"
    mine, other, clicks = stores(url_of(cluster), prefix, 3)
    try:
        x = new_record()
        slot = key_slot(mine.keys.rec(x.id).encode())
        y = new_record()
        while key_slot(mine.keys.rec(y.id).encode()) != slot:
            y = new_record()
        await other.create(y)
        theirs = asyncio.create_task(other.wait(y.id, 30))
        await other.listening()
        await sharded_on(
            nodes[serving(nodes, mine.keys.rec(y.id))], other._wakeups.channel_for(y.id)
        )
        others = {i: await subscribers(node) for i, node in enumerate(nodes)}
        await mine.create(x)
        waiting = asyncio.create_task(mine.wait(x.id, 10))
        await mine.listening()
        home = serving(nodes, mine.keys.rec(x.id))
        await sharded_on(nodes[home], mine._wakeups.channel_for(x.id))
        before = {i: await subscribers(node) for i, node in enumerate(nodes)}
        assert (await clicks.submit(x.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        assert await asyncio.wait_for(waiting, 5) is not None
        await asyncio.sleep(0.2)
        after = {i: await subscribers(node) for i, node in enumerate(nodes)}
        for i in others:
            for cid in others[i]:  # the other replica's subscriptions: nothing sent to them
                sent = int(after[i][cid]["tot-net-out"]) - int(before[i][cid]["tot-net-out"])
                assert sent == 0, (i, others[i][cid])
        mine_ids = set(before[home]) - set(others[home])
        grown = [
            int(after[home][c]["tot-net-out"]) - int(before[home][c]["tot-net-out"])
            for c in mine_ids
        ]
        assert max(grown) > 0  # the control: this process's sharded connection got the wake-up
        assert not theirs.done()
        await clicks.submit(y.id, ALICE, YES)
        assert await asyncio.wait_for(theirs, 5) is not None
    finally:
        for store in (mine, other, clicks):
            await store.aclose()


async def test_waits_spread_over_every_node_all_resume(
    cluster: list[RedisServer], nodes: list[Redis]
) -> None:
    prefix = f"sa{secrets.token_hex(3)}"
    mine, clicks = stores(url_of(cluster), prefix, 2)
    try:
        recs = await spread(mine, nodes, 4)
        waits = [asyncio.create_task(mine.wait(rec.id, 20)) for rec in recs]
        await mine.listening()
        for rec in recs:
            await sharded_on(
                nodes[serving(nodes, mine.keys.rec(rec.id))], mine._wakeups.channel_for(rec.id)
            )
        for node in nodes:  # one connection per node carries this process's sharded channels
            assert sum(1 for c in (await subscribers(node)).values() if int(c["ssub"])) >= 1
        for rec in recs:
            assert (await clicks.submit(rec.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        async with asyncio.timeout(10):
            done = await asyncio.gather(*waits)
        assert all(d is not None and d.answers == YES and not d.deferred for d in done)
    finally:
        for store in (mine, clicks):
            await store.aclose()


def kill_and_answer(url: str, prefix: str, node: RedisServer, ask_id: str) -> None:
    """Kill the node's sharded connections, then answer: with this thread's event loop blocked
    all along, so the waiting store cannot subscribe anew before the answer's SPUBLISH."""

    async def run() -> None:
        raw = Redis.from_url(node.url, decode_responses=True)
        answering = RedisStore.from_url(url, prefix=prefix)
        try:
            for cid, client in (await subscribers(raw)).items():
                if int(client["ssub"]):
                    await raw.client_kill_filter(_id=cid)
            # the sharded connection is down: this SPUBLISH reaches nobody
            assert (await answering.submit(ask_id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        finally:
            await answering.aclose()
            await raw.aclose()

    thread = threading.Thread(target=asyncio.run, args=(run(),))
    thread.start()
    thread.join()  # blocking, on purpose


async def test_an_answer_given_while_a_shard_subscription_is_down_is_not_lost(
    cluster: list[RedisServer], nodes: list[Redis]
) -> None:
    prefix = f"sk{secrets.token_hex(3)}"
    url = url_of(cluster)
    (mine,) = stores(url, prefix, 1)
    try:
        first, second = new_record(), new_record()
        for rec in (first, second):
            await mine.create(rec)
        waits = [asyncio.create_task(mine.wait(r.id, 30)) for r in (first, second)]
        await mine.listening()
        home = serving(nodes, mine.keys.rec(first.id))
        channel = mine._wakeups.channel_for(first.id)
        await sharded_on(nodes[home], channel)
        kill_and_answer(url, prefix, cluster[home], first.id)
        got = await asyncio.wait_for(waits[0], 10)
        assert got is not None and got.answers == YES and not got.deferred
        await sharded_on(nodes[home], channel)  # subscribed anew
        await mine.listening()
        clicks = RedisStore.from_url(url, prefix=prefix)
        try:
            assert (await clicks.submit(second.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        finally:
            await clicks.aclose()
        got = await asyncio.wait_for(waits[1], 10)
        assert got is not None and got.answers == YES and not got.deferred
    finally:
        await mine.aclose()


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[list[RedisServer]]:
    """A cluster of this test's own: its slots move."""
    with redis_cluster(tmp_path) as servers:
        yield servers


async def move_slot(slot: int, source: Redis, target: Redis, every: list[Redis]) -> None:
    """Migrate one slot and its keys from ``source`` to ``target``, as an operator does."""
    source_id = await source.execute_command("CLUSTER", "MYID")
    target_id = await target.execute_command("CLUSTER", "MYID")
    await target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    await source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    where = target.connection_pool.connection_kwargs
    while keys := await source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
        await source.execute_command(
            "MIGRATE", where["host"], where["port"], "", 0, 5000, "KEYS", *keys
        )
    for node in every:
        await node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)


async def test_a_wait_follows_its_slot_to_another_node(own_cluster: list[RedisServer]) -> None:
    url = url_of(own_cluster)
    nodes = [Redis.from_url(node.url, decode_responses=True) for node in own_cluster]
    prefix = f"sm{secrets.token_hex(3)}"
    mine, clicks = stores(url, prefix, 2)
    try:
        x = new_record()
        slot = key_slot(mine.keys.rec(x.id).encode())
        y = new_record()
        while key_slot(mine.keys.rec(y.id).encode()) != slot:
            y = new_record()
        for rec in (x, y):
            await mine.create(rec)
        waits = [asyncio.create_task(mine.wait(r.id, 30)) for r in (x, y)]
        await mine.listening()
        home = serving(nodes, mine.keys.rec(x.id))
        away = (home + 1) % len(nodes)
        channel = mine._wakeups.channel_for(x.id)
        await sharded_on(nodes[home], channel)
        await move_slot(slot, nodes[home], nodes[away], nodes)
        assert (await clicks.submit(x.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        got = await asyncio.wait_for(waits[0], 10)
        assert got is not None and got.answers == YES and not got.deferred
        await sharded_on(nodes[away], channel)  # subscribed where the slot lives now
        await sharded_on(nodes[home], channel, 0)
        assert (await clicks.submit(y.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        got = await asyncio.wait_for(waits[1], 10)
        assert got is not None and got.answers == YES and not got.deferred
    finally:
        for store in (mine, clicks):
            await store.aclose()
        for node in nodes:
            await node.aclose()
