"""``RedisStore``: pending asks in Redis (standalone, TLS, Sentinel or Cluster), shared by replicas.

Correctness rests on three rules (key scheme, record fields and hand-off states:
:mod:`bridge.store.keys`):

* Every change to one ask is one call of ``ask.lua`` over that ask's keys, which share a hash tag,
  so replicas race freely and Cluster never sees a cross-slot script.
* Waking is pushed: each script that ends an ask publishes its id on the wake-up channel of each
  process waiting for it (only those: an answer costs the same however many replicas run; on
  Cluster a channel per slot, SPUBLISHed, so it stays on one node: :mod:`.redis_shards`), and
  a store's :class:`~bridge.store.redis_wakeups.Wakeups` holds the subscriptions for all its
  waiters, never missing a wake-up published while one was away.
* Answers never get lost between processes: an answer lands either with a live waiter (a short
  lease key proves one is alive) or on the feed stream. The global keys (the ``due``, ``pending``
  and ``timers`` indexes, the feed and ended-asks streams) are written by the same script outside
  Cluster, and right after it on Cluster, where they live in other slots (:mod:`bridge.store.keys`
  says which); ``due`` always holds an ask until its hand-off is settled, so a sweeper repairs
  whatever a crashed process left half-done.

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
(after the client's own retries, which ride out a restart or failover of a few seconds). Those
retries re-send a command whose reply was lost after Redis ran it, so every script op is written to
be run twice (see ``ask.lua``): ``submit`` carries a token per call, so its re-sent attempt is still
``ACCEPTED``.

Lost data: a Redis restarted without persistence comes back empty, silently. The ``epoch`` key
(:mod:`bridge.store.keys`) lets a process notice: :attr:`RedisStore.lost_data` turns true and one
error line names the likely cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import secrets
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from importlib.resources import files
from typing import Any, NoReturn, ParamSpec, TypeVar

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
from bridge.followups import next_step
from bridge.loops import PerLoop
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, MessageRef, Responder
from bridge.store import redis_codec as codec
from bridge.store.base import (
    DEFAULT_ENDED_IDLE,
    DEFAULT_LEASE_TTL,
    DEFAULT_NOISE_CAP,
    DEFAULT_RENDER_INTERVAL,
    DEFAULT_RETENTION,
    DEFAULT_TIMER_RETRY,
    RENDER_TRIES,
    SWEEP_BATCH,
    TIMER_TRIES,
    Delivery,
    DuplicateAsk,
    Ended,
    FormProblem,
    HistoryEvent,
    PendingPage,
    Picks,
    Store,
    StoreUnavailable,
    SubmitOutcome,
    SubmitResult,
    TimerClaim,
    check_close_status,
    check_event_kind,
    creation_text,
    dump_answers,
    give_up_at,
    merge_history,
    page_cursor,
    parse_cursor,
    parse_step,
    tell_handed_to_feed,
    timer_detail,
    typed_text,
)
from bridge.store.keys import DEFAULT_PREFIX, Fields, Keys, pending_member, platform_range
from bridge.store.redis_batch import GaveUp, Pipelined
from bridge.store.redis_connect import (
    DEFAULT_MAX_CONNECTIONS,
    PIPELINE_CHUNK,
    ClusterSubscriber,
    Outgoing,
    SentinelSubscriber,
    connect,
    send_together,
)
from bridge.store.redis_link import Link
from bridge.store.redis_shards import ShardChannels
from bridge.store.redis_wakeups import Wakeups

log = logging.getLogger(__name__)

_SCRIPT = files("bridge.store").joinpath("ask.lua").read_text()
_SHA = hashlib.sha1(_SCRIPT.encode()).hexdigest()


def _script_call(keys: list[str], argv: list[Any]) -> Outgoing:
    """One call of ``ask.lua`` by its SHA, on its way (:class:`~.redis_connect.Outgoing`)."""
    return Outgoing(("EVALSHA", _SHA, len(keys), *keys, *argv))


_INDEX_TTL = 400 * 86400  # beyond any ask's expiry: refreshed on every write anyway
_SWEEP_AHEAD = 3
"""Sweep batches in flight at once (of the store's connections, 4 by default)."""
_SETTLE_PER_CALL = 20
"""Asks one ``settle`` script call visits (not on Cluster): the script's setup, about as dear as
an expiry's own work, is paid once for them all, while Redis stays busy with one call for at most
a few milliseconds (others' commands wait no longer than behind a pipeline's)."""

DEFAULT_GROUP = "bridge"
ENDED_GROUP = "notify"
"""The consumer group reading the ended-asks stream (:meth:`RedisStore.ended`)."""
_OUTCOMES = {
    "accepted": SubmitOutcome.ACCEPTED,
    "repeated": SubmitOutcome.REPEATED,
    "recorded": SubmitOutcome.RECORDED,
    "already_answered": SubmitOutcome.ALREADY_ANSWERED,
    "closed": SubmitOutcome.CLOSED,
    "expired": SubmitOutcome.CLOSED,  # this submission found it past expires_at and expired it
    "not_allowed": SubmitOutcome.NOT_ALLOWED,
    "invalid": SubmitOutcome.INVALID,
    "groups": SubmitOutcome.GROUPS,
    "verify": SubmitOutcome.VERIFY,
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


_REDIS_ERRORS = (RedisError, RedisClusterException, OSError)


def _reraise(op: str, exc: BaseException, *, maybe_saved: bool = True) -> NoReturn:
    """Raise :class:`StoreUnavailable` for redis-py's ``exc`` when it means "could not reach the
    server", else ``exc`` itself. ``maybe_saved``: unless the caller knows its command was never
    written, it may have run."""
    down = isinstance(exc, _DOWN) or (
        isinstance(exc, RedisClusterException) and isinstance(exc.__cause__, _DOWN)
    )
    if not down:
        raise exc
    raise StoreUnavailable(
        f"ask store: Redis did not answer during {op} ({type(exc).__name__}: {exc})",
        maybe_saved=maybe_saved,
    ) from exc


def _gave_up(op: str, *, maybe_saved: bool) -> StoreUnavailable:
    """The caller's deadline (:func:`~bridge.store.base.giving_up_after`) passed during ``op``."""
    what = "it may have run" if maybe_saved else "it was never sent, and never will be"
    return StoreUnavailable(
        f"ask store: Redis did not answer {op} in time ({what})", maybe_saved=maybe_saved
    )


@contextlib.contextmanager
def _reaching(op: str) -> Iterator[None]:
    """:func:`_unavailable` around a block (the feed, a generator)."""
    try:
        yield
    except _REDIS_ERRORS as exc:
        _reraise(op, exc)


def _guarded(
    op: str,
) -> Callable[[Callable[_P, Awaitable[_T]]], Callable[_P, Coroutine[Any, Any, _T]]]:
    """Turn redis-py's "could not reach the server" errors into :class:`StoreUnavailable`
    (a plain ``try``, not a context manager: a waiting call keeps this frame for hours)."""

    def wrap(fn: Callable[_P, Awaitable[_T]]) -> Callable[_P, Coroutine[Any, Any, _T]]:
        @functools.wraps(fn)
        async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            try:
                return await fn(*args, **kwargs)
            except _REDIS_ERRORS as exc:
                _reraise(op, exc)

        return run

    return wrap


class RedisStore(Store):
    """The shared store. Build with :meth:`from_url` (or pass clients for tests/embedding)."""

    def __init__(
        self,
        client: Any,
        subscriber: Any | None = None,
        *,
        opener: Callable[[], tuple[Any, Any]] | None = None,
        prefix: str = DEFAULT_PREFIX,
        retention: float = DEFAULT_RETENTION,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        group: str = DEFAULT_GROUP,
        claim_idle: float = 60.0,
        noise_cap: int = DEFAULT_NOISE_CAP,
        render_interval: float = DEFAULT_RENDER_INTERVAL,
        timer_retry: float = DEFAULT_TIMER_RETRY,
        ended_idle: float = DEFAULT_ENDED_IDLE,
    ) -> None:
        if noise_cap < 1:
            raise ValueError(f"noise_cap must be at least 1, not {noise_cap}")
        self.keys = Keys(prefix)
        self.retention = retention
        self.lease_ttl = lease_ttl
        self.group = group
        self.claim_idle = claim_idle
        self._noise_cap = noise_cap
        self.render_interval = render_interval
        self.timer_retry = timer_retry
        self.ended_idle = ended_idle
        self._epoch: str | None = None
        self._lost_data = False
        self._cluster = isinstance(client, RedisCluster)
        self._given: tuple[Any, Any] | None = (
            client,
            subscriber if subscriber is not None else client,
        )
        """The clients passed in, for the first loop to use them (and the next, once that
        loop's link closed); other loops at the same time need ``opener``."""
        self._given_to: Link | None = None
        self._opener = opener
        self._links: PerLoop[Link] = PerLoop(self._link, self._unlink)
        """Connections and background work per event loop (:mod:`bridge.loops`)."""

    @classmethod
    def from_url(
        cls, url: str, *, max_connections: int = DEFAULT_MAX_CONNECTIONS, **options: Any
    ) -> RedisStore:
        """A store for a ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` or
        ``redis+sentinel://`` URL (see :func:`bridge.store.redis_connect.connect`)."""
        opener = functools.partial(connect, url, max_connections=max_connections)
        client, subscriber = opener()
        return cls(client, subscriber, opener=opener, **options)

    # -- per event loop -------------------------------------------------------------------------

    def _link(self) -> Link:
        """A new loop uses this store: its own clients (the ones passed in if no other live
        loop holds them, else fresh ones from ``opener``), subscription and batcher."""
        if self._given is not None and self._given_to is None:
            client, subscriber = self._given
        elif self._opener is not None:
            client, subscriber = self._opener()
        else:
            raise RuntimeError(
                "this RedisStore was made from client objects, which serve one event loop at a "
                "time, and another loop is using it: make it with RedisStore.from_url(url) to "
                "use it from several loops at once (synchronous ask_user calls run on a loop of "
                "their own)"
            )
        wakeups = Wakeups(
            client,
            subscriber,
            self.keys,
            self.lease_ttl,
            channel=self.keys.waker(secrets.token_hex(8)),
            watch=self._watch,
            observe=self._observe,
        )
        link = Link(
            client=client,
            subscriber=subscriber,
            script=client.register_script(_SCRIPT),
            wakeups=wakeups,
            pipelined=Pipelined(self._send_scripts),
            ready=not self._cluster,
        )
        if self._given is not None and client is self._given[0]:
            self._given_to = link
        return link

    async def _unlink(self, link: Link) -> None:
        await link.aclose()
        if link is self._given_to:
            self._given_to = None

    @property
    def _r(self) -> Any:
        return self._links.get().client

    @property
    def _sub(self) -> Any:
        return self._links.get().subscriber

    @property
    def _script(self) -> Any:
        return self._links.get().script

    @property
    def _wakeups(self) -> Wakeups:
        return self._links.get().wakeups

    @property
    def lost_data(self) -> bool:
        return self._lost_data

    @property
    def resubscriptions(self) -> int:
        """How often the wake-up subscription was (re)established: 1 after the first, +1 after
        each reconnect or master switch."""
        try:
            link: Link | None = self._links.get()
        except RuntimeError:  # read outside any loop: the loop that used the store last
            link = self._links.latest()
        return 0 if link is None else link.wakeups.resubscriptions

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
        link = self._links.get()
        if link.follower is None and isinstance(link.subscriber, SentinelSubscriber):
            link.follower = asyncio.create_task(
                link.subscriber.follow(link.wakeups.resubscribe), name="ask-bridge master switches"
            )
        if link.ready and self._epoch is not None:
            return
        # One attempt at a time, shared by every operation that arrives meanwhile: with Redis
        # down, N concurrent first operations then fail together after one attempt's retries
        # (about 8 s), not one after another (N times that). An operation arriving after an
        # attempt failed starts a new one. Shielded: a cancelled caller leaves it to the others.
        if link.starting is None or link.starting.done():
            link.starting = asyncio.create_task(self._start(link), name="ask-bridge store start")
            link.starting.add_done_callback(_retrieved)
        deadline = asyncio.timeout_at(give_up_at())  # the caller's operation is not sent yet
        try:
            async with deadline:
                await asyncio.shield(link.starting)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise _gave_up("its first use", maybe_saved=False) from None

    async def _start(self, link: Link) -> None:
        if not link.ready:
            await link.client.initialize()
            if isinstance(link.subscriber, ClusterSubscriber) and await self._sharded_pubsub():
                await ShardChannels.prepare()
                link.wakeups.use_shards(link.client, link.subscriber.node)
            link.ready = True
        if self._epoch is None:
            self._epoch = await self._adopt_epoch()

    async def _sharded_pubsub(self) -> bool:
        """Whether the Cluster serves sharded pub/sub (Redis 7 or later, valkey): an SPUBLISH
        that reaches nobody answers, else the command is unknown."""
        try:
            await self._r.execute_command("SPUBLISH", f"{self.keys.prefix}:probe", "")
        except ResponseError as exc:
            if "unknown command" not in str(exc).lower():
                raise
            return False
        return True

    async def _adopt_epoch(self) -> str | None:
        """The deployment's epoch: set it if nobody did (SET NX), then read what stands."""
        await self._r.set(self.keys.epoch, secrets.token_hex(8), nx=True, ex=_INDEX_TTL)
        epoch: str | None = await self._r.get(self.keys.epoch)
        return epoch

    async def _check_epoch(self) -> None:
        """Compare the epoch with the one this process saw: gone or changed means the data this
        process wrote is gone (one error line each time that is found), then adopt the new one."""
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.get(self.keys.epoch)
            pipe.expire(self.keys.epoch, _INDEX_TTL)
            current, _ = await pipe.execute()
        if current is not None and current == self._epoch:
            return
        self._lost_data = True
        log.error(
            "ask store %r: the store lost its data (epoch key %s is %s): was Redis restarted "
            "without persistence? check appendonly/save; pending asks and unread answers are gone",
            self.keys.prefix,
            self.keys.epoch,
            "missing" if current is None else "changed",
        )
        self._epoch = await self._adopt_epoch()

    def _argv(self, op: str, ask_id: str, args: Sequence[Any], now: float | None) -> list[Any]:
        return [
            op,
            repr(time.time() if now is None else float(now)),
            self.keys.events,
            ask_id,
            int(self.retention * 1000),
            self._noise_cap,
            *args,
        ]

    def _keys(self, ask_id: str) -> list[str]:
        """The KEYS of a script call: the ask's, and the pending index, the ended-asks stream and
        the created index where the server lets one script write them all (not on Cluster: other
        slots)."""
        keys = self.keys.ask_keys(ask_id)
        if self._cluster:
            return keys
        return [*keys, self.keys.pending, self.keys.ended, self.keys.created]

    async def _run(self, op: str, ask_id: str, *args: Any, now: float | None = None) -> list[Any]:
        return await self._call(self._keys(ask_id), self._argv(op, ask_id, args, now))

    async def _call(self, keys: list[str], argv: list[Any], *, alone: bool = False) -> list[Any]:
        """One call of ``ask.lua``: in the next pipelined batch (:mod:`.redis_batch`), or on its
        own on Cluster, whose pipelines take no scripts, or when ``alone`` (showing an ended ask:
        the sweeper bounds those itself, and they start while its expiries are still in flight,
        not behind the scripts queued meanwhile).

        Within the caller's deadline, if any (:func:`~bridge.store.base.giving_up_after`); its
        :class:`StoreUnavailable` says whether the call may have run (``maybe_saved``): a batched
        call its caller gave up on before it was written is withdrawn, and never runs."""
        if self._cluster:  # redis-py's cluster client cannot tell whether it sent the script
            deadline = asyncio.timeout_at(give_up_at())
            try:
                async with deadline:
                    reply: list[Any] = await self._script(keys=keys, args=argv)
            except TimeoutError:
                if not deadline.expired():
                    raise
                raise _gave_up("a script call", maybe_saved=True) from None
            return reply
        call = _script_call(keys, argv)
        try:
            if alone:
                (reply,) = await self._sent_now([call])
            else:
                reply = await self._links.get().pipelined.call(call)
        except GaveUp as gave_up:
            raise _gave_up("a script call", maybe_saved=gave_up.sent) from None
        except _REDIS_ERRORS as exc:
            _reraise("a script call", exc, maybe_saved=call.sent)
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def _sent_now(self, calls: list[Outgoing]) -> list[Any]:
        """:meth:`_send_scripts` in the caller's own task, within its deadline (the caller's
        cancellation stops it: nothing of it is left to run later)."""
        deadline = asyncio.timeout_at(give_up_at())
        try:
            async with deadline:
                return await self._send_scripts(calls)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise _gave_up("script calls", maybe_saved=any(c.sent for c in calls)) from None

    async def _send_scripts(self, calls: list[Outgoing]) -> list[Any]:
        """Script calls in one round trip (:func:`~.redis_connect.send_together`): each reply,
        or the error that call raised, or ``WITHDRAWN``. A server that lost the script (a
        restart, ``SCRIPT FLUSH``) refuses each call unrun; it is loaded and those are sent once
        more, together."""
        replies = await send_together(self._r, calls)
        unrun = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if unrun:
            await self._r.script_load(_SCRIPT)
            again = await send_together(self._r, [calls[i] for i in unrun])
            for i, reply in zip(unrun, again, strict=True):
                replies[i] = reply
        return replies

    async def _run_many(
        self, op: str, ask_ids: Sequence[str], args: Sequence[Any], *, now: float | None = None
    ) -> list[list[Any]]:
        """The same op over many asks in one round trip (:meth:`_send_scripts`), or concurrently
        on Cluster, whose pipelines take no scripts. Each reply as :meth:`_run` gives it."""
        if not ask_ids:
            return []
        if len(ask_ids) == 1:  # a lone call joins the store's other calls (.redis_batch)
            return [await self._run(op, ask_ids[0], *args, now=now)]
        if self._cluster:
            return list(await asyncio.gather(*(self._run(op, a, *args, now=now) for a in ask_ids)))
        calls = [
            _script_call(self._keys(ask_id), self._argv(op, ask_id, args, now))
            for ask_id in ask_ids
        ]
        out: list[list[Any]] = []
        for reply in await self._sent_now(calls):
            if isinstance(reply, Exception):
                raise reply
            out.append(list(reply))
        return out

    async def _watch(self, ask_ids: Sequence[str]) -> list[str]:
        """Put this store's wake-up channel among each ask's wakers (and keep its lease alive);
        the asks' statuses (``missing`` for an unknown one), in one round trip
        (:class:`~bridge.store.redis_wakeups.Wakeups`)."""
        return await self._join("watch", ask_ids, int(self.lease_ttl * 1000))

    async def _observe(self, ask_ids: Sequence[str]) -> list[str]:
        """Put this store's wake-up channel among each ask's wakers, without any lease; the
        asks' statuses, in one round trip."""
        return await self._join("observe", ask_ids)

    async def _join(self, op: str, ask_ids: Sequence[str], *args: Any) -> list[str]:
        """``op`` with this store's channel for each ask: one channel for all, or on Cluster with
        sharded pub/sub the one of each ask's slot (each script call on its own there anyway)."""
        if self._wakeups.shards is None:
            replies = await self._run_many(op, ask_ids, (*args, self._wakeups.channel))
        else:
            channel = self._wakeups.channel_for
            runs = (self._run(op, a, *args, channel(a)) for a in ask_ids)
            replies = list(await asyncio.gather(*runs))
        return [str(reply[0]) for reply in replies]

    async def _unindex_if_settled(self, ask_id: str, raw: dict[str, str]) -> None:
        """Drop an ask from ``due`` once nothing is left to do for it; if this step is lost, the
        sweeper's next visit finds the ask settled and drops it then."""
        if _settled(raw):
            await self._r.zrem(self.keys.due, ask_id)

    def _ttl_ms(self, record: AskRecord) -> int:
        return int((max(record.expires_at - time.time(), 0) + self.retention) * 1000)

    async def _index_and_run(
        self,
        ask_id: str,
        score: float,
        argv: list[Any],
        *,
        xx: bool = False,
        nx: bool = False,
        alone: bool = False,
    ) -> list[Any]:
        """ZADD to ``due``, then the script: one script call that writes both where the server
        allows it (the index as the 9th key), two round trips on Cluster (another slot)."""
        keys = self._keys(ask_id)
        ttl = _INDEX_TTL + int(self.retention)
        if self._cluster:
            await self._r.zadd(self.keys.due, {ask_id: score}, xx=xx, nx=nx)
            if not xx:
                await self._r.expire(self.keys.due, ttl)
            reply: list[Any] = await self._script(keys=keys, args=argv)
            return reply
        mode = "xx" if xx else "nx" if nx else ""
        argv = [*argv, repr(float(score)), mode, ttl]
        return await self._call([*keys, self.keys.due], argv, alone=alone)

    async def _unpend(self, record: AskRecord) -> None:
        """On Cluster, drop an ask that just ended from the pending and created indexes
        (elsewhere its script did)."""
        if self._cluster and record.status is not AskStatus.PENDING:
            member = pending_member(record.destination.platform, record.id)
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zrem(self.keys.pending, member)
                pipe.zrem(self.keys.created, record.id)
                await pipe.execute()

    async def _to_feed(self, ask_id: str) -> bool:
        """Put a finished ask on the feed, then mark it sent; a crash between repeats the XADD
        later (the feed drops duplicate entries at delivery, see ``deliver`` in ask.lua). Told
        (:func:`~bridge.store.base.tell_handed_to_feed`) here, by the process that put it there.
        Whether the ask left ``due`` (settled: its final state is shown, or nothing to show)."""
        min_id = f"{int((time.time() - self.retention) * 1000)}-0"
        await self._r.xadd(self.keys.feed, {"ask": ask_id}, minid=min_id, approximate=True)
        await self._r.expire(self.keys.feed, int(self.retention) + 86400)
        tell_handed_to_feed(ask_id)
        reply = await self._run("sent", ask_id)
        settled: bool = reply[0] != "ok" or reply[1] == "1"
        if settled:
            await self._r.zrem(self.keys.due, ask_id)
        return settled

    async def _index(self, mapping: dict[str, float]) -> None:
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.due, mapping)
            pipe.expire(self.keys.due, _INDEX_TTL + int(self.retention))
            await pipe.execute()

    async def _untime(self, ask_id: str, raw: dict[str, str]) -> None:
        """An ask with follow-ups ended: nothing is due for it any more (a sweep that visits it
        first drops it as well)."""
        if codec.has_follow_ups(raw):
            await self._r.zrem(self.keys.timers, ask_id)

    async def _tell(self, ask_ids: Sequence[str]) -> list[bool]:
        """Put ended asks on the ended-asks stream (one round trip), then mark them told (one
        more); a crash between repeats the XADD at a sweep (a duplicate entry is dropped at
        delivery). Whether each is settled."""
        if not ask_ids:
            return []
        min_id = f"{int((time.time() - self.retention) * 1000)}-0"
        async with self._r.pipeline(transaction=False) as pipe:
            for ask_id in ask_ids:
                pipe.xadd(self.keys.ended, {"ask": ask_id}, minid=min_id, approximate=True)
            pipe.expire(self.keys.ended, int(self.retention) + 86400)
            await pipe.execute()
        replies = await self._run_many("told", ask_ids, ())
        return [reply[0] != "ok" or reply[1] == "1" for reply in replies]

    async def _ended(self, ask_id: str, raw: dict[str, str]) -> None:
        """An ask just left ``pending`` (by this process's step): tell the ended-asks stream,
        feed it if the answers feed gets it, drop it from ``due`` if nothing is left to do (its
        final state is shown), and from ``timers``."""
        await self._untime(ask_id, raw)
        if raw.get(Fields.TOLD) == "0":
            (settled,) = await self._tell([ask_id])
            raw = {**raw, Fields.TOLD: "1"}
        else:
            settled = _settled(raw)
        if raw.get(Fields.HANDOFF) == "feed":
            await self._to_feed(ask_id)
        elif settled:
            await self._r.zrem(self.keys.due, ask_id)

    # -- the contract -------------------------------------------------------------------------

    @_guarded("create")
    async def create(self, record: AskRecord) -> None:
        await self._init()
        member = pending_member(record.destination.platform, record.id)
        detail = json.dumps(
            {
                "destination": record.destination.model_dump(mode="json"),
                "answerers": record.answerers,
            },
            separators=(",", ":"),  # kept in the audit trail for the retention: no padding
        )
        argv = self._argv(
            "create",
            record.id,
            (
                creation_text(record),
                repr(record.expires_at),
                json.dumps(list(record.answerers)),
                "1" if record.deferred else "0",
                self._ttl_ms(record),
                int(self.lease_ttl * 1000),
                detail,
                self._wakeups.channel_for(record.id),
                record.required,
                member,
            ),
            record.created_at,
        )
        first = next_step(
            record.follow_ups, record.created_at, reminded=0, reminded_at=None, escalated=False
        )
        if first is not None:  # indexed first, like ``due``: never pending yet never reminded
            await self._time({record.id: first[1]})
        # indexed first (same pipeline, in order): an ask is never pending yet unswept
        reply = await self._index_and_run(record.id, record.expires_at, argv)
        if reply[0] == "exists":
            raise DuplicateAsk(f"an ask with id {record.id!r} already exists")
        if self._cluster and reply[1] == "pending":  # the script could not: other slots
            ttl = _INDEX_TTL + int(self.retention)
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zadd(self.keys.pending, {member: 0})
                pipe.expire(self.keys.pending, ttl)
                pipe.zadd(self.keys.created, {record.id: record.created_at})
                pipe.expire(self.keys.created, ttl)
                await pipe.execute()

    @_guarded("get")
    async def get(self, ask_id: str) -> AskRecord | None:
        await self._init()
        raw = await self._r.hgetall(self.keys.rec(ask_id))
        return codec.record(raw) if raw else None

    @_guarded("set_message")
    async def set_message(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        raw = await self._set_message(ask_id, message, brief=False)
        return codec.record(raw) if raw is not None else None

    @_guarded("message_posted")
    async def message_posted(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        raw = await self._set_message(ask_id, message, brief=True)
        if raw is None:
            return None
        if raw[Fields.STATUS] == "pending" and not any(
            field.startswith(Fields.SUBMISSION) for field in raw
        ):
            return None  # the usual case (brief: the script sent no record): none built
        return codec.record(raw)

    async def _set_message(
        self, ask_id: str, message: MessageRef, *, brief: bool
    ) -> dict[str, str] | None:
        """The record hash after recording the message; ``None`` for an unknown ask. ``brief``:
        only ``{status: pending}`` while it is pending -- the script sends no record, so a wave
        of posts does not read and parse a whole record each (the peak stays in RSS)."""
        await self._init()
        args = (*_posted(message), "1" if brief else "0")
        argv = self._argv("message", ask_id, args, None)
        # Indexed with the script (NX: an indexed ask keeps its score): an ask that ended, and
        # left the index, before its message was known must be shown -- by a sweep if need be.
        mark = time.time() + self.render_interval
        reply = await self._index_and_run(ask_id, mark, argv, nx=True)
        if reply[0] != "ok":
            await self._r.zrem(self.keys.due, ask_id)
            return None
        if len(reply) == 1:  # brief, and pending
            return {Fields.STATUS: "pending"}
        return codec.pairs(reply[1])

    @_guarded("defer")
    async def defer(self, ask_id: str) -> AskRecord | None:
        await self._init()
        reply = await self._run("defer", ask_id, int(self.lease_ttl * 1000))
        if reply[0] == "missing":
            return None
        if reply[0] == "taken":
            self._wakeups.hold(ask_id)
        return codec.record(codec.pairs(reply[1]))

    @_guarded("confirm")
    async def confirm(self, ask_id: str) -> None:
        self._wakeups.release(ask_id)  # first: should the script fail, the lease lapses (feed)
        await self._init()
        reply = await self._run("confirm", ask_id)
        if reply[0] == "ok" and reply[1] == "1":
            await self._r.zrem(self.keys.due, ask_id)

    @_guarded("submit")
    async def submit(
        self,
        ask_id: str,
        who: Responder,
        answers: Sequence[Answer],
        *,
        now: float | None = None,
        attempt: str | None = None,
        verified: Mapping[str, Sequence[str]] | None = None,
    ) -> SubmitResult:
        await self._init()
        now = time.time() if now is None else now
        # one token per call, in the script's arguments: redis-py's re-send carries the same one
        attempt = secrets.token_hex(8) if attempt is None else attempt
        dumped, chosen = dump_answers(answers)
        argv = self._argv(
            "submit",
            ask_id,
            (
                who.key,  # one submission per person (bridge.identities), else per user
                json.dumps(list(who.authorising)),
                who.model_dump_json(),
                chosen,
                json.dumps(who.user_id),
                json.dumps({"name": who.name, "answers": dumped}, ensure_ascii=False),
                attempt,
                "1" if any(a.other_text is not None for a in answers) else "0",
                _verified(verified),
            ),
            now,
        )
        # Sent with the verdict: should this process die right after the script accepts, a
        # sweeper still visits the ask soon and finishes the hand-off (XX: only indexed asks).
        mark = now + self.lease_ttl
        return await self._judged(ask_id, await self._index_and_run(ask_id, mark, argv, xx=True))

    async def _judged(self, ask_id: str, reply: list[Any]) -> SubmitResult:
        """A submission's verdict, after finishing what the script left to this process; its
        record is built only if the caller reads it (see :class:`SubmitResult`)."""
        if reply[0] == "missing":
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        raw = codec.pairs(reply[1])
        found = reply[2] if reply[0] == "invalid" and len(reply) > 2 else []  # a form's problems
        problems = {int(found[i]): FormProblem(found[i + 1]) for i in range(0, len(found), 2)}
        verify = tuple(json.loads(reply[2])) if reply[0] == "verify" else ()
        result = SubmitResult(
            _OUTCOMES[reply[0]], None, problems, build=lambda: codec.record(raw), verify=verify
        )
        if reply[0] in ("accepted", "expired"):  # this submission ended it
            if self._cluster:
                record = result.record
                assert record is not None  # built from the reply's record hash
                await self._unpend(record)
            await self._ended(ask_id, raw)
        return result

    @_guarded("pick")
    async def pick(
        self,
        ask_id: str,
        who: Responder,
        question: int,
        option: int,
        *,
        groups_unknown: bool = False,
        now: float | None = None,
        attempt: str | None = None,
        verified: Mapping[str, Sequence[str]] | None = None,
    ) -> SubmitResult:
        """One script: ``ask.lua`` builds the answer from the stored question set."""
        choice = (question, option)
        return await self._choose(
            "pick", ask_id, who, choice, groups_unknown, now, attempt, verified
        )

    @_guarded("submit_form")
    async def submit_form(
        self,
        ask_id: str,
        who: Responder,
        picks: Mapping[int, Picks],
        *,
        groups_unknown: bool = False,
        now: float | None = None,
        attempt: str | None = None,
        verified: Mapping[str, Sequence[str]] | None = None,
    ) -> SubmitResult:
        """One script: ``ask.lua`` judges the form and builds the answers from the stored
        question set; the typed text is judged and measured here (:func:`typed_text`)."""
        form = [[i, list(p.selected), *typed_text(p)] for i, p in picks.items()]
        choice = (json.dumps(form, ensure_ascii=False),)
        return await self._choose(
            "form", ask_id, who, choice, groups_unknown, now, attempt, verified
        )

    async def _choose(
        self,
        op: str,
        ask_id: str,
        who: Responder,
        choice: tuple[Any, ...],
        groups_unknown: bool,
        now: float | None,
        attempt: str | None,
        verified: Mapping[str, Sequence[str]] | None,
    ) -> SubmitResult:
        """Run ``pick`` or ``form``: the person, what they chose (the op's own arguments), and
        the rest as :meth:`submit` sends it; the script builds the answers from the stored set."""
        await self._init()
        now = time.time() if now is None else now
        attempt = secrets.token_hex(8) if attempt is None else attempt
        argv = self._argv(
            op,
            ask_id,
            (
                who.key,  # one submission per person (bridge.identities), else per user
                json.dumps(list(who.authorising)),
                who.model_dump_json(),
                *choice,
                json.dumps(who.user_id),
                json.dumps(who.name, ensure_ascii=False),
                attempt,
                "1" if groups_unknown else "0",
                _verified(verified),
            ),
            now,
        )
        mark = now + self.lease_ttl  # as submit's
        return await self._judged(ask_id, await self._index_and_run(ask_id, mark, argv, xx=True))

    @_guarded("close")
    async def close(
        self, ask_id: str, status: AskStatus, *, by: str | None = None
    ) -> AskRecord | None:
        await self._init()
        check_close_status(status)
        argv = self._argv("close", ask_id, (status.value, json.dumps(by)), None)
        # Rescored with the script (XX: only indexed asks): the closer shows the final state;
        # should it not, the sweeper does once the render interval has passed.
        mark = time.time() + self.render_interval
        reply = await self._index_and_run(ask_id, mark, argv, xx=True)
        if reply[0] != "closed":
            return None
        raw = codec.pairs(reply[1])
        record = codec.record(raw)
        await self._unpend(record)
        await self._ended(ask_id, raw)
        return record

    @_guarded("release")
    async def release(self, ask_id: str) -> None:
        self._wakeups.release(ask_id)
        await self._init()
        # Indexed with the script (a take may have unindexed it): should this cleanup be cut
        # short after the script moved the answer to ``feed``, a sweeper still puts it there.
        mark = time.time() + self.lease_ttl
        reply = await self._index_and_run(ask_id, mark, self._argv("release", ask_id, (), None))
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
        async with self._r.pipeline(transaction=False) as pipe:  # one slot: one node
            pipe.lrange(self.keys.log(ask_id), 0, -1)
            pipe.lrange(self.keys.noise(ask_id), 0, -1)
            pipe.hget(self.keys.rec(ask_id), Fields.NOISE_DROPPED)
            lifecycle, noise, dropped = await pipe.execute()
        return merge_history(_events(lifecycle), _events(noise), int(dropped or 0))

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

    @_guarded("count_pending")
    async def count_pending(self, platform: str | None = None) -> int:
        """One ZCARD (or ZLEXCOUNT for a platform) of the pending index: no ask is read."""
        await self._init()
        if platform is None:
            count: int = await self._r.zcard(self.keys.pending)
        else:
            count = await self._r.zlexcount(self.keys.pending, *platform_range(platform))
        return count

    @_guarded("pending_page")
    async def pending_page(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        channel: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
    ) -> PendingPage:
        """Walks the ``created`` index from the newest ask down, within the age bounds (score
        bounds: no ask outside them is read), one batch per round trip, and parses a record only
        once its body passed the channel filter."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        await self._init()
        after = None if cursor is None else parse_cursor(cursor)
        if after is None:
            await self._index_created()
        top = "+inf" if created_before is None else repr(float(created_before))
        if after is not None and (created_before is None or after[0] < created_before):
            top = repr(after[0])  # ties at the cursor's time are skipped below
        bottom = "-inf" if created_after is None else repr(float(created_after))
        found: list[AskRecord] = []
        offset = 0
        while True:
            batch: list[tuple[str, float]] = await self._r.zrevrangebyscore(
                self.keys.created, top, bottom, start=offset, num=PIPELINE_CHUNK, withscores=True
            )
            offset += len(batch)
            last = len(batch) < PIPELINE_CHUNK
            if after is not None:
                batch = [(ask_id, at) for ask_id, at in batch if (at, ask_id) < after]
            async with self._r.pipeline(transaction=False) as pipe:
                for ask_id, _ in batch:
                    pipe.hgetall(self.keys.rec(ask_id))
                raws = await pipe.execute()
            for i, ((ask_id, at), raw) in enumerate(zip(batch, raws, strict=True)):
                if not raw or raw[Fields.STATUS] != "pending":
                    continue  # ended (on Cluster its ender may not have unindexed it yet)
                if channel is not None and not _in_channel(raw, channel):
                    continue
                found.append(codec.record(raw))
                if len(found) == limit:
                    end = last and i == len(batch) - 1
                    return PendingPage(found, None if end else page_cursor(at, ask_id))
            if last:
                return PendingPage(found, None)

    async def _index_created(self) -> None:
        """Pending asks that a version before the ``created`` index made (it wrote only the
        ``pending`` index) join it, so a listing shows them. Run by a listing's first page; reads
        the two indexes' sizes only, unless they differ (during a rolling upgrade, or on Cluster
        for an instant after an ask ended): then each member of ``pending`` that ``created``
        lacks is indexed by a script step of its own ask, only while it is pending."""
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.zcard(self.keys.pending)
            pipe.zcard(self.keys.created)
            pending, created = await pipe.execute()
        if created >= pending:
            return
        for start in range(0, pending, PIPELINE_CHUNK):
            members = await self._r.zrange(self.keys.pending, start, start + PIPELINE_CHUNK - 1)
            ids = [str(member).partition("\0")[2] for member in members]
            if not ids:
                return
            scores = await self._r.zmscore(self.keys.created, ids)
            missing = [ask_id for ask_id, at in zip(ids, scores, strict=True) if at is None]
            replies = await self._run_many("index_created", missing, ())
            if self._cluster:  # the script could not: another slot
                found = {
                    ask_id: float(reply[1])
                    for ask_id, reply in zip(missing, replies, strict=True)
                    if reply[0] == "pending" and reply[1]
                }
                if found:
                    await self._r.zadd(self.keys.created, found)

    async def sweep_batches(
        self, now: float | None = None, *, size: int = SWEEP_BATCH
    ) -> AsyncIterator[list[Ended]]:
        """Each batch: the next ``size`` asks due in the index, settled by one pipeline of
        per-ask scripts (one round trip; each ask still its own atomic step, in its own slot on
        Cluster) that answer a few words each, not the record, then one pipeline updating the
        indexes."""
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size}")
        with _reaching("sweep"):
            await self._init()
            await self._check_epoch()
            now = time.time() if now is None else now
            # A few batches in flight, each on its own connection: Redis runs one batch's
            # scripts while this process encodes the next. A visited ask leaves the due range
            # (rescored past ``now``, or dropped) when its batch is done; the next batch is the
            # first asks due that no batch in flight holds.
            flight: dict[asyncio.Task[list[Ended]], list[str]] = {}
            more = True
            try:
                while True:
                    while more and len(flight) < _SWEEP_AHEAD:
                        held = {a for batch in flight.values() for a in batch}
                        found = await self._r.zrangebyscore(
                            self.keys.due, "-inf", now, start=0, num=size + len(held)
                        )
                        fresh = [a for a in found if a not in held]
                        # more may follow: the range was full, or it held more than a batch
                        more = len(found) == size + len(held) or len(fresh) > size
                        ids = fresh[:size]
                        if ids:
                            flight[asyncio.create_task(self._settle(ids, now))] = ids
                        else:
                            break  # all that is due is in flight
                    if not flight:
                        return
                    done, _ = await asyncio.wait(flight, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        del flight[task]
                        shown = task.result()
                        if shown:
                            yield shown
            finally:
                for task in flight:
                    await stop(task)

    async def _visit(self, ids: Sequence[str], now: float) -> list[list[Any]]:
        """``settle`` for each ask, one reply each: on Cluster one script call per ask (each in
        its own slot), elsewhere :data:`_SETTLE_PER_CALL` asks per call, the calls pipelined."""
        args = (self.lease_ttl, self.render_interval)
        if self._cluster:
            runs = (self._run("settle", a, *args, now=now) for a in ids)
            return [list(replies[0]) for replies in await asyncio.gather(*runs)]
        calls: list[Outgoing] = []
        for at in range(0, len(ids), _SETTLE_PER_CALL):
            chunk = ids[at : at + _SETTLE_PER_CALL]
            keys = self._keys(chunk[0])
            for ask_id in chunk[1:]:
                keys += self.keys.ask_keys(ask_id)
            calls.append(
                _script_call(keys, self._argv("settle", chunk[0], (*args, *chunk[1:]), now))
            )
        out: list[list[Any]] = []
        for replies in await self._sent_now(calls):
            if isinstance(replies, Exception):
                raise replies
            out += (list(reply) for reply in replies)
        return out

    async def _settle(self, ids: Sequence[str], now: float) -> list[Ended]:
        """One batch of a sweep: each ask's ``settle`` visit, then the indexes brought up to
        date (every new score is past ``now``, so the next round sees other asks)."""
        replies = await self._visit(ids, now)
        shown: list[Ended] = []
        later: dict[str, float] = {}
        unindex: list[str] = []
        ended: list[tuple[str, str]] = []  # (platform, id) to drop from the indexes on Cluster
        untime: list[str] = []  # expired: no reminder or escalation is due any more
        # expired here, or its ender died before telling (verdict 'tell'): told in one go
        tell = [
            ask_id
            for ask_id, reply in zip(ids, replies, strict=True)
            if reply[0] not in ("later", "missing", "done") and reply[4] == "0"
        ]
        told = dict(zip(tell, await self._tell(tell), strict=True))
        for ask_id, reply in zip(ids, replies, strict=True):
            verdict = reply[0]
            if verdict == "later":
                later[ask_id] = float(reply[1])
                continue
            if verdict == "missing":
                unindex.append(ask_id)
                continue
            platform = str(reply[1])
            ended.append((platform, ask_id))
            if verdict == "done":
                unindex.append(ask_id)
                continue
            if verdict in ("expired", "show"):
                shown.append(Ended(ask_id, platform, verdict == "expired"))
            if verdict == "expired":
                untime.append(ask_id)
            settled = told[ask_id] if ask_id in told else reply[3] == "1"
            if reply[2] == "feed":
                settled = await self._to_feed(ask_id)
            elif settled:
                unindex.append(ask_id)
            if not settled:  # to show: visit again should nobody mark it shown
                later[ask_id] = now + self.render_interval
        async with self._r.pipeline(transaction=False) as pipe:
            if self._cluster and ended:
                pipe.zrem(self.keys.pending, *(pending_member(*each) for each in ended))
                pipe.zrem(self.keys.created, *(ask_id for _, ask_id in ended))
            if untime:
                pipe.zrem(self.keys.timers, *untime)
            if unindex:
                pipe.zrem(self.keys.due, *unindex)
            if later:
                pipe.zadd(self.keys.due, later)
                pipe.expire(self.keys.due, _INDEX_TTL + int(self.retention))
            await pipe.execute()
        return shown

    @_guarded("claim_render")
    async def claim_render(
        self,
        ask_id: str,
        *,
        now: float | None = None,
        message: MessageRef | None = None,
        unshown: bool = False,
    ) -> AskRecord | None:
        await self._init()
        # a token per claim: redis-py's re-send of this very claim is granted again
        token = secrets.token_hex(8)
        posted = ("", "{}") if message is None else _posted(message)
        unshown_arg = "1" if unshown else "0"
        argv = self._argv("claim", ask_id, (self.render_interval, token, *posted, unshown_arg), now)
        if message is None:
            reply = await self._call(self._keys(ask_id), argv, alone=True)
        else:  # it may learn the message here: indexed, so a failed render is retried by a sweep
            mark = time.time() + self.render_interval
            reply = await self._index_and_run(ask_id, mark, argv, nx=True, alone=True)
        return codec.record(codec.pairs(reply[1])) if reply[0] == "claimed" else None

    @_guarded("mark_rendered")
    async def mark_rendered(self, ask_id: str) -> None:
        await self._init()
        reply = await self._call(
            self._keys(ask_id), self._argv("rendered", ask_id, (), None), alone=True
        )
        if reply[0] == "ok" and reply[1] == "1":
            await self._r.zrem(self.keys.due, ask_id)

    async def _time(self, mapping: dict[str, float]) -> None:
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.zadd(self.keys.timers, mapping)
            pipe.expire(self.keys.timers, _INDEX_TTL + int(self.retention))
            await pipe.execute()

    @_guarded("claim_timers")
    async def claim_timers(self, now: float | None = None) -> list[TimerClaim]:
        await self._init()
        now = time.time() if now is None else now
        ids = await self._r.zrangebyscore(
            self.keys.timers, "-inf", now, start=0, num=PIPELINE_CHUNK
        )
        # a token per round: a re-sent claim is granted again (one claim per ask per round)
        args = (self.timer_retry, secrets.token_hex(8), TIMER_TRIES)
        replies = await self._run_many("timer", ids, args, now=now)
        claims: list[TimerClaim] = []
        later: dict[str, float] = {}
        busy: dict[str, float] = {}
        drop: list[str] = []
        for ask_id, reply in zip(ids, replies, strict=True):
            if reply[0] == "later":
                later[ask_id] = float(reply[1])
            elif reply[0] == "busy":
                busy[ask_id] = float(reply[1])
            elif reply[0] == "claimed":
                record = codec.record(codec.pairs(reply[2]))
                claims.append(parse_step(ask_id, str(reply[1]), record))
                later[ask_id] = now + self.timer_retry  # claimed again then, unless done
            else:  # ended, done, missing
                drop.append(ask_id)
        if drop:
            await self._r.zrem(self.keys.timers, *drop)
        if later:
            await self._time(later)
        if busy:  # never later than what the claimant's timer_done wrote meanwhile
            await self._r.zadd(self.keys.timers, busy, lt=True)
        return claims

    @_guarded("timer_done")
    async def timer_done(
        self, claim: TimerClaim, message: MessageRef | None = None, *, now: float | None = None
    ) -> AskRecord | None:
        await self._init()
        detail = json.dumps(timer_detail(claim, message))
        posted = message.model_dump_json() if message is not None else ""
        reply = await self._run("timer_done", claim.ask_id, claim.step, posted, detail, now=now)
        if reply[0] != "ok":
            return None
        record = codec.record(codec.pairs(reply[2]))
        if record.status is AskStatus.PENDING:
            if reply[1]:
                await self._time({claim.ask_id: float(reply[1])})
            else:
                await self._r.zrem(self.keys.timers, claim.ask_id)
        elif message is not None:  # ended meanwhile: the sweeper shows it on this message too
            await self._index({claim.ask_id: time.time()})
        return record

    @_guarded("observe")
    async def observe(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Like :meth:`wait`, woken by the same subscription, but reads the record instead of
        taking the outcome, and holds no lease."""
        await self._init()
        self._wakeups.start()
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    await self._wakeups.subscribed()
                    await self._wakeups.woken(ask_id, observe=True)
            except TimeoutError:
                return None
            raw = await self._r.hgetall(self.keys.rec(ask_id))
            if not raw:
                await self._check_epoch()  # gone before its retention: was the data lost?
                return None
            record = codec.record(raw)
            if record.status is not AskStatus.PENDING:
                return record

    async def wait(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Wait for the ask to leave ``pending``; take the answer if it is this waiter's.

        The record comes back with ``deferred=True`` when the answer went to the feed instead
        (this waiter's lease had lapsed); ``None`` on timeout or for an unknown ask. A taken
        answer's lease is kept alive by this store until :meth:`confirm` or :meth:`release`.
        (Not ``_guarded``: a waiting call keeps this frame for hours, one frame is enough.)
        """
        try:
            await self._init()
            self._wakeups.start()
            deadline = asyncio.get_running_loop().time() + timeout
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        await self._wakeups.subscribed()
                        carried = await self._wakeups.woken(ask_id)
                except TimeoutError:
                    return None
                if carried is not None:  # the wake-up carries the record: no take needed
                    raw = codec.pairs(json.loads(carried))
                    if raw.get(Fields.HANDOFF) in ("waiter", "taken"):
                        self._wakeups.hold(ask_id)  # the lease lives until this call confirms
                    return codec.record(raw)
                reply = await self._run("take", ask_id, int(self.lease_ttl * 1000))
                if reply[0] == "missing":
                    await self._check_epoch()  # gone before its retention: was the data lost?
                    return None
                record = codec.record(codec.pairs(reply[1]))
                if reply[0] == "taken":
                    self._wakeups.hold(ask_id)  # the lease lives until this call confirms
                if record.status is not AskStatus.PENDING:
                    return record
        except _REDIS_ERRORS as exc:
            _reraise("wait", exc)

    # -- the feed -----------------------------------------------------------------------------

    async def _ensure_group(self, stream: str, group: str) -> None:
        try:
            await self._r.xgroup_create(stream, group, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        await self._r.expire(stream, int(self.retention) + 86400, nx=True)

    async def _deliveries(
        self, stream: str, group: str, marker: str, entries: Sequence[Any]
    ) -> list[Delivery]:
        out: list[Delivery] = []
        for entry_id, fields in entries:
            ask_id = (fields or {}).get("ask")
            reply = await self._run("deliver", ask_id, entry_id, marker) if ask_id else ["gone"]
            if reply[0] == "deliver":
                out.append(Delivery(entry_id, codec.record(codec.pairs(reply[1]))))
            else:  # trimmed, past retention, or a duplicate entry of an ask already delivered
                await self._r.xack(stream, group, entry_id)
        return out

    async def _read(
        self, stream: str, group: str, marker: str, consumer: str, idle: float
    ) -> AsyncIterator[Delivery]:
        """Deliveries for ``consumer``: first its own unacknowledged ones (after a restart), then
        entries idle too long at other consumers (they died), then new ones."""
        with _reaching("feed"):
            await self._init()
            await self._ensure_group(stream, group)
            pending = await self._r.xreadgroup(group, consumer, {stream: "0"}, count=PIPELINE_CHUNK)
            for _, entries in pending:
                for delivery in await self._deliveries(stream, group, marker, entries):
                    yield delivery
            idle_ms = int(idle * 1000)
            while True:
                try:
                    claimed = await self._r.xautoclaim(
                        stream, group, consumer, idle_ms, "0-0", count=100
                    )
                    for delivery in await self._deliveries(stream, group, marker, claimed[1]):
                        yield delivery
                    fresh = await self._r.xreadgroup(
                        group, consumer, {stream: ">"}, count=100, block=1000
                    )
                except ResponseError as exc:
                    if "NOGROUP" not in str(exc):
                        raise
                    await self._ensure_group(stream, group)
                    continue
                for _, entries in fresh or []:
                    for delivery in await self._deliveries(stream, group, marker, entries):
                        yield delivery

    def feed(self, consumer: str) -> AsyncIterator[Delivery]:
        return self._read(self.keys.feed, self.group, Fields.FED, consumer, self.claim_idle)

    @_guarded("ack")
    async def ack(self, delivery: Delivery) -> None:
        """XACK, then ``acked``: the descriptions go only once the entry can no longer be handed
        out again (should the second step fail, they stay for the retention)."""
        await self._init()
        await self._r.xack(self.keys.feed, self.group, delivery.delivery_id)
        await self._run("acked", delivery.record.id, delivery.delivery_id)

    def ended(self, consumer: str) -> AsyncIterator[Delivery]:
        return self._read(self.keys.ended, ENDED_GROUP, Fields.TOLD_BY, consumer, self.ended_idle)

    @_guarded("ack_ended")
    async def ack_ended(self, delivery: Delivery) -> None:
        await self._init()
        await self._r.xack(self.keys.ended, ENDED_GROUP, delivery.delivery_id)

    @_guarded("keep_ended")
    async def keep_ended(self, consumer: str, deliveries: Sequence[Delivery]) -> None:
        """XCLAIM to ``consumer`` with JUSTID: their idle time starts again, nothing else."""
        if not deliveries:
            return
        await self._init()
        ids = [d.delivery_id for d in deliveries]
        for start in range(0, len(ids), PIPELINE_CHUNK):
            chunk = ids[start : start + PIPELINE_CHUNK]
            await self._r.xclaim(self.keys.ended, ENDED_GROUP, consumer, 0, chunk, justid=True)

    async def aclose(self) -> None:
        """Stop the background tasks, then close every connection: this loop's now, those of
        any other loop using the store on that loop (:class:`~bridge.loops.PerLoop`)."""
        await self._links.aclose()


def _retrieved(attempt: asyncio.Future[None]) -> None:
    """Mark a shared start attempt's failure as seen: every caller may have gone (cancelled),
    and each that awaited it got the error already."""
    if not attempt.cancelled():
        attempt.exception()


def _verified(verified: Mapping[str, Sequence[str]] | None) -> str:
    """``verified`` as the script takes it: ``''`` when the caller cannot re-check anyone's
    authority, else a JSON object of each key's authorising ids (``{}``: nobody checked yet)."""
    if verified is None:
        return ""
    return json.dumps({key: list(ids) for key, ids in verified.items()}, ensure_ascii=False)


def _settled(raw: dict[str, str]) -> bool:
    """Nothing left for a sweeper to do: the ask ended, its hand-off is settled, and its final
    state is shown (or there is no message to show it on, or showing it failed too often)."""
    if raw.get(Fields.STATUS, "pending") == "pending":
        return False
    if raw.get(Fields.HANDOFF) not in ("none", "sent", "confirmed"):
        return False
    if raw.get(Fields.TOLD) == "0":
        return False
    return (
        not raw.get(Fields.MESSAGE)
        or raw.get(Fields.RENDERED) == "1"
        or int(raw.get(Fields.RENDER_TRIES) or 0) >= RENDER_TRIES
    )


def _posted(message: MessageRef) -> tuple[str, str]:
    """Where an ask was posted as the record's JSON, and as the ``posted`` event's detail."""
    text = message.model_dump_json()
    return text, f'{{"message":{text}}}'


def _in_channel(raw: dict[str, str], channel: str) -> bool:
    """Whether the stored body was posted to ``channel`` (a channel or DM user id), before any
    record is built (:func:`~bridge.store.base.page_matches`)."""
    where = json.loads(raw[Fields.BODY])["destination"]
    return channel in (where.get("channel"), where.get("user"))


def _events(lines: Sequence[str]) -> list[tuple[int, HistoryEvent]]:
    """Audit-trail lines with their sequence numbers (0 for lines written before there were)."""
    out = []
    for line in lines:
        data = json.loads(line)
        out.append((int(data.pop("seq", 0)), HistoryEvent.model_validate(data)))
    return out
