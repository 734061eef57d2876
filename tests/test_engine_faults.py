"""Faults with real parts: a restarted server, a killed connection, a killed waiting process, and
waiter and answerer in different OS processes."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from engine_fixtures import new_record
from redis.asyncio import Redis
from redis_server import RedisServer, redis_server

from bridge.ask import AskRecord, AskStatus, Responder
from bridge.models import Answer
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore

HERE = Path(__file__).resolve().parent
ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)


@pytest.fixture
def aof_server(tmp_path: Path) -> AsyncIterator[RedisServer]:
    with redis_server(tmp_path / "aof", appendonly=True) as server:
        yield server  # type: ignore[misc]


async def test_restart_with_aof_loses_nothing_and_waiters_resume(aof_server: RedisServer) -> None:
    waiting_store = RedisStore.from_url(aof_server.url, prefix="aof")
    answering = RedisStore.from_url(aof_server.url, prefix="aof")
    try:
        recs = [new_record() for _ in range(5)]
        for rec in recs:
            await waiting_store.create(rec)
        waiters = [asyncio.create_task(waiting_store.wait(r.id, 30)) for r in recs]
        await waiting_store.listening()
        before = waiting_store.resubscriptions
        await asyncio.to_thread(aof_server.restart)
        assert {r.id for r in await answering.list_pending()} == {r.id for r in recs}
        for rec in recs:
            assert (await answering.submit(rec.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        done = await asyncio.gather(*waiters)
        assert all(d is not None and d.answers == YES and not d.deferred for d in done)
        assert waiting_store.resubscriptions > before
    finally:
        await waiting_store.aclose()
        await answering.aclose()


async def _subscriber_ids(url: str) -> list[str]:
    raw = Redis.from_url(url, decode_responses=True)
    try:
        clients = await raw.client_list()
        return [c["id"] for c in clients if c.get("sub") not in (None, "0")]
    finally:
        await raw.aclose()


async def test_killed_wakeup_connection_still_delivers(standalone: RedisServer) -> None:
    waiting_store = RedisStore.from_url(standalone.url, prefix=f"k{secrets.token_hex(3)}")
    answering = RedisStore.from_url(standalone.url, prefix=waiting_store.keys.prefix)
    raw = Redis.from_url(standalone.url, decode_responses=True)
    try:
        rec = new_record()
        await waiting_store.create(rec)
        waiter = asyncio.create_task(waiting_store.wait(rec.id, 30))
        await waiting_store.listening()
        for client_id in await _subscriber_ids(standalone.url):
            await raw.client_kill_filter(_id=client_id)
        # the answer lands while the wake-up connection is down: its PUBLISH reaches nobody
        assert (await answering.submit(rec.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        got = await asyncio.wait_for(waiter, 10)
        assert got is not None and got.answers == YES and not got.deferred
    finally:
        await raw.aclose()
        await waiting_store.aclose()
        await answering.aclose()


async def _child(url: str, prefix: str, lease: float) -> tuple[asyncio.subprocess.Process, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "engine_proc.py"),
        url,
        prefix,
        str(lease),
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    kind, ask_id = line.decode().split()
    assert kind == "ready"
    return proc, ask_id


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_cross_process_ask_and_answer(kind: str, request: pytest.FixtureRequest) -> None:
    from engine_fixtures import url_for

    url = url_for(kind, request)
    assert url is not None
    prefix = f"x{secrets.token_hex(3)}"
    proc, ask_id = await _child(url, prefix, 30)
    answering = RedisStore.from_url(url, prefix=prefix)
    try:
        assert (await answering.submit(ask_id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        got = AskRecord.model_validate_json(line)
        assert got.id == ask_id and got.answers == YES and not got.deferred
        assert await asyncio.wait_for(proc.wait(), 30) == 0
        final = await answering.get(ask_id)
        assert final is not None and final.status is AskStatus.ANSWERED
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await answering.aclose()


async def test_waiting_process_dies_answer_reaches_feed(standalone: RedisServer) -> None:
    prefix = f"d{secrets.token_hex(3)}"
    proc, ask_id = await _child(standalone.url, prefix, 0.5)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    store = RedisStore.from_url(standalone.url, prefix=prefix, lease_ttl=0.5)
    try:
        # answered at once: the dead waiter's lease may still look alive, so the answer waits
        # for it; once the lease lapses the sweeper moves it to the feed
        assert (await store.submit(ask_id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
        feed = store.feed("host")
        next_one = asyncio.ensure_future(anext(feed))
        deadline = time.monotonic() + 15
        while not next_one.done() and time.monotonic() < deadline:
            await store.sweep()
            await asyncio.wait({next_one}, timeout=0.1)
        delivery = next_one.result()
        assert delivery.record.id == ask_id and delivery.record.answers == YES
        assert delivery.record.deferred
        await store.ack(delivery)
        await feed.aclose()  # type: ignore[attr-defined]
        kinds = [e.kind for e in await store.history(ask_id)]
        assert kinds[-1] == "handed_to_feed"
        assert json.loads(delivery.record.model_dump_json())["status"] == "answered"
    finally:
        await store.aclose()
