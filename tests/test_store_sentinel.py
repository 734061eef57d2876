"""Sentinel failover with real parts: the master dies, Sentinel promotes its replica, and a store
opened from a ``redis+sentinel://`` URL carries on against the new master with nothing lost.

(The rest of the store contract runs against a Sentinel-found master in test_store_contract.py.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine_fixtures import new_record
from redis_server import _cli, _resp, _wait_for, redis_sentinel

from bridge.ask import AskStatus, Responder
from bridge.models import Answer
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore

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
            await store._subscribed.wait()
            # the ask and its lease reached the replica before the master dies
            lease = store.keys.lease(rec.id)
            await asyncio.to_thread(
                _wait_for, lambda: _resp(_cli(replica.port, "EXISTS", lease)) == 1, "replication"
            )
            setup.master.kill()
            await asyncio.to_thread(
                _wait_for, lambda: setup.master_port() == replica.port, "failover", 20
            )

            pending = await store.get(rec.id)
            assert pending is not None and pending.status is AskStatus.PENDING
            result = await store.submit(rec.id, ALICE, YES)
            assert result.outcome is SubmitOutcome.ACCEPTED
            done = await asyncio.wait_for(waiter, 20)
            assert done is not None and done.answers == YES and not done.deferred
            # the answer is on the promoted server itself, not in some client-side state
            status = _cli(replica.port, "HGET", store.keys.rec(rec.id), "status")
            assert _resp(status) == "answered"
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
