"""``RedisStore``: pending asks in Redis (standalone, TLS, Sentinel or Cluster), shared by replicas.

Correctness rests on three rules (key scheme, record fields and hand-off states:
:mod:`bridge.store.keys`):

* Every change to one ask is one call of ``ask.lua`` over that ask's keys, which share a hash tag,
  so replicas race freely and Cluster never sees a cross-slot script.
* Waking is pushed: each script that ends an ask PUBLISHes its id on one channel, and a store's
  :class:`~bridge.store.redis_wakeups.Wakeups` holds one subscription for all its waiters, never
  missing a wake-up published while it was away.
* Answers never get lost between processes: an answer lands either with a live waiter (a short
  lease key proves one is alive) or on the feed stream. Global keys (``due`` index, feed stream)
  are written next to -- never inside -- the per-ask script; ``due`` always holds an ask until its
  hand-off is settled, so a sweeper repairs whatever a crashed process left half-done.

Sentinel: a manual ``SENTINEL FAILOVER`` names the new master at once but demotes the old one only
~10 s later, and until then the old master still accepts writes -- which it throws away when it
resyncs as a replica. Pooled connections would keep writing there (redis-py re-asks Sentinel only
when it opens a connection), losing answers. So a store also listens to Sentinel's
``+switch-master`` (:mod:`bridge.store.redis_connect`): when its service moves, pooled connections
are dropped (each reconnects to the master Sentinel names now) and the wake-up subscription is
made anew on the new master, which re-reads every waiting ask as any resubscription does. Writes
sent in the instant between the switch and its announcement can still land on the old master:
Sentinel promises no more.

Every operation raises :class:`~bridge.store.base.StoreUnavailable` when Redis cannot be reached
(after the client's own retries, which ride out a restart or failover of a few seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from importlib.resources import files
from typing import Any, ParamSpec, TypeVar

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import (
    ClusterDownError,
    NoScriptError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge.aio import stop
from bridge.ask import AskRecord, AskStatus, MessageRef, Responder
from bridge.models import Answer
from bridge.store import redis_codec as codec
from bridge.store.base import (
    DEFAULT_LEASE_TTL,
    DEFAULT_RETENTION,
    Delivery,
    DuplicateAsk,
    HistoryEvent,
    Store,
    StoreUnavailable,
    SubmitOutcome,
    SubmitResult,
    check_close_status,
    check_event_kind,
    dump_answers,
)
from bridge.store.keys import DEFAULT_PREFIX, Fields, Keys
from bridge.store.redis_connect import (
    DEFAULT_MAX_CONNECTIONS,
    PIPELINE_CHUNK,
    SentinelSubscriber,
    connect,
)
from bridge.store.redis_wakeups import Wakeups

_SCRIPT = files("bridge.store").joinpath("ask.lua").read_text()
_INDEX_TTL = 400 * 86400  # beyond any ask's expiry: refreshed on every write anyway

DEFAULT_GROUP = "bridge"
_OUTCOMES = {
    "accepted": SubmitOutcome.ACCEPTED,
    "repeated": SubmitOutcome.REPEATED,
    "already_answered": SubmitOutcome.ALREADY_ANSWERED,
    "closed": SubmitOutcome.CLOSED,
    "expired": SubmitOutcome.CLOSED,  # this submission found it past expires_at and expired it
    "not_allowed": SubmitOutcome.NOT_ALLOWED,
}

# What "Redis did not answer" looks like in redis-py (OSError covers socket errors and timeouts).
_DOWN: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    OSError,
    ClusterDownError,
    TryAgainError,
    ReadOnlyError,
    SlotNotCoveredError,
)

_P = ParamSpec("_P")
_T = TypeVar("_T")


@contextlib.contextmanager
def _reaching(op: str) -> Iterator[None]:
    """Turn redis-py's "could not reach the server" errors into :class:`StoreUnavailable`."""
    try:
        yield
    except (RedisError, RedisClusterException, OSError) as exc:
        down = isinstance(exc, _DOWN) or (
            isinstance(exc, RedisClusterException) and isinstance(exc.__cause__, _DOWN)
        )
        if not down:
            raise
        raise StoreUnavailable(
            f"ask store: Redis did not answer during {op} ({type(exc).__name__}: {exc})"
        ) from exc


