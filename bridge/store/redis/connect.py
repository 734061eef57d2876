"""Opening Redis from a URL: standalone, TLS, Sentinel (following ``+switch-master``) or Cluster.

:func:`connect` returns the command client and a *subscriber*, whose ``pubsub()`` carries the
wake-ups (:mod:`bridge.store.redis.wakeups`; on Cluster also a client per node for the sharded
ones, :meth:`ClusterSubscriber.node`). Why a store follows Sentinel's announcements rather
than trusting its pooled connections: see :mod:`bridge.store.redis`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry  # not redis.retry.Retry: that one never awaits, so no retries
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import DataError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.utils import str_if_bytes

DEFAULT_MAX_CONNECTIONS = 4

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # pragma: no cover - hiredis is a dependency (redis[hiredis])
    _hiredis_pack = None


class _HiredisPacking:
    """Commands packed by hiredis's C packer. redis-py's asyncio connections pack every command
    in Python, argument by argument (its sync ones use hiredis): a script call of some 25
    arguments cost a quarter of a full ask cycle's client CPU that way; packed in C, 3-13% more
    cycles per CPU-second (``bench/engine_throughput.py`` runs both in one run). What it accepts and
    how it encodes (UTF-8, strict) is redis-py's; a value neither takes is a ``DataError``."""

    def pack_command(self, *args: Any) -> list[bytes]:
        first = args[0]  # a command such as "CLIENT SETINFO" goes as separate words
        if isinstance(first, str):
            args = (*first.encode().split(), *args[1:])
        elif b" " in first:
            args = (*first.split(), *args[1:])
        pack = _hiredis_pack
        assert pack is not None  # only classes made by packed() have this method
        try:
            return [pack(args)]
        except TypeError:  # hiredis takes no bytearray (redis-py does): convert, then judge
            args = tuple(bytes(a) if isinstance(a, bytearray) else a for a in args)
        try:
            return [pack(args)]
        except TypeError as exc:
            raise DataError(str(exc)) from None


_PACKED: dict[type, type] = {}


def packed(cls: type[AbstractConnection]) -> type[AbstractConnection]:
    """``cls`` packing its commands with hiredis (itself where hiredis is missing)."""
    if _hiredis_pack is None or issubclass(cls, _HiredisPacking):
        return cls
    if cls not in _PACKED:
        _PACKED[cls] = type(f"Packed{cls.__name__}", (_HiredisPacking, cls), {})
    return _PACKED[cls]


def _retry() -> Retry:
    """Ride out a restart or failover of a few seconds instead of failing the caller."""
    return Retry(ExponentialBackoff(cap=1.0, base=0.02), retries=12)


def _common(**extra: Any) -> dict[str, Any]:
    return {
        "decode_responses": True,
        "retry": _retry(),
        "retry_on_error": [RedisConnectionError, RedisTimeoutError, OSError],
        "socket_keepalive": True,
        **extra,
    }


def connect(url: str, *, max_connections: int = DEFAULT_MAX_CONNECTIONS) -> tuple[Any, Any]:
    """``(client, subscriber)`` for a URL; the subscriber's ``pubsub()`` carries every wake-up.

    ``redis://`` / ``rediss://`` (TLS) / ``unix://``: one server; user and password in the URL.
    ``redis+cluster://`` / ``rediss+cluster://``: any node of a Cluster.
    ``redis+sentinel://[user:pass@]host:port[,host:port...]/service[/db]`` (``rediss+sentinel``
    for TLS): the master of ``service`` as Sentinel reports it, following failovers.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme.endswith("+cluster"):
        plain = urlunsplit((scheme.removesuffix("+cluster"), *parts[1:]))
        cluster = RedisCluster.from_url(
            plain, max_connections=max(max_connections, 100), **_common()
        )
        # the nodes found later are made from these keyword arguments; the startup ones exist
        kwargs = cluster.connection_kwargs
        kwargs["connection_class"] = packed(kwargs["connection_class"])
        for node in cluster.startup_nodes:
            node.connection_class = kwargs["connection_class"]
        return cluster, ClusterSubscriber(cluster, plain)
    if scheme.endswith("+sentinel"):
        return _sentinel(parts, scheme.removesuffix("+sentinel"), max_connections)
    options = _common()
    if scheme == "unix":  # keepalive is a TCP option: a unix socket's connection refuses it
        del options["socket_keepalive"]
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=None, **options
    )
    pool.connection_class = packed(pool.connection_class)  # by the URL: TCP, TLS or unix
    client = Redis.from_pool(pool)
    return client, client


def _sentinel(parts: Any, scheme: str, max_connections: int) -> tuple[Any, Any]:
    netloc = parts.netloc
    auth, _, hosts = netloc.rpartition("@")
    username, _, password = auth.partition(":")
    nodes = []
    for hostport in hosts.split(","):
        host, _, port = hostport.rpartition(":")
        nodes.append((host or hostport, int(port) if host else 26379))
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise ValueError("a Sentinel URL names the service: redis+sentinel://host:26379/mymaster")
    service = path[0]
    db = int(path[1]) if len(path) > 1 else 0
    query = parse_qs(parts.query)
    kwargs = _common(
        db=db,
        username=unquote(username) or None,
        password=unquote(password) or None,
        ssl=scheme == "rediss",
        max_connections=max_connections,
    )
    sentinel_password = query.get("sentinel_password", [None])[0]
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        nodes,
        sentinel_kwargs={"password": sentinel_password, "ssl": scheme == "rediss"},
        **kwargs,
    )
    client = sentinel.master_for(service, connection_pool_class=_BlockingSentinelPool, timeout=None)
    pool = client.connection_pool
    pool.connection_class = packed(pool.connection_class)
    return client, SentinelSubscriber(client, sentinel, service)


class _BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel's pool, but waiting for a free connection like the standalone pool does, instead
    of failing the caller with "Too many connections" when more commands run than it holds."""

    async def drop_connections(self) -> None:
        """The master moved: idle connections close now, busy ones when given back, so every
        next command connects to the master Sentinel names now."""
        await self.update_active_connections_for_reconnect()  # type: ignore[no-untyped-call]
        await self.disconnect(inuse_connections=False)


