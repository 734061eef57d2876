"""Faults with real parts: a restarted server, a killed connection, a killed waiting process, and
waiter and answerer in different OS processes."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from bridge.asking import ChatHandler
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, Destination, Responder
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore
from tests.support.engine_fixtures import LIVE_LEASE, StoreFactory, new_record, questions
from tests.support.redis_server import RedisServer, redis_server

ROOT = Path(__file__).resolve().parents[2]
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
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.engine_proc",
        url,
        prefix,
        str(lease),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    kind, ask_id = line.decode().split()
    assert kind == "ready"
    return proc, ask_id


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_cross_process_ask_and_answer(kind: str, request: pytest.FixtureRequest) -> None:
    from tests.support.engine_fixtures import url_for

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


class ReplyLoss:
    """A TCP proxy on loopback in front of a real server. Armed with a marker, it lets the next
    command containing it reach the server (which runs it), then cuts that connection before the
    reply gets back -- once -- so the client's retry sends the command again."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.cut = 0
        self._marker: bytes | None = None
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> ReplyLoss:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def arm(self, marker: bytes) -> None:
        self._marker = marker

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        lose_reply = asyncio.Event()

        async def to_server() -> None:
            while data := await reader.read(65536):
                if self._marker is not None and self._marker in data:
                    self._marker = None
                    lose_reply.set()  # before the command leaves: its reply is the next data
                up_writer.write(data)
                await up_writer.drain()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                if lose_reply.is_set():
                    self.cut += 1
                    return
                writer.write(data)
                await writer.drain()

        pumps = [asyncio.create_task(to_server()), asyncio.create_task(to_client())]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        for w in (writer, up_writer):
            w.close()


def _op(name: str) -> bytes:
    """How ``ask.lua``'s op argument travels in a command (a RESP bulk string)."""
    return f"${len(name)}\r\n{name}\r\n".encode()


async def test_operations_whose_reply_was_lost_are_retried_safely(standalone: RedisServer) -> None:
    async with ReplyLoss(standalone.port) as proxy:
        store = RedisStore.from_url(proxy.url, prefix=f"r{secrets.token_hex(3)}")
        try:
            rec, other = new_record(), new_record()
            proxy.arm(_op("create"))
            await store.create(rec)  # ran, reply lost, sent again: not a duplicate
            assert proxy.cut == 1
            proxy.arm(_op("submit"))
            first = await store.submit(rec.id, ALICE, YES)  # the person's first click
            assert proxy.cut == 2 and first.outcome is SubmitOutcome.ACCEPTED
            again = await store.submit(rec.id, ALICE, YES)  # a second click: a repeat
            assert again.outcome is SubmitOutcome.REPEATED
            await store.create(other)
            proxy.arm(_op("close"))
            closed = await store.close(other.id, AskStatus.EXPIRED)
            assert proxy.cut == 3  # ran, reply lost: the retry still returns it, to re-render
            assert closed is not None and closed.status is AskStatus.EXPIRED
            assert [e.kind for e in await store.history(rec.id)] == ["created", "answered"]
            assert [e.kind for e in await store.history(other.id)] == ["created", "expired"]
        finally:
            await store.aclose()


async def test_lost_data_is_noticed_and_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis restarted without persistence: every process that used it says so, once."""
    with redis_server(tmp_path / "volatile") as server:
        waiting = RedisStore.from_url(server.url, prefix="lost")
        sweeping = RedisStore.from_url(server.url, prefix="lost")
        try:
            rec = new_record()
            await waiting.create(rec)
            await sweeping.sweep()
            assert not waiting.lost_data and not sweeping.lost_data
            await asyncio.to_thread(server.restart)  # no AOF, no snapshot: everything is gone
            with caplog.at_level(logging.ERROR, logger="bridge.store.redis"):
                assert await waiting.wait(rec.id, 5) is None  # its ask is missing
                assert waiting.lost_data
                await sweeping.sweep()
                assert sweeping.lost_data
                await waiting.sweep()  # noticed already: not said again
                await sweeping.sweep()
            lines = [r.getMessage() for r in caplog.records if "lost its data" in r.getMessage()]
            assert len(lines) == 2
            assert all("restarted without persistence" in line for line in lines)
            assert all("appendonly" in line for line in lines)
        finally:
            await waiting.aclose()
            await sweeping.aclose()


async def test_answers_returned_by_the_handler_never_reach_the_feed(
    make_store: StoreFactory,
) -> None:
    """The handler confirms what it returned: its process may die right after, the answer is
    not also fed (without the confirm, the lapsed lease would hand it to the feed)."""
    waiting = await make_store(lease_ttl=LIVE_LEASE)
    poster = MemoryPoster()
    handler = ChatHandler(poster, waiting, Destination(platform="memory", channel="C1"))
    call = asyncio.create_task(handler(list(questions(1).questions), {}))
    posted = await poster.next_post()
    assert (await waiting.submit(posted.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
    assert (await call).answers == YES  # type: ignore[union-attr]
    await waiting.aclose()  # the process that returned the answers is gone
    sweeper = await make_store(lease_ttl=LIVE_LEASE)
    deadline = time.monotonic() + LIVE_LEASE + 1.0  # past the lease an unconfirmed one lapses at
    while time.monotonic() < deadline:
        await sweeper.sweep()
        await asyncio.sleep(0.05)
    assert "handed_to_feed" not in [e.kind for e in await sweeper.history(posted.id)]