def _guarded(
    op: str,
) -> Callable[[Callable[_P, Awaitable[_T]]], Callable[_P, Coroutine[Any, Any, _T]]]:
    def wrap(fn: Callable[_P, Awaitable[_T]]) -> Callable[_P, Coroutine[Any, Any, _T]]:
        @functools.wraps(fn)
        async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            with _reaching(op):
                return await fn(*args, **kwargs)

        return run

    return wrap


class RedisStore(Store):
    """The shared store. Build with :meth:`from_url` (or pass clients for tests/embedding)."""

    def __init__(
        self,
        client: Any,
        subscriber: Any | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        retention: float = DEFAULT_RETENTION,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        group: str = DEFAULT_GROUP,
        claim_idle: float = 60.0,
        log_cap: int = 500,
    ) -> None:
        self._r = client
        self._sub = subscriber if subscriber is not None else client
        self.keys = Keys(prefix)
        self.retention = retention
        self.lease_ttl = lease_ttl
        self.group = group
        self.claim_idle = claim_idle
        self._log_cap = log_cap
        self._script = client.register_script(_SCRIPT)
        self._wakeups = Wakeups(client, self._sub, self.keys, lease_ttl)
        self._background: set[asyncio.Task[Any]] = set()
        self._ready = not isinstance(client, RedisCluster)
        self._ready_lock = asyncio.Lock()
        self._follower: asyncio.Task[None] | None = None

    @classmethod
    def from_url(
        cls, url: str, *, max_connections: int = DEFAULT_MAX_CONNECTIONS, **options: Any
    ) -> RedisStore:
        """A store for a ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` or
        ``redis+sentinel://`` URL (see :func:`bridge.store.redis_connect.connect`)."""
        client, subscriber = connect(url, max_connections=max_connections)
        return cls(client, subscriber, **options)

    @property
    def resubscriptions(self) -> int:
        """How often the wake-up subscription was (re)established: 1 after the first, +1 after
        each reconnect or master switch."""
        return self._wakeups.resubscriptions

    @_guarded("listening")
    async def listening(self) -> None:
        """Start the wake-up subscription now (the first :meth:`wait` does so otherwise) and
        return once it is live: from then on a waiter hears an answer as soon as it lands."""
        await self._init()
        self._wakeups.start()
        await self._wakeups.subscribed()

    # -- plumbing -----------------------------------------------------------------------------

    async def _init(self) -> None:
        """Follow Sentinel's master switches from the first use on; learn the Cluster's slots
        once, before any concurrent use (redis-py's lazy first initialisation breaks under many
        concurrent first commands)."""
        if self._follower is None and isinstance(self._sub, SentinelSubscriber):
            self._follower = asyncio.create_task(
                self._sub.follow(self._wakeups.resubscribe), name="ask-bridge master switches"
            )
        if self._ready:
            return
        async with self._ready_lock:
            if not self._ready:
                await self._r.initialize()
                self._ready = True

    def _argv(self, op: str, ask_id: str, args: Sequence[Any], now: float | None) -> list[Any]:
        return [
            op,
            repr(time.time() if now is None else float(now)),
            self.keys.events,
            ask_id,
            int(self.retention * 1000),
            self._log_cap,
            *args,
        ]

    async def _run(self, op: str, ask_id: str, *args: Any, now: float | None = None) -> list[Any]:
        argv = self._argv(op, ask_id, args, now)
        reply: list[Any] = await self._script(keys=self.keys.ask_keys(ask_id), args=argv)
        return reply

    def _unindex_soon(self, ask_id: str) -> None:
        """Drop a settled ask from ``due`` off the caller's path; if this is lost, the sweeper's
        next visit finds the ask settled and drops it then."""
        task = asyncio.create_task(self._r.zrem(self.keys.due, ask_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _ttl_ms(self, record: AskRecord) -> int:
        return int((max(record.expires_at - time.time(), 0) + self.retention) * 1000)

    async def _index(self, mapping: dict[str, float]) -> None:
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.due, mapping)
            pipe.expire(self.keys.due, _INDEX_TTL + int(self.retention))
            await pipe.execute()

    async def _index_and_run(
        self, mapping: dict[str, float], ask_id: str, argv: list[Any], *, xx: bool = False
    ) -> list[Any]:
        """ZADD to ``due``, then the script, in one round trip where the server allows it."""
        keys = self.keys.ask_keys(ask_id)
        if isinstance(self._r, RedisCluster):  # no scripts in Cluster pipelines: two trips
            await self._r.zadd(self.keys.due, mapping, xx=xx)
            if not xx:
                await self._r.expire(self.keys.due, _INDEX_TTL + int(self.retention))
            reply: list[Any] = await self._script(keys=keys, args=argv)
            return reply
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.due, mapping, xx=xx)
            if not xx:
                pipe.expire(self.keys.due, _INDEX_TTL + int(self.retention))
            pipe.evalsha(self._script.sha, len(keys), *keys, *argv)
            replies = await pipe.execute(raise_on_error=False)
        result = replies[-1]
        if isinstance(result, NoScriptError):  # it did not run: load it, run it once more
            result = await self._script(keys=keys, args=argv)
        elif isinstance(result, Exception):
            raise result
        return list(result)

    async def _to_feed(self, ask_id: str) -> None:
        """Put a finished ask on the feed, then mark it sent; a crash between repeats the XADD
        later (the feed drops duplicate entries at delivery, see ``deliver`` in ask.lua)."""
        min_id = f"{int((time.time() - self.retention) * 1000)}-0"
        await self._r.xadd(self.keys.feed, {"ask": ask_id}, minid=min_id, approximate=True)
        await self._r.expire(self.keys.feed, int(self.retention) + 86400)
        await self._run("sent", ask_id)
        await self._r.zrem(self.keys.due, ask_id)

    async def _ended(self, ask_id: str, raw: dict[str, str]) -> None:
        """An ask just left ``pending`` without an answer (closed or expired): feed it if it was
        deferred, and drop it from ``due`` either way (``_to_feed`` does that last)."""
        if raw.get(Fields.HANDOFF) == "feed":
            await self._to_feed(ask_id)
        else:
            await self._r.zrem(self.keys.due, ask_id)

    # -- the contract -------------------------------------------------------------------------

    @_guarded("create")
    async def create(self, record: AskRecord) -> None:
        await self._init()
        detail = json.dumps(
            {
                "destination": record.destination.model_dump(mode="json"),
                "answerers": record.answerers,
            }
        )
        argv = self._argv(
            "create",
            record.id,
            (
                codec.body(record),
                repr(record.expires_at),
                json.dumps(list(record.answerers)),
                "1" if record.deferred else "0",
                self._ttl_ms(record),
                int(self.lease_ttl * 1000),
                detail,
            ),
            record.created_at,
        )
        # indexed first (same pipeline, in order): an ask is never pending yet unswept
        reply = await self._index_and_run({record.id: record.expires_at}, record.id, argv)
        if reply[0] == "exists":
            raise DuplicateAsk(f"an ask with id {record.id!r} already exists")

    @_guarded("get")
    async def get(self, ask_id: str) -> AskRecord | None:
        await self._init()
        raw = await self._r.hgetall(self.keys.rec(ask_id))
        return codec.record(raw) if raw else None

    @_guarded("set_message")
    async def set_message(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        await self._init()
        detail = json.dumps({"message": message.model_dump(mode="json")})
        reply = await self._run("message", ask_id, message.model_dump_json(), detail)
        return codec.record(codec.pairs(reply[1])) if reply[0] == "ok" else None

    @_guarded("defer")
    async def defer(self, ask_id: str) -> AskRecord | None:
        await self._init()
        reply = await self._run("defer", ask_id)
        if reply[0] == "missing":
            return None
        if reply[0] == "taken":
            await self._r.zrem(self.keys.due, ask_id)
        return codec.record(codec.pairs(reply[1]))

    @_guarded("submit")
    async def submit(
        self,
        ask_id: str,
        who: Responder,
        answers: Sequence[Answer],
        *,
        now: float | None = None,
    ) -> SubmitResult:
        await self._init()
        now = time.time() if now is None else now
        dumped, chosen = dump_answers(answers)
        argv = self._argv(
            "submit",
            ask_id,
            (
                who.user_id,
                json.dumps(list(who.groups)),
                who.model_dump_json(),
                chosen,
                json.dumps(who.user_id),
                json.dumps({"name": who.name, "answers": dumped}),
            ),
            now,
        )
        # Sent with the verdict: should this process die right after the script accepts, a
        # sweeper still visits the ask soon and finishes the hand-off (XX: only indexed asks).
        mark = {ask_id: now + self.lease_ttl}
        reply = await self._index_and_run(mark, ask_id, argv, xx=True)
        if reply[0] == "missing":
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        raw = codec.pairs(reply[1])
        if reply[0] == "accepted" and raw.get(Fields.HANDOFF) == "feed":
            await self._to_feed(ask_id)
        elif reply[0] == "expired":
            await self._ended(ask_id, raw)
        return SubmitResult(_OUTCOMES[reply[0]], codec.record(raw))

    @_guarded("close")
    async def close(
        self, ask_id: str, status: AskStatus, *, by: str | None = None
    ) -> AskRecord | None:
        await self._init()
        check_close_status(status)
        reply = await self._run("close", ask_id, status.value, json.dumps(by))
        if reply[0] != "closed":
            return None
        raw = codec.pairs(reply[1])
        await self._ended(ask_id, raw)
        return codec.record(raw)

    @_guarded("release")
    async def release(self, ask_id: str) -> None:
        await self._init()
        # Indexed with the script (a take may have unindexed it): should this cleanup be cut
        # short after the script moved the answer to ``feed``, a sweeper still puts it there.
        mark = {ask_id: time.time() + self.lease_ttl}
        reply = await self._index_and_run(mark, ask_id, self._argv("release", ask_id, (), None))
        if reply[0] == "feed":
            await self._to_feed(ask_id)

    @_guarded("record_event")
    async def record_event(
        self, ask_id: str, kind: str, *, user_id: str | None = None, **detail: Any
    ) -> None:
        await self._init()
        check_event_kind(kind)
        await self._run("event", ask_id, kind, json.dumps(user_id), json.dumps(detail))

    @_guarded("history")
    async def history(self, ask_id: str) -> list[HistoryEvent]:
        await self._init()
        lines = await self._r.lrange(self.keys.log(ask_id), 0, -1)
        return [HistoryEvent.model_validate_json(line) for line in lines]

    @_guarded("list_pending")
    async def list_pending(self) -> list[AskRecord]:
        await self._init()
        ids = await self._r.zrange(self.keys.due, 0, -1)
        found: list[AskRecord] = []
        for start in range(0, len(ids), PIPELINE_CHUNK):
            chunk = ids[start : start + PIPELINE_CHUNK]
            async with self._r.pipeline(transaction=False) as pipe:
                for ask_id in chunk:
                    pipe.hgetall(self.keys.rec(ask_id))
                raws = await pipe.execute()
            found.extend(
                codec.record(raw) for raw in raws if raw and raw[Fields.STATUS] == "pending"
            )
        return sorted(found, key=lambda r: r.created_at)

    @_guarded("sweep")
    async def sweep(self, now: float | None = None) -> list[AskRecord]:
        await self._init()
        now = time.time() if now is None else now
        expired: list[AskRecord] = []
        while True:
            ids = await self._r.zrangebyscore(
                self.keys.due, "-inf", now, start=0, num=PIPELINE_CHUNK
            )
            later: dict[str, float] = {}
            for ask_id in ids:
                reply = await self._run("settle", ask_id, self.lease_ttl, now=now)
                verdict = reply[0]
                if verdict == "later":
                    later[ask_id] = float(reply[1])
                    continue
                if verdict in ("expired", "feed"):
                    raw = codec.pairs(reply[1])
                    if verdict == "expired":
                        expired.append(codec.record(raw))
                    if raw.get(Fields.HANDOFF) == "feed":
                        await self._to_feed(ask_id)
                        continue
                await self._r.zrem(self.keys.due, ask_id)
            if later:  # every new score is past ``now``, so the next round sees other asks
                await self._index(later)
            if len(ids) < PIPELINE_CHUNK:
                return expired

    @_guarded("wait")
    async def wait(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Wait for the ask to leave ``pending``; take the answer if it is this waiter's.

        The record comes back with ``deferred=True`` when the answer went to the feed instead
        (this waiter's lease had lapsed); ``None`` on timeout or for an unknown ask.
        """
        await self._init()
        self._wakeups.start()
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    await self._wakeups.subscribed()
                    await self._wakeups.woken(ask_id)
            except TimeoutError:
                return None
            reply = await self._run("take", ask_id)
            if reply[0] == "missing":
                return None
            record = codec.record(codec.pairs(reply[1]))
            if reply[0] == "taken":
                self._unindex_soon(ask_id)
            if record.status is not AskStatus.PENDING:
                return record

    # -- the feed -----------------------------------------------------------------------------

    async def _ensure_group(self) -> None:
        try:
            await self._r.xgroup_create(self.keys.feed, self.group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        await self._r.expire(self.keys.feed, int(self.retention) + 86400, nx=True)

    async def _deliveries(self, entries: Sequence[Any]) -> list[Delivery]:
        out: list[Delivery] = []
        for entry_id, fields in entries:
            ask_id = (fields or {}).get("ask")
            reply = await self._run("deliver", ask_id, entry_id) if ask_id else ["gone"]
            if reply[0] == "deliver":
                out.append(Delivery(entry_id, codec.record(codec.pairs(reply[1]))))
            else:  # trimmed, past retention, or a duplicate entry of an ask already delivered
                await self._r.xack(self.keys.feed, self.group, entry_id)
        return out

    async def feed(self, consumer: str) -> AsyncIterator[Delivery]:
        """Deliveries for ``consumer``: first its own unacknowledged ones (after a restart), then
        entries idle too long at other consumers (they died), then new ones."""
        with _reaching("feed"):
            await self._init()
            await self._ensure_group()
            stream = self.keys.feed
            pending = await self._r.xreadgroup(
                self.group, consumer, {stream: "0"}, count=PIPELINE_CHUNK
            )
            for _, entries in pending:
                for delivery in await self._deliveries(entries):
                    yield delivery
            idle_ms = int(self.claim_idle * 1000)
            while True:
                try:
                    claimed = await self._r.xautoclaim(
                        stream, self.group, consumer, idle_ms, "0-0", count=100
                    )
                    for delivery in await self._deliveries(claimed[1]):
                        yield delivery
                    fresh = await self._r.xreadgroup(
                        self.group, consumer, {stream: ">"}, count=100, block=1000
                    )
                except ResponseError as exc:
                    if "NOGROUP" not in str(exc):
                        raise
                    await self._ensure_group()
                    continue
                for _, entries in fresh or []:
                    for delivery in await self._deliveries(entries):
                        yield delivery

    @_guarded("ack")
    async def ack(self, delivery: Delivery) -> None:
        await self._init()
        await self._r.xack(self.keys.feed, self.group, delivery.delivery_id)

    async def aclose(self) -> None:
        """Stop the background tasks, then close every connection."""
        if self._follower is not None:
            await stop(self._follower)  # not a bare cancel: see bridge.aio
            self._follower = None
        await self._wakeups.aclose()
        for task in list(self._background):
            await stop(task)
        if self._sub is not self._r:
            await self._sub.aclose()
        await self._r.aclose()
