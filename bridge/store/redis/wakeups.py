"""Waking waiting calls of one :class:`~bridge.store.redis.RedisStore`, pushed rather than polled.

Each store has its own wake-up channel (``Keys.waker``), which joins the wakers of every ask one of
its calls waits for (and of each ask it creates to wait for). The script that ends an ask publishes
its id on its wakers' channels only, so an answer wakes the one process that waits for it: the cost
of an answer does not grow with the number of replicas. A store holds one subscription for all its
waiters (its own channel, and the shared ``Keys.events``, on which only asks held by processes from
before per-process channels are woken). On a Cluster with sharded pub/sub the channel an ask's
wakers get is instead this store's channel in the ask's slot (:mod:`bridge.store.redis.shards`,
one connection per node), and a check waits until that channel is subscribed.
After every (re)subscription -- and whenever a waiter registers -- the status of the asks
concerned is re-read (and this store's channel put among their wakers), so a wake-up published
while a subscription was down, or before the waiter registered, is never missed. While a call
waits, its ask's lease is kept alive, so an answer arriving meanwhile is handed to it rather than
to the feed; and once it took the answer, until it confirms it returned it
(:meth:`Wakeups.hold`), so the answer goes to the feed only if this process dies holding it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.crc import key_slot
from redis.exceptions import RedisError

from bridge.aio import stop
from bridge.store.keys import Keys
from bridge.store.redis.connect import PIPELINE_CHUNK, loop_running, next_message
from bridge.store.redis.shards import ShardChannels

_REFRESH_CHUNK = 5000
"""Lease renewals one pipeline sends (small integer replies, so a big batch is cheap)."""
_MAX_STRETCH = 4
"""Most leases a late renewal round adds to the next leases: a process stalled for longer lets
them lapse (its answers go to the feed) rather than hold them for ever."""

Watch = Callable[[Sequence[str]], Awaitable[list[str]]]
"""Puts this store's channel among the given asks' wakers and returns their statuses."""


class Wakeups:
    """The subscription, the status re-check loop, the lease refresher and the waiters' futures.

    The three background tasks start with the first wait (:meth:`start`) and end with
    :meth:`aclose`.
    """

    def __init__(
        self,
        client: Any,
        subscriber: Any,
        keys: Keys,
        lease_ttl: float,
        *,
        channel: str,
        watch: Watch,
        observe: Watch,
    ) -> None:
        self._r = client
        self._sub = subscriber
        self._keys = keys
        self.channel = channel
        """This store's own wake-up channel."""
        self._watch = watch
        self._observe = observe
        self._lease_ms = int(lease_ttl * 1000)
        self._refresh_every = lease_ttl / 3
        self._waiters: dict[str, list[asyncio.Future[str | None]]] = {}
        """The futures of the calls waiting for each ask (a list: nearly always one, and a
        process may hold 100,000 of them)."""
        self._observers: dict[str, list[asyncio.Future[str | None]]] = {}
        """Calls that watch an ask without taking its outcome: woken alike, but hold no lease."""
        self._checks: set[str] = set()
        self._held: set[str] = set()
        self._check_wanted = asyncio.Event()
        self._subscribed = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._retired: set[asyncio.Task[None]] = set()
        self.resubscriptions = 0
        """How often the subscription was (re)established."""
        self.shards: ShardChannels | None = None
        """On a Cluster serving sharded pub/sub: this store's per-slot channels."""
        self._parked: dict[int, set[str]] = {}
        """Asks to check once their slot's channel is subscribed (on Cluster)."""
        self._terms_heard: Callable[[str], None] | None = None
        """What is done with each message on ``Keys.terms`` (:meth:`hear_terms`), if anything."""

    def use_shards(self, cluster: Any, node_client: Callable[[Any], Any]) -> None:
        """Wait on per-slot channels (:mod:`bridge.store.redis.shards`) from now on: on a
        Cluster that serves sharded pub/sub, before anything waits."""
        self.shards = ShardChannels(
            cluster,
            node_client,
            self.channel,
            live=self._slot_live,
            lost=self._recheck_all,
            heard=self._heard,
        )

    def channel_for(self, ask_id: str) -> str:
        """The channel this store hears the ask's wake-up on: its own, or on Cluster its own in
        the ask's slot."""
        if self.shards is None:
            return self.channel
        return self.shards.channel(self._slot(ask_id))

    def _slot(self, ask_id: str) -> int:
        return key_slot(self._keys.rec(ask_id).encode())

    def start(self) -> None:
        """Start the background tasks, once."""
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(), name="ask-bridge wake-ups")
            self._tasks = [
                asyncio.create_task(self._check_loop(), name="ask-bridge status checks"),
                asyncio.create_task(self._refresh_leases(), name="ask-bridge leases"),
            ]

    def resubscribe(self) -> None:
        """Subscribe anew (the master moved: the old one never hears a PUBLISH made on the new one,
        yet is kept alive for a while); the fresh subscription re-reads waiting asks."""
        if self._listener is None:
            return
        self._subscribed.clear()
        old = self._listener
        old.cancel()
        self._retired.add(old)
        old.add_done_callback(self._retired.discard)
        self._listener = asyncio.create_task(self._listen(), name="ask-bridge wake-ups")

    def hear_terms(self, heard: Callable[[str], None]) -> None:
        """Subscribe to ``Keys.terms`` too, from now on, handing each message's text (a new ask's
        id, a newline and its body) to ``heard``: the subscription is this store's one, started
        or made anew. Not on a Cluster (creations publish nothing there)."""
        self._terms_heard = heard
        if self._listener is None:
            self.start()
        else:
            self.resubscribe()

    def hold(self, ask_id: str) -> None:
        """Keep the ask's lease alive: this process took its answer and has not returned it."""
        self._held.add(ask_id)
        self.start()

    def release(self, ask_id: str) -> None:
        """Stop keeping the lease alive (the answer was returned, or handed to the feed)."""
        self._held.discard(ask_id)

    async def subscribed(self) -> None:
        """Return once the subscription is live."""
        await self._subscribed.wait()

    async def woken(self, ask_id: str, *, observe: bool = False) -> str | None:
        """Return once the ask has (probably) left ``pending``: a wake-up arrived for it -- then
        with the record it carries (``HGETALL`` as a JSON array) -- or a re-read found it not
        pending (``None``: the caller reads the outcome itself). ``observe``: the caller takes
        nothing, so its ask's lease is neither set nor kept alive."""
        fut: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        futures = self._observers if observe else self._waiters
        futures.setdefault(ask_id, []).append(fut)
        self._checks.add(ask_id)
        self._check_wanted.set()
        try:
            return await fut
        finally:
            group = futures.get(ask_id)
            if group is not None:
                group.remove(fut)
                if not group:
                    del futures[ask_id]

    async def aclose(self) -> None:
        tasks = [*([self._listener] if self._listener else []), *self._tasks, *self._retired]
        for task in tasks:
            await stop(task)  # not a bare cancel: see bridge.aio
        self._listener, self._tasks = None, []
        if self.shards is not None:
            await self.shards.aclose()

    def _heard(self, data: str) -> None:
        """A wake-up: the ask's id, then a newline and the record it carries (or nothing)."""
        ask_id, _, record = data.partition("\n")
        self._wake(ask_id, record or None)

    def _recheck_all(self) -> None:
        self._checks.update(self._waiters)
        self._checks.update(self._observers)
        self._check_wanted.set()

    def _slot_live(self, slot: int) -> None:
        """A slot's channel is subscribed (anew): what was published there before is found by
        checking the asks parked for it."""
        self._checks.update(self._parked.pop(slot, ()))
        self._check_wanted.set()

    def _park(self) -> None:
        """Keep back the checks of asks whose slot's channel is not subscribed yet (asking for
        it): checked before, a wake-up published in between would be lost."""
        assert self.shards is not None
        ready = set()
        for ask_id in self._checks:
            slot = self._slot(ask_id)
            if self.shards.is_live(slot):
                ready.add(ask_id)
            else:
                self._parked.setdefault(slot, set()).add(ask_id)
                self.shards.want(slot)
        self._checks = ready

    def _wake(self, ask_id: str, record: str | None = None) -> None:
        for group in (self._waiters, self._observers):
            for fut in group.get(ask_id, ()):
                if not fut.done():
                    fut.set_result(record)

    async def _listen(self) -> None:
        backoff = 0.02
        while True:
            pubsub = self._sub.pubsub()
            terms = self._terms_heard
            try:
                channels = (self._keys.events, self.channel)
                await pubsub.subscribe(*channels, *((self._keys.terms,) if terms else ()))
                if self.shards is not None:  # per-slot channels PUBLISHed by a process from
                    await pubsub.psubscribe(f"{self.channel}:*")  # before them (an upgrade)
                while True:
                    message = await next_message(pubsub)
                    kind = message["type"]
                    if kind == "subscribe" and message["channel"] == self.channel:
                        # (re)subscribed: anything published while away is found by re-reading
                        self.resubscriptions += 1
                        backoff = 0.02
                        self._recheck_all()
                        self._subscribed.set()
                    elif kind == "message" and message["channel"] == self._keys.terms:
                        if terms is not None:
                            terms(message["data"])
                    elif kind in ("message", "pmessage"):
                        self._heard(message["data"])
            except (RedisError, OSError):
                self._subscribed.clear()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
            finally:
                if loop_running():  # none when the garbage collector closes this: see it
                    with contextlib.suppress(RedisError, OSError):
                        await pubsub.aclose()

    async def _check_loop(self) -> None:
        """Batch status reads (and lease refreshes) for waiters that just registered or whose
        subscription was just made anew."""
        while True:
            await self._check_wanted.wait()
            self._check_wanted.clear()
            if self.shards is not None:
                self._park()
            # an ask both waited for and observed here is watched as a waiter's (lease and all)
            waited = [a for a in self._checks if a in self._waiters]
            observed = [a for a in self._checks if a in self._observers and a not in self._waiters]
            self._checks.clear()
            try:
                for watch, batch in ((self._watch, waited), (self._observe, observed)):
                    for start in range(0, len(batch), PIPELINE_CHUNK):
                        chunk = batch[start : start + PIPELINE_CHUNK]
                        statuses = await watch(chunk)
                        for ask_id, status in zip(chunk, statuses, strict=True):
                            if status != "pending":
                                self._wake(ask_id)
            except (RedisError, OSError):
                self._checks.update(waited, observed)
                await asyncio.sleep(0.05)
                self._check_wanted.set()

    async def _refresh_leases(self) -> None:
        """Every third of a lease, renew the lease of every ask a call waits for or holds: in big
        batches sent all at once, since a process busy with 100,000 calls runs each round trip
        only after everything else it has to do, and one after the other they took longer than
        a lease (the answers went to the feed instead of the waiting calls).

        A round that lands late (the process was saturated: answering 100,000 calls at once)
        makes anew any lease that lapsed meanwhile and lengthens the next leases by that
        lateness (up to :data:`_MAX_STRETCH` leases), so the leases outlast the renewals' own
        lag; a process that dies still lets them lapse."""
        loop = asyncio.get_running_loop()
        late = 0.0
        while True:
            due = loop.time() + self._refresh_every
            await asyncio.sleep(self._refresh_every)
            waiting = list(self._waiters.keys() | self._held)
            ms = self._lease_ms + int(min(late, self._lease_ms * _MAX_STRETCH / 1000) * 1000)
            size = _REFRESH_CHUNK
            chunks = [waiting[i : i + size] for i in range(0, len(waiting), size)]
            with contextlib.suppress(RedisError, OSError):
                await asyncio.gather(*(self._renew(chunk, ms) for chunk in chunks))
            late = max(0.0, loop.time() - due)

    async def _renew(self, ask_ids: list[str], ms: int) -> None:
        async with self._r.pipeline(transaction=False) as pipe:
            for ask_id in ask_ids:
                # SET, not PEXPIRE: a lease that lapsed while this process was saturated is
                # made anew (the call still waits, or still holds the answer it took)
                pipe.set(self._keys.lease(ask_id), "1", px=ms)
            await pipe.execute()
