"""Commands sent together on one connection (``bridge.store.redis.connect.send_together``), as a
store sends its script calls: raw replies (no response callbacks) in order, errors in place, a
connection never left half-read, a stalled server noticed within the socket timeout of each
reply (not of the batch), and a dropped connection retried."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge.store.redis.connect import connect, send_together


def _client(url: str, *, timeout: float | None, retries: int = 0) -> Redis:
    return Redis.from_url(
        url, decode_responses=True, socket_timeout=timeout, retry=Retry(NoBackoff(), retries)
    )


async def test_replies_come_in_order_with_each_error_in_its_place(standalone: Any) -> None:
    client, _ = connect(standalone.url)
    try:
        sha = await client.script_load("return ARGV[1]")
        replies = await send_together(
            client,
            [
                ("EVALSHA", sha, 0, "first"),
                ("EVALSHA", "0" * 40, 0, "never loaded"),
                ("SET", "sb:k", "v"),
                ("INCR", "sb:k"),  # not a number: an error reply
                ("EVALSHA", sha, 0, "last"),
            ],
        )
        assert replies[0] == "first" and replies[2] == "OK" and replies[4] == "last"
        assert isinstance(replies[1], NoScriptError)
        assert isinstance(replies[3], ResponseError) and "not an integer" in str(replies[3])
        # nothing was left unread on the connection: the next batch reads its own replies
        assert await send_together(client, [("GET", "sb:k"), ("EVALSHA", sha, 0, "x")]) == [
            "v",
            "x",
        ]
    finally:
        await client.delete("sb:k")
        await client.aclose()


class _Trickling:
    """A connection whose replies come ``gaps`` seconds apart (a server writes a long batch's
    replies as it reads its commands: they trickle), as redis-py's connections are used."""

    def __init__(self, gaps: list[float], timeout: float) -> None:
        self.gaps = gaps
        self.socket_timeout = timeout
        self.retry = Retry(NoBackoff(), 0)
        self.connection_pool = self
        self.sent: list[tuple[Any, ...]] = []
        self.closed = 0

    async def get_connection(self) -> _Trickling:
        return self

    async def release(self, conn: _Trickling) -> None:
        pass

    is_connected = True

    async def connect(self) -> None:  # connected already
        pass

    async def can_read(self) -> bool:  # nothing stray, no EOF: fit to write to
        return False

    def pack_commands(self, commands: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return commands

    async def send_packed_command(self, packed: list[tuple[Any, ...]]) -> None:
        self.sent = list(packed)

    async def read_response(self, **_options: Any) -> Any:
        await asyncio.sleep(self.gaps.pop(0))
        return self.sent[len(self.sent) - len(self.gaps) - 1][0]

    async def disconnect(self) -> None:
        self.closed += 1


async def test_the_socket_timeout_bounds_each_reply_not_the_whole_batch() -> None:
    """Five replies 0.2 s apart take 1 s, twice the 0.5 s timeout: none of them is late. One
    that keeps the batch waiting past the timeout is a timeout."""
    prompt = _Trickling([0.2] * 5, timeout=0.5)
    commands = [(f"C{i}",) for i in range(5)]
    started = time.perf_counter()
    assert await send_together(prompt, commands) == ["C0", "C1", "C2", "C3", "C4"]  # type: ignore[arg-type]
    assert time.perf_counter() - started >= 1.0
    late = _Trickling([0.1, 0.1, 0.9, 0.1], timeout=0.5)
    with pytest.raises(RedisTimeoutError):
        await send_together(late, commands[:4])  # type: ignore[arg-type]
    assert late.closed == 1 and len(late.gaps) == 1  # given up on at the third reply


async def test_a_stalled_server_is_a_timeout_and_the_connection_is_made_anew(
    standalone: Any,
) -> None:
    client = _client(standalone.url, timeout=0.4)
    pauser = _client(standalone.url, timeout=None)
    try:
        assert await send_together(client, [("PING",)]) == ["PONG"]
        await pauser.execute_command("CLIENT", "PAUSE", 1500, "ALL")
        started = time.perf_counter()
        with pytest.raises(RedisTimeoutError):
            await send_together(client, [("SET", "sb:stall", "1"), ("GET", "sb:stall")])
        waited = time.perf_counter() - started
        assert 0.35 <= waited < 1.2, waited  # the timeout, not the 1.5 s pause
        await pauser.execute_command("CLIENT", "UNPAUSE")
        # the half-read connection was closed: the next batch reads its own replies, not the
        # ones the stalled batch left unread ("OK", then "1")
        again = [("SET", "sb:stall", "2"), ("GET", "sb:stall")]
        assert await send_together(client, again) == ["OK", "2"]
    finally:
        await pauser.execute_command("CLIENT", "UNPAUSE")
        await client.delete("sb:stall")
        await client.aclose()
        await pauser.aclose()


async def test_a_process_too_busy_to_read_in_time_gets_its_replies_or_a_timeout(
    standalone: Any,
) -> None:
    """Other tasks hold the event loop longer than the socket timeout (a process saturated by
    its own calls): each batch returns its own replies, or is a timeout the retry can act on --
    never a RuntimeError from a deadline that fired while the batch was being written."""
    client = _client(standalone.url, timeout=0.1, retries=2)
    stop = asyncio.Event()

    async def hog() -> None:
        while not stop.is_set():
            time.sleep(0.05)  # noqa: ASYNC251 (the point: the loop is held)
            await asyncio.sleep(0)

    hogs = [asyncio.create_task(hog()) for _ in range(4)]
    outcomes: list[str] = []
    try:
        for batch in range(4):
            commands = [("SET", f"sb:busy{i}", f"{batch}" * 3000) for i in range(200)]
            try:
                replies = await send_together(client, commands)
                outcomes.append("ok" if replies == ["OK"] * 200 else f"wrong: {replies[:3]}")
            except RedisTimeoutError:
                outcomes.append("timeout")
            except Exception as exc:
                outcomes.append(f"{type(exc).__name__}: {exc}")
        assert set(outcomes) <= {"ok", "timeout"}, outcomes
    finally:
        stop.set()
        await asyncio.gather(*hogs)
    try:  # the connection was never left half-read
        assert await send_together(client, [("GET", "sb:busy0"), ("PING",)]) == ["3" * 3000, "PONG"]
    finally:
        await client.delete(*(f"sb:busy{i}" for i in range(200)))
        await client.aclose()


async def test_a_dropped_connection_is_retried_with_the_whole_batch(standalone: Any) -> None:
    client = _client(standalone.url, timeout=2.0, retries=1)
    killer = _client(standalone.url, timeout=None)
    try:
        assert await send_together(client, [("PING",)]) == ["PONG"]
        mine = await client.client_id()
        await killer.client_kill_filter(_id=mine)
        await asyncio.sleep(0.05)
        assert await send_together(client, [("SET", "sb:again", "1"), ("GET", "sb:again")]) == [
            "OK",
            "1",
        ]
    finally:
        await client.delete("sb:again")
        await client.aclose()
        await killer.aclose()