class SentinelSubscriber:
    """Wake-ups ride the master's own pool; closing this closes the links to the Sentinels."""

    def __init__(self, client: Redis, sentinel: Sentinel, service: str) -> None:
        self._client = client
        self._sentinel = sentinel
        self._service = service

    def pubsub(self) -> Any:
        return self._client.pubsub()

    async def follow(self, moved: Callable[[], None]) -> None:
        """Forever: hear ``+switch-master`` from one Sentinel (the next one if that fails); when
        it names our service -- or, on (re)subscribing, the master is not the one the pool knows
        (it moved while nobody listened) -- drop the pool's connections, then call ``moved``."""
        pool = cast(_BlockingSentinelPool, self._client.connection_pool)
        turn, backoff = 0, 0.02
        while True:
            sentinels: list[Any] = self._sentinel.sentinels
            pubsub = sentinels[turn % len(sentinels)].pubsub()
            turn += 1
            try:
                await pubsub.subscribe("+switch-master")
                while True:
                    message = await next_message(pubsub)
                    if message["type"] == "subscribe":
                        backoff = 0.02
                    if await self._switched(message, pool.master_address):
                        await pool.drop_connections()
                        moved()
            except (RedisError, OSError):
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
            finally:
                if loop_running():
                    with contextlib.suppress(RedisError, OSError):
                        await pubsub.aclose()

    async def _switched(self, message: dict[str, Any], known: Any) -> bool:
        if message["type"] == "subscribe":
            return known is not None and known != await self._sentinel.discover_master(
                self._service
            )
        if message["type"] != "message":
            return False
        # "+switch-master" data: "<service> <old ip> <old port> <new ip> <new port>"
        return bool(str_if_bytes(message["data"]).split(" ", 1)[0] == self._service)

    async def aclose(self) -> None:
        await self._sentinel.aclose()


class ClusterSubscriber:
    """Plain PUBLISH reaches every Cluster node, so one subscription to any node hears it all;
    sharded channels are heard on the node serving their slot (:meth:`node`)."""

    def __init__(self, cluster: RedisCluster, url: str) -> None:
        self._cluster = cluster
        self._url = url
        self._client: Redis | None = None
        self._nodes: dict[str, Redis] = {}

    def _at(self, node: Any | None, **extra: Any) -> Redis:
        """A client of ``node`` (or of the URL's own host), as the URL says to connect."""
        parts = urlsplit(self._url)
        netloc = parts.netloc
        if node is not None:
            auth, at, _ = netloc.rpartition("@")
            netloc = f"{auth}{at}{node.host}:{node.port}"
        url = urlunsplit((parts.scheme, netloc, "", parts.query, ""))
        return Redis.from_url(url, **_common(**extra))

    def pubsub(self) -> Any:
        if self._client is None:
            nodes = self._cluster.get_nodes()
            self._client = self._at(nodes[0] if nodes else None)
        return self._client.pubsub()

    def node(self, node: Any) -> Redis:
        """A client of one node for its sharded subscriptions; without retries: a dropped
        connection is made anew by the caller, one SSUBSCRIBE per slot (redis-py's own
        resubscription sends them all in one command, which Cluster refuses across slots)."""
        if node.name not in self._nodes:
            self._nodes[node.name] = self._at(node, retry=Retry(NoBackoff(), 0))
        return self._nodes[node.name]

    async def aclose(self) -> None:
        for client in [*([self._client] if self._client else []), *self._nodes.values()]:
            await client.aclose()


async def next_message(pubsub: Any) -> dict[str, Any]:
    """The next pub/sub message, however long it takes.

    Not redis-py's ``listen()``: that is an async generator, and a loop's
    ``shutdown_asyncgens()`` closes every one it knows -- under the task still iterating it, for a
    loop that lives on (the OpenAI Agents SDK's ``run_sync`` calls it after each run on the
    thread's loop): an error logged each time, and a listener left without its messages."""
    while True:
        message: dict[str, Any] | None = await pubsub.get_message(timeout=None)
        if message is not None:
            return message


