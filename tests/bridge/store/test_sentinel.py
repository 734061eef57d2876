"""Sentinel failover with real parts: the master dies, Sentinel promotes its replica, and a store
opened from a ``redis+sentinel://`` URL carries on against the new master with nothing lost.

(The rest of the store contract runs against a Sentinel-found master in test_contract.py.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bridge.models import Answer
from bridge.record import AskStatus, Responder
from bridge.store.redis import RedisStore
from bridge.store.terms import SubmitOutcome
from tests.support.engine_fixtures import new_record
from tests.support.redis_server import parse_reply, redis_cli, redis_sentinel, wait_until

ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)


async def test_master_crash_failover_keeps_pending_ask(tmp_path: Path) -> None:
    with redis_sentinel(tmp_path, replicas=1) as setup:
        replica = setup.replicas[0]
        store = RedisStore.from_url(setup.url, prefix="fo")
        other = RedisStore.from_url(setup.url, prefix="fo")  # a second replica of the deployment
        try:
            rec = new_record()
            await store.create(rec)
            waiter = asyncio.create_task(store.wait(rec.id, 30))
            await store.listening()
            # the ask and its lease reached the replica before the master dies
            lease = store.keys.lease(rec.id)
            await asyncio.to_thread(
                wait_until,
                lambda: parse_reply(redis_cli(replica.port, "EXISTS", lease)) == 1,
                "replication",
            )
            setup.master.kill()
            await asyncio.to_thread(
                wait_until, lambda: setup.master_port() == replica.port, "failover", 20
            )

            pending = await store.get(rec.id)
            assert pending is not None and pending.status is AskStatus.PENDING
            result = await store.submit(rec.id, ALICE, YES)
            assert result.outcome is SubmitOutcome.ACCEPTED
            done = await asyncio.wait_for(waiter, 20)
            assert done is not None and done.answers == YES and not done.deferred
            # the answer is on the promoted server itself, not in some client-side state
            status = redis_cli(replica.port, "HGET", store.keys.rec(rec.id), "status")
            assert parse_reply(status) == "answered"
            kinds = [e.kind for e in await store.history(rec.id)]
            assert kinds[0] == "created" and "answered" in kinds

            # both stores work on the new master: an ask made and awaited on one, answered on
            # the other, wakes its waiter there
            later = new_record()
            await store.create(later)
            second = asyncio.create_task(store.wait(later.id, 20))
            answered = await other.submit(later.id, ALICE, YES)
            assert answered.outcome is SubmitOutcome.ACCEPTED
            woken = await second
            assert woken is not None and woken.answers == YES and not woken.deferred
        finally:
            await store.aclose()
            await other.aclose()


def _store_links(port: int) -> int:
    """Connections a redis-py client (a store) holds to the server on ``port``."""
    return redis_cli(port, "CLIENT", "LIST").count("lib-name=redis-py")


async def test_manual_failover_answers_land_on_new_master(tmp_path: Path) -> None:
    """``SENTINEL FAILOVER`` with the old master still up: Sentinel names the new master at once
    but demotes the old one only ~10 s later, and that old master keeps accepting writes it will
    throw away when it resyncs. Stores must follow the switch, not their open connections: the
    one with a waiter (its wake-up subscription moves too) and one that only handles clicks."""
    with redis_sentinel(tmp_path, replicas=1) as setup:
        old, new = setup.master, setup.replicas[0]
        store = RedisStore.from_url(setup.url, prefix="mf")
        clicks = RedisStore.from_url(setup.url, prefix="mf")  # no waiters: only idle links
        try:
            rec, other = new_record(), new_record()
            await store.create(rec)
            await clicks.create(other)
            waiter = asyncio.create_task(store.wait(rec.id, 30))
            await store.listening()
            lease = store.keys.lease(rec.id)
            await asyncio.to_thread(
                wait_until,
                lambda: parse_reply(redis_cli(new.port, "EXISTS", lease)) == 1,
                "replication",
            )
            assert _store_links(old.port) >= 2
            assert parse_reply(redis_cli(setup.port, "SENTINEL", "FAILOVER", setup.service)) == "OK"
            await asyncio.to_thread(
                wait_until, lambda: setup.master_port() == new.port, "switch of master", 15
            )
            # the stores hear the switch from Sentinel: no link stays on the old master, and the
            # wake-up subscription is on the new one
            await asyncio.to_thread(
                wait_until, lambda: _store_links(old.port) == 0, "leaving the old master", 5
            )
            events = store.keys.events
            await asyncio.to_thread(
                wait_until,
                lambda: parse_reply(redis_cli(new.port, "PUBSUB", "NUMSUB", events)) == [events, 1],
                "wake-up subscription on the new master",
                5,
            )
            assert "role:master" in redis_cli(old.port, "INFO", "replication")  # not demoted yet

            result = await store.submit(rec.id, ALICE, YES)
            assert result.outcome is SubmitOutcome.ACCEPTED
            clicked = await clicks.submit(other.id, ALICE, YES)
            assert clicked.outcome is SubmitOutcome.ACCEPTED
            done = await asyncio.wait_for(waiter, 10)
            assert done is not None and done.answers == YES and not done.deferred
            rec_keys = [store.keys.rec(rec.id), store.keys.rec(other.id)]
            for key in rec_keys:
                assert parse_reply(redis_cli(new.port, "HGET", key, "status")) == "answered"

            await asyncio.to_thread(
                wait_until,
                lambda: "role:slave" in redis_cli(old.port, "INFO", "replication"),
                "demotion of the old master",
                20,
            )
            for key in rec_keys:
                assert parse_reply(redis_cli(new.port, "HGET", key, "status")) == "answered"
            kept = await clicks.get(rec.id)
            assert kept is not None and kept.answers == YES
        finally:
            await store.aclose()
            await clicks.aclose()
