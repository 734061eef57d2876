"""A :class:`~bridge.store.redis.RedisStore`'s connections and script calls: its settings, one
:class:`~bridge.store.redis.link.Link` per event loop that uses it, the first use's start-up
(Sentinel's master switches followed, a Cluster's slots learnt once), the deployment's epoch, by
which a process notices that Redis lost its data, and every script call's way to the server
(batched, by SHA, within the caller's deadline; :mod:`bridge.store.redis.scripts` builds them)."""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any, Self, Unpack

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from bridge.loops import PerLoop
from bridge.store.ask_terms import AskTerms
from bridge.store.base import Store
from bridge.store.keys import DEFAULT_PREFIX, Keys
from bridge.store.redis.batch import GaveUp, Pipelined
from bridge.store.redis.connect import (
    DEFAULT_MAX_CONNECTIONS,
    ClusterSubscriber,
    Outgoing,
    SentinelSubscriber,
    connect,
    send_together,
)
from bridge.store.redis.faults import REDIS_ERRORS, gave_up, guarded, reraise
from bridge.store.redis.link import Link
from bridge.store.redis.scripts import (
    SOURCES,
    Call,
    Due,
    Head,
    Observe,
    Watch,
    argv,
    script_call,
)
from bridge.store.redis.shards import ShardChannels
from bridge.store.redis.wakeups import Wakeups
from bridge.store.terms import StoreSettings, give_up_at

log = logging.getLogger(__name__)

INDEX_TTL = 400 * 86400  # beyond any ask's expiry: refreshed on every write anyway
DEFAULT_GROUP = "bridge"
"""The consumer group reading the answers feed (:meth:`RedisStore.feed`)."""


