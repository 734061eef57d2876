"""A store operation whose caller gave up never takes effect later, and says whether it may have.

Over a real Redis that stops and comes back: a click judged while Redis is down gives up at its
deadline (``giving_up_after``) with ``maybe_saved=False`` -- its script was never written -- and
stays unwritten though Redis returns while the store's connection would still be retrying; one
written to a server that took it but did not answer in time says ``maybe_saved=True``.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.record import AskStatus, Responder
from bridge.store.redis import RedisStore
from bridge.store.terms import StoreUnavailable, giving_up_after
from tests.support.engine_fixtures import new_record
from tests.support.redis_server import RedisServer, redis_cli

ALICE = Responder(user_id="U_ALICE", name="Alice")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path, extra=["--appendonly", "yes", "--appendfsync", "always"])
    srv.start()
    yield srv
    srv.stop()


async def test_an_operation_given_up_before_it_was_sent_never_runs(server: RedisServer) -> None:
    store = RedisStore.from_url(server.url, prefix=f"t{secrets.token_hex(4)}")
    try:
        record = new_record()
        await store.create(record)  # the pool holds a connection the server will close
        await asyncio.to_thread(server.stop)
        with pytest.raises(StoreUnavailable) as gave_up, giving_up_after(0.5):
            await store.pick(record.id, ALICE, 0, 0)
        assert gave_up.value.maybe_saved is False
        assert "never sent" in str(gave_up.value)
        await asyncio.to_thread(server.start)  # back while the batch would still be retrying
        await asyncio.sleep(2.5)  # time enough for a queued script to land, were it still queued
        after = await store.get(record.id)
        assert after is not None and after.status is AskStatus.PENDING
        assert after.answers is None and not after.submissions
        assert "submitted" not in {e.kind for e in await store.history(record.id)}
        # and the store serves on: the next click is the answer
        taken = await store.pick(record.id, ALICE, 0, 1)
        assert taken.record is not None and taken.record.answers is not None
        assert taken.record.answers[0].selected == ("No",)
    finally:
        await store.aclose()


async def test_an_operation_sent_but_unanswered_in_time_may_have_been_saved(
    server: RedisServer,
) -> None:
    store = RedisStore.from_url(server.url, prefix=f"t{secrets.token_hex(4)}")
    try:
        record = new_record()
        await store.create(record)
        # the server takes the command and runs it only after the caller's deadline
        redis_cli(server.port, "CLIENT", "PAUSE", "1500", "WRITE")
        with pytest.raises(StoreUnavailable) as gave_up, giving_up_after(0.5):
            await store.pick(record.id, ALICE, 0, 0)
        assert gave_up.value.maybe_saved is True
        await asyncio.sleep(1.5)
        after = await store.get(record.id)  # it did run: "may have been saved" was the truth
        assert after is not None and after.status is AskStatus.ANSWERED
    finally:
        await store.aclose()


async def test_with_no_deadline_an_operation_rides_out_a_short_outage(
    server: RedisServer,
) -> None:
    """Without ``giving_up_after`` nothing is withdrawn: the store's retries carry the call over
    a restart of a second or two, as before."""
    store = RedisStore.from_url(server.url, prefix=f"t{secrets.token_hex(4)}")
    try:
        record = new_record()
        await store.create(record)
        await asyncio.to_thread(server.stop)
        picking = asyncio.ensure_future(store.pick(record.id, ALICE, 0, 0))
        await asyncio.sleep(0.5)
        await asyncio.to_thread(server.start)
        result = await asyncio.wait_for(picking, 15)
        assert result.record is not None and result.record.status is AskStatus.ANSWERED
    finally:
        await store.aclose()
