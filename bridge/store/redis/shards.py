"""A store's wake-up channels on Cluster: one per hash slot, heard through sharded pub/sub.

A script may SPUBLISH only to a channel in its own slot (valkey refuses another node's: "Attempted
to access a non local key in a cluster node script"), and the script that ends an ask runs in that
ask's slot. So a process has a channel per slot it waits in, ``<prefix>:wake:<token>:{<tag>}``,
where ``<tag>`` is a short string whose CRC16 falls in that slot (:func:`slot_tag`): the ending
script SPUBLISHes to the waiter's channel of its own slot within its one atomic step, and the
message stays on the node that serves the slot -- unlike a plain PUBLISH, which Cluster broadcasts
to every node over the cluster bus.

A channel is SSUBSCRIBEd the first time the process waits on an ask in its slot (at most one per
slot, kept while the process runs: 16,384 at most, each an entry in the node's channel table),
on one connection per node, each read by its own task (redis-py's ``ClusterPubSub`` reads its
nodes' connections one after the other, each for the whole timeout: either a wake-up waits behind
the other nodes' timeouts or the reading spins). Anything wrong with a node's connection -- it
dropped, or the server unsubscribed it because a slot moved to another node (a ``sunsubscribe``
nobody asked for) -- closes it: the cluster's slot map is read anew, its slots are subscribed
again where they are served now, and :class:`~bridge.store.redis.wakeups.Wakeups` re-reads the
asks waited for in them once each is live again, so no wake-up is lost meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from array import array
from binascii import crc_hqx
from collections.abc import Callable
from typing import Any

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import RedisError

from bridge.aio import stop
from bridge.store.redis.connect import loop_running, next_message


@functools.cache
def _tags() -> array[int]:
    """For each slot, the first counter whose hex text hashes to it (315,000 CRC16s, once per
    process: about 0.15 s, see :meth:`ShardChannels.prepare`; 64 KB)."""
    found = array("i", [-1]) * REDIS_CLUSTER_HASH_SLOTS
    left, n = REDIS_CLUSTER_HASH_SLOTS, 0
    while left:
        slot = crc_hqx(b"%x" % n, 0) % REDIS_CLUSTER_HASH_SLOTS  # key_slot of a text without {}
        if found[slot] < 0:
            found[slot] = n
            left -= 1
        n += 1
    return found


def slot_tag(slot: int) -> str:
    """A short hash tag whose key slot is ``slot`` (at most five hex digits)."""
    return f"{_tags()[slot]:x}"


class _Node:
    """One node's subscription: its pubsub, the slots subscribed there, the task reading it."""

    def __init__(self, pubsub: Any) -> None:
        self.pubsub = pubsub
        self.slots: set[int] = set()
        self.reader: asyncio.Task[None] | None = None


class ShardChannels:
    """The per-slot channels of one store on one Cluster, their subscriptions and readers.

    ``live(slot)`` is called when a slot's channel is subscribed (anew), ``lost()`` when some
    subscription dropped (every wait must be checked again, once its slot is live), ``heard(data)``
    with each message.
    """

    def __init__(
        self,
        cluster: Any,
        node_client: Callable[[Any], Any],
        base: str,
        *,
        live: Callable[[int], None],
        lost: Callable[[], None],
        heard: Callable[[str], None],
    ) -> None:
        self._cluster = cluster
        self._node_client = node_client
        self._base = base
        self._live_cb, self._lost_cb, self._heard = live, lost, heard
        self._wanted: set[int] = set()
        """Every slot whose channel was asked for: subscribed, or queued to be (again)."""
        self._live: set[int] = set()
        self._queue: set[int] = set()
        self._queued = asyncio.Event()
        self._stale = False
        self._nodes: dict[str, _Node] = {}
        self._placer: asyncio.Task[None] | None = None
        self._closing = False
        self.subscriptions = 0
        """How often a slot's channel was (re)subscribed."""

    @staticmethod
    async def prepare() -> None:
        """Build the slots' tags in a thread, not in the event loop's first wait."""
        await asyncio.to_thread(_tags)

    def channel(self, slot: int) -> str:
        """This store's wake-up channel in ``slot``."""
        return f"{self._base}:{{{slot_tag(slot)}}}"

    def is_live(self, slot: int) -> bool:
        return slot in self._live

    def want(self, slot: int) -> None:
        """Subscribe the slot's channel soon (``live`` tells when it is)."""
        if self._closing or slot in self._wanted:
            return
        self._wanted.add(slot)
        self._queue.add(slot)
        self._queued.set()
        if self._placer is None:
            self._placer = asyncio.create_task(self._place(), name="ask-bridge shard channels")

    async def _place(self) -> None:
        """Subscribe queued slots on the nodes that serve them, one SSUBSCRIBE per slot (one
        command may not span slots); after a failure, read the slot map anew first."""
        backoff = 0.02
        while True:
            await self._queued.wait()
            self._queued.clear()
            name = ""
            try:
                if self._stale:
                    await self._cluster.nodes_manager.initialize()
                    self._stale = False
                while self._queue:
                    slot = min(self._queue)
                    node = self._cluster.nodes_manager.get_node_from_slot(slot)
                    name = node.name
                    sub = self._nodes.get(name)
                    if sub is None:
                        sub = self._nodes[name] = _Node(self._node_client(node).pubsub())
                    sub.slots.add(slot)
                    self._queue.discard(slot)
                    await sub.pubsub.ssubscribe(self.channel(slot))
                    if sub.reader is None:
                        reader = self._read(name, sub)
                        sub.reader = asyncio.create_task(reader, name="ask-bridge shard")
                backoff = 0.02
            except (RedisError, OSError):
                if name in self._nodes and self._nodes[name].reader is None:
                    await self._drop(name)  # its reader drops it otherwise
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                self._stale = True
                self._queued.set()

    async def _read(self, name: str, sub: _Node) -> None:
        try:
            while True:
                message = await next_message(sub.pubsub)
                kind = message["type"]
                if kind == "smessage":
                    self._heard(message["data"])
                elif kind == "ssubscribe":
                    slot = key_slot(message["channel"].encode())
                    self._live.add(slot)
                    self.subscriptions += 1
                    self._live_cb(slot)
                elif kind == "sunsubscribe":  # not asked for: its slot moved to another node
                    break
        except (RedisError, OSError):
            pass
        finally:
            if not self._closing and loop_running():
                await self._drop(name)

    async def _drop(self, name: str) -> None:
        """This node's subscriptions are gone: place its slots anew, on a fresh slot map."""
        sub = self._nodes.pop(name)
        self._live.difference_update(sub.slots)
        self._queue.update(sub.slots)
        self._stale = True
        self._queued.set()
        self._lost_cb()
        with contextlib.suppress(RedisError, OSError):
            await sub.pubsub.aclose()

    async def aclose(self) -> None:
        self._closing = True
        if self._placer is not None:
            await stop(self._placer)
            self._placer = None
        for sub in list(self._nodes.values()):
            if sub.reader is not None:
                await stop(sub.reader)
            with contextlib.suppress(RedisError, OSError):
                await sub.pubsub.aclose()
        self._nodes.clear()