class Connected(Store):
    """The settings, connections and start-up of a store (the operations: its subclasses)."""

    def __init__(
        self,
        client: Any,
        subscriber: Any | None = None,
        *,
        opener: Callable[[], tuple[Any, Any]] | None = None,
        prefix: str = DEFAULT_PREFIX,
        group: str = DEFAULT_GROUP,
        **settings: Unpack[StoreSettings],
    ) -> None:
        """``client`` and ``subscriber`` (default: the client) serve the first event loop that
        uses the store; ``opener`` makes another pair for each further loop (:meth:`from_url`
        passes one). ``prefix`` starts every key (:class:`~bridge.store.keys.Keys`), ``group``
        names the feed's consumer group; the settings are every store's
        (:class:`~bridge.store.base.Store`)."""
        super().__init__(**settings)
        self.keys = Keys(prefix)
        self.group = group
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
    ) -> Self:
        """A store for a ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` or
        ``redis+sentinel://`` URL (see :func:`bridge.store.redis.connect.connect`)."""
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
            scripts={op: client.register_script(text) for op, text in SOURCES.items()},
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

    def _script(self, op: str) -> Any:
        """``op``'s script registered with this loop's client (for Cluster, whose pipelines
        take no scripts: redis-py's ``Script`` loads it again where a node lost it)."""
        return self._links.get().scripts[op]

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

    @guarded("listening")
    async def listening(self) -> None:
        """Start the wake-up subscription now (the first :meth:`wait` does so otherwise) and
        return once it is live: from then on a waiter hears an answer as soon as it lands."""
        await self._init()
        self._wakeups.start()
        await self._wakeups.subscribed()

    async def learn_terms(self) -> None:
        """Hear creations on this store's subscription (:meth:`listening` returns once it is
        live); no call to Redis here, so Redis being down does not stop it: the subscription
        retries until it is back."""
        if self._cluster:  # creations publish nothing there: see Keys.terms
            return
        self._wakeups.hear_terms(self._heard_terms)

    def _heard_terms(self, data: str) -> None:
        """A creation's message on ``Keys.terms``: the new ask's terms kept, unless this process
        holds them already (the first it learned stand: terms never change) or the text is not
        an ask's (anyone allowed to publish there could send anything: dropped, said once at
        debug level)."""
        ask_id, _, body = data.partition("\n")
        if not ask_id or self._terms_cache.holds(ask_id):
            return
        try:
            terms = AskTerms.parsed(body)
        except ValueError:  # pydantic's ValidationError among them
            log.debug("a message on %s is no ask's terms: dropped", self.keys.terms)
            return
        self._terms_cache.put(ask_id, terms, ready=True)  # parsed now, not on the first click

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
            raise gave_up("its first use", maybe_saved=False) from None

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
        await self._r.set(self.keys.epoch, secrets.token_hex(8), nx=True, ex=INDEX_TTL)
        epoch: str | None = await self._r.get(self.keys.epoch)
        return epoch

    async def _check_epoch(self) -> None:
        """Compare the epoch with the one this process saw: gone or changed means the data this
        process wrote is gone (one error line each time that is found), then adopt the new one."""
        async with self._r.pipeline(transaction=False) as pipe:
            pipe.get(self.keys.epoch)
            pipe.expire(self.keys.epoch, INDEX_TTL)
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

    # -- script calls ---------------------------------------------------------------------------

    def _head(self, op: str, ask_id: str, now: float | None) -> Head:
        return Head(
            op,
            repr(time.time() if now is None else float(now)),
            self.keys.events,
            ask_id,
            int(self.retention * 1000),
            self._noise_cap,
        )

    def _keys(self, ask_id: str) -> list[str]:
        """The KEYS of a script call: the ask's, and the pending index, the ended-asks stream and
        the created index where the server lets one script write them all (not on Cluster: other
        slots)."""
        keys = self.keys.ask_keys(ask_id)
        if self._cluster:
            return keys
        return [*keys, self.keys.pending, self.keys.ended, self.keys.created]

    async def _run(
        self, ask_id: str, call: Call, *, now: float | None = None, alone: bool = False
    ) -> list[Any]:
        """``call`` on the ask's keys (:meth:`_call`)."""
        args = argv(self._head(call.OP, ask_id, now), call)
        return await self._call(call.OP, self._keys(ask_id), args, alone=alone)

    async def _call(
        self,
        op: str,
        keys: list[str],
        args: list[Any],
        *,
        alone: bool = False,
        linger: float = 0.0,
    ) -> list[Any]:
        """One call of ``op``'s script: in the next pipelined batch (:mod:`.batch`), or on its
        own on Cluster, whose pipelines take no scripts, or when ``alone`` (showing an ended ask:
        the sweeper bounds those itself, and they start while its expiries are still in flight,
        not behind the scripts queued meanwhile). ``linger``: seconds the call may wait for a
        batch to go with (:meth:`.batch.Pipelined.call`).

        Within the caller's deadline, if any (:func:`~bridge.store.base.giving_up_after`); its
        :class:`StoreUnavailable` says whether the call may have run (``maybe_saved``): a batched
        call its caller gave up on before it was written is withdrawn, and never runs."""
        if self._cluster:  # redis-py's cluster client cannot tell whether it sent the script
            deadline = asyncio.timeout_at(give_up_at())
            try:
                async with deadline:
                    reply: list[Any] = await self._script(op)(keys=keys, args=args)
            except TimeoutError:
                if not deadline.expired():
                    raise
                raise gave_up("a script call", maybe_saved=True) from None
            return reply
        call = script_call(op, keys, args)
        try:
            if alone:
                (reply,) = await self._sent_now([call])
            else:
                reply = await self._links.get().pipelined.call(call, linger=linger)
        except GaveUp as late:
            raise gave_up("a script call", maybe_saved=late.sent) from None
        except REDIS_ERRORS as exc:
            reraise("a script call", exc, maybe_saved=call.sent)
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
            raise gave_up("script calls", maybe_saved=any(c.sent for c in calls)) from None

    async def _send_scripts(self, calls: list[Outgoing]) -> list[Any]:
        """Script calls in one round trip (:func:`~.connect.send_together`): each reply,
        or the error that call raised, or ``WITHDRAWN``. A server that lost the scripts (a
        restart, ``SCRIPT FLUSH``; a fresh one never had them) refuses each call unrun; then every
        op's script is loaded, in one round trip -- so the next op's first call runs at once, as
        when the store had one script -- and those calls are sent once more, together."""
        replies = await send_together(self._r, calls)
        unrun = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if unrun:
            loads = [("SCRIPT", "LOAD", text) for text in SOURCES.values()]
            for loaded in await send_together(self._r, loads):
                if isinstance(loaded, Exception):
                    raise loaded
            again = await send_together(self._r, [calls[i] for i in unrun])
            for i, reply in zip(unrun, again, strict=True):
                replies[i] = reply
        return replies

    async def _run_many(
        self, calls: Sequence[tuple[str, Call]], *, now: float | None = None
    ) -> list[list[Any]]:
        """Each ``(ask id, call)`` in one round trip (:meth:`_send_scripts`), or concurrently on
        Cluster, whose pipelines take no scripts. Each reply as :meth:`_run` gives it."""
        if not calls:
            return []
        if len(calls) == 1:  # a lone call joins the store's other calls (.batch)
            ((ask_id, call),) = calls
            return [await self._run(ask_id, call, now=now)]
        if self._cluster:
            return list(await asyncio.gather(*(self._run(a, c, now=now) for a, c in calls)))
        outgoing = [
            script_call(c.OP, self._keys(a), argv(self._head(c.OP, a, now), c)) for a, c in calls
        ]
        out: list[list[Any]] = []
        for reply in await self._sent_now(outgoing):
            if isinstance(reply, Exception):
                raise reply
            out.append(list(reply))
        return out

    async def _watch(self, ask_ids: Sequence[str]) -> list[str]:
        """Put this store's wake-up channel among each ask's wakers (and keep its lease alive);
        the asks' statuses (``missing`` for an unknown one), in one round trip
        (:class:`~bridge.store.redis.wakeups.Wakeups`)."""
        lease_ms = int(self.lease_ttl * 1000)
        return await self._join(lambda waker: Watch(lease_ms, waker), ask_ids)

    async def _observe(self, ask_ids: Sequence[str]) -> list[str]:
        """Put this store's wake-up channel among each ask's wakers, without any lease; the
        asks' statuses, in one round trip."""
        return await self._join(Observe, ask_ids)

    async def _join(self, make: Callable[[str], Call], ask_ids: Sequence[str]) -> list[str]:
        """The call ``make`` builds for this store's channel, for each ask: one channel for all,
        or on Cluster with sharded pub/sub the one of each ask's slot (each script call on its
        own there anyway)."""
        if self._wakeups.shards is None:
            call = make(self._wakeups.channel)
            replies = await self._run_many([(a, call) for a in ask_ids])
        else:
            channel = self._wakeups.channel_for
            runs = (self._run(a, make(channel(a))) for a in ask_ids)
            replies = list(await asyncio.gather(*runs))
        return [str(reply[0]) for reply in replies]

    async def _index_and_run(
        self,
        ask_id: str,
        call: Call,
        score: float,
        *,
        now: float | None = None,
        xx: bool = False,
        nx: bool = False,
        alone: bool = False,
    ) -> list[Any]:
        """ZADD to ``due``, then ``call``: one script call that writes both where the server
        allows it (the index as the 9th key), two round trips on Cluster (another slot)."""
        keys = self._keys(ask_id)
        head = self._head(call.OP, ask_id, now)
        ttl = INDEX_TTL + int(self.retention)
        if self._cluster:
            await self._r.zadd(self.keys.due, {ask_id: score}, xx=xx, nx=nx)
            if not xx:
                await self._r.expire(self.keys.due, ttl)
            reply: list[Any] = await self._script(call.OP)(keys=keys, args=argv(head, call))
            return reply
        due = Due(repr(float(score)), "xx" if xx else "nx" if nx else "", ttl)
        return await self._call(call.OP, [*keys, self.keys.due], argv(head, call, due), alone=alone)

    async def aclose(self) -> None:
        """Stop the background tasks, then close every connection: this loop's now, those of
        any other loop using the store on that loop (:class:`~bridge.loops.PerLoop`)."""
        await self._links.aclose()


def _retrieved(attempt: asyncio.Future[None]) -> None:
    """Mark a shared start attempt's failure as seen: every caller may have gone (cancelled),
    and each that awaited it got the error already."""
    if not attempt.cancelled():
        attempt.exception()
