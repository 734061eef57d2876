"""Commands packed by hiredis (``bridge.store.redis.connect.packed``): the same bytes redis-py's
own packer writes, the same refusals, on every kind of connection a store opens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError

from bridge.store.redis import RedisStore
from bridge.store.redis.connect import connect, packed
from tests.support.engine_fixtures import new_record
from tests.support.redis_server import RedisServer

ARGS: list[tuple[Any, ...]] = [
    ("PING",),
    ("EVALSHA", "a" * 40, 2, "ask:{x}:rec", b"ask:{x}:log", "submit", "1796158392.5"),
    ("SET", "k", "caf\u00e9 \u2603 \U0001f600", "PX", 1000),
    ("SET", "k", b"\x00\xff raw bytes", "EX", 10**12),
    ("HSET", "h", "f", 1.5, "g", -0.1, "i", 1e300, "j", 0),
    ("CLIENT SETINFO", "LIB-NAME", "redis-py"),  # a command of two words
    (b"CONFIG GET", "maxmemory"),
    ("SET", "k", memoryview(b"view")),
    ("SET", "k", bytearray(b"array")),
    ("SET", "k", "x" * 100_000),  # past redis-py's buffer cutoff: it writes chunks
    ("SET", "k", ""),
]


@pytest.mark.parametrize("args", ARGS, ids=lambda a: str(a[0])[:16])
def test_packs_the_bytes_redis_py_packs(args: tuple[Any, ...]) -> None:
    ours = packed(Connection)().pack_command(*args)
    theirs = Connection().pack_command(*args)
    assert b"".join(ours) == b"".join(bytes(chunk) for chunk in theirs)
    assert len(ours) == 1  # one buffer: one write


@pytest.mark.parametrize("bad", [True, None, object(), "\ud800", [1, 2]])
def test_refuses_what_redis_py_refuses(bad: object) -> None:
    with pytest.raises((DataError, UnicodeEncodeError)) as ours:
        packed(Connection)().pack_command("SET", "k", bad)
    with pytest.raises((DataError, UnicodeEncodeError)) as theirs:
        Connection().pack_command("SET", "k", bad)
    assert ours.type is theirs.type


def test_every_kind_of_connection_a_store_opens_packs_with_hiredis() -> None:
    expected = {
        "redis://127.0.0.1:1/0": Connection,
        "rediss://127.0.0.1:1/0": SSLConnection,
        "unix:///tmp/ask-bridge-none.sock": UnixDomainSocketConnection,
    }
    for url, base in expected.items():
        client, _ = connect(url)
        cls = client.connection_pool.connection_class
        assert issubclass(cls, base) and cls is packed(base), url
        assert cls.pack_command is not base.pack_command
    assert packed(packed(Connection)) is packed(Connection)  # made once, never wrapped twice


async def test_the_cluster_and_sentinel_connections_pack_with_hiredis(
    cluster: list[Any], sentinel: Any
) -> None:
    store = RedisStore.from_url(f"redis+cluster://127.0.0.1:{cluster[0].port}", prefix="pk")
    try:
        await store.listening()
        nodes = store._r.get_nodes()
        assert nodes and all(n.connection_class is packed(Connection) for n in nodes)
    finally:
        await store.aclose()
    client, subscriber = connect(sentinel.url)
    try:
        assert client.connection_pool.connection_class.__name__.startswith("Packed")
        assert await client.ping()
    finally:
        await subscriber.aclose()
        await client.aclose()


async def test_values_round_trip_through_a_real_server(standalone: Any) -> None:
    client, _ = connect(standalone.url)
    try:
        text = "caf\u00e9 \u2603 \U0001f600 " + "x" * 70_000
        await client.set("pk:text", text)
        assert await client.get("pk:text") == text
        await client.hset("pk:h", mapping={"f": 1.5, "g": 10**20})
        assert await client.hgetall("pk:h") == {"f": "1.5", "g": str(10**20)}
        pipe = client.pipeline(transaction=False)
        for i in range(600):
            pipe.rpush("pk:l", f"item {i}")
        await pipe.execute()
        assert await client.llen("pk:l") == 600
    finally:
        await client.delete("pk:text", "pk:h", "pk:l")
        await client.aclose()


async def test_a_store_over_a_unix_socket_works(tmp_path: Path) -> None:
    """``unix://`` URLs reach a server listening on its socket (the TCP keepalive option, which
    a unix socket's connection refuses, is not passed to it)."""
    sock = tmp_path / "r.sock"
    server = RedisServer(tmp_path, extra=["--unixsocket", str(sock), "--unixsocketperm", "700"])
    server.start()
    try:
        store = RedisStore.from_url(f"unix://{sock}", prefix="ux")
        try:
            rec = new_record()
            await store.create(rec)
            got = await store.get(rec.id)
            assert got is not None and got.id == rec.id
        finally:
            await store.aclose()
    finally:
        server.stop()