def loop_running() -> bool:
    """Whether an event loop runs here: a listener's coroutine closed by the garbage collector
    (its loop dropped without being shut down) runs its ``finally`` with none, and must not await
    then."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


PIPELINE_CHUNK = 500
"""Most commands one pipeline sends in one round trip (bounds a reply's size on big batches)."""


class Outgoing:
    """One command on its way in a batch (:func:`send_together`): whether an attempt wrote it to
    a connection (so it may have run), and whether its caller still waits for it.

    A caller that gives up -- its deadline passed, it was cancelled -- ``withdraws`` its command:
    from then on no attempt writes it. One written before that may still land (it was on the
    wire); so only a command never ``sent`` is certain not to have run, which is what lets the
    bridge tell a person "nothing was saved" truthfully, and never otherwise."""

    __slots__ = ("command", "sent", "withdrawn")

    def __init__(self, command: tuple[Any, ...]) -> None:
        self.command = command
        self.sent = False
        self.withdrawn = False


WITHDRAWN = object()
"""The reply :func:`send_together` gives a command withdrawn before any attempt wrote it."""


async def send_together(client: Redis, commands: Sequence[tuple[Any, ...] | Outgoing]) -> list[Any]:
    """Commands sent in one write on one pooled connection, their replies read in order: each
    reply as the server sent it (no response callbacks: ``"OK"``, not ``True``), or the error
    it was (a :class:`~redis.exceptions.ResponseError`, not raised), or :data:`WITHDRAWN` for an
    :class:`Outgoing` its caller withdrew before any attempt wrote it.

    What redis-py's ``pipeline(transaction=False)`` does, without what a batch of script calls
    does not need and pays for per reply: its response callbacks and observability hooks, and an
    ``asyncio.timeout`` around every reply read (redis-py's default 5 s socket timeout), about
    11 us of 22 us per reply. Here one timeout covers the whole batch and moves forward as
    replies come (:func:`_exchange`). Retried as every command of the client is (its ``Retry``:
    reconnect, then send the whole batch again), which is safe for what a store sends this way:
    every script operation (:mod:`.scripts`) is safe to run twice. Each attempt writes only the
    commands whose callers still wait, once its connection is up: a caller that gave up while
    Redis was unreachable (the pool's connecting retries for seconds) is never sent later."""
    calls = [c if isinstance(c, Outgoing) else Outgoing(c) for c in commands]
    replies: dict[int, Any] = {}
    pool = client.connection_pool
    conn = await pool.get_connection()  # type: ignore[no-untyped-call]

    async def attempt() -> None:
        if any(not c.withdrawn for c in calls):
            # A pooled connection the server closed (it stopped) still counts as connected, and
            # the pool does not always look: a write to it would be "sent" though it cannot
            # have run. So look here (EOF or stray bytes: unusable), then (re)connect first.
            if conn.is_connected and await conn.can_read():
                await conn.disconnect()
            if not conn.is_connected:  # connected, connect() would only wrap a no-op in a retry
                await conn.connect()
        live = [i for i, c in enumerate(calls) if not c.withdrawn]
        if not live:
            return
        for i in live:
            calls[i].sent = True
        got = await _exchange(conn, [calls[i].command for i in live])
        replies.update(zip(live, got, strict=True))

    try:
        await conn.retry.call_with_retry(attempt, lambda _error: conn.disconnect())
    finally:
        await pool.release(conn)
    return [replies.get(i, WITHDRAWN) for i in range(len(calls))]


async def _exchange(conn: AbstractConnection, commands: list[tuple[Any, ...]]) -> list[Any]:
    """One batch over ``conn``. No reply is waited for longer than the connection's socket
    timeout: the batch's one deadline is pushed back to a full timeout from now whenever less
    than half of one is left, so a stalled server is noticed after half to all of it, at the
    cost of a clock read per reply rather than a timer per reply.

    The write is made before the deadline starts, under redis-py's own write timeout: that one
    is an ``asyncio.wait_for``, which on Python 3.11 loses a cancellation arriving as the write
    completes -- the deadline's own, on a process too busy to come back to the write in time,
    which then read on with its deadline spent."""
    loop = asyncio.get_running_loop()
    limit = conn.socket_timeout
    await conn.send_packed_command(conn.pack_commands(commands))
    try:
        async with asyncio.timeout_at(None if limit is None else loop.time() + limit) as window:
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(await conn.read_response(timeout=math.inf))
                except ResponseError as exc:
                    replies.append(exc)
                # expired (the loop came back late): the task is cancelled at its next await
                if limit is not None and not window.expired():
                    now = loop.time()
                    if cast(float, window.when()) - now < limit / 2:
                        window.reschedule(now + limit)
            return replies
    except TimeoutError:  # read_response has closed the connection: nothing left half-read
        raise RedisTimeoutError("Timeout reading a reply from the server") from None
