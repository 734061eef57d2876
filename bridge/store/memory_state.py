"""What :class:`~bridge.store.memory.MemoryStore` holds, and the steps its operations share.

Per ask an :class:`AskState` (its record and what Redis keeps beside it: the lease, the hand-off,
the audit trail, claims), per stream a :class:`Stream` read through one consumer group as Redis
reads one; :class:`MemoryState` holds them under one lock with the internals every operation
calls with that lock held (ending an ask, waking its waiters, handing it to the feed) and the
feeds' readers. The operations themselves: :mod:`bridge.store.memory`.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from bridge.followups import next_step
from bridge.judging import handoff
from bridge.record import AskRecord, AskStatus
from bridge.store.base import Store
from bridge.store.terms import (
    NOISE_KINDS,
    RENDER_TRIES,
    Delivery,
    HistoryEvent,
    StoreSettings,
    tell_handed_to_feed,
)


@dataclass
class AskState:
    """One ask as the memory store holds it: its record, and what Redis keeps beside it."""

    record: AskRecord
    created: str
    """``creation_text`` of the record as created: a repeated create compares it."""
    purge_at: float
    lease_until: float = 0.0
    waiting: int = 0
    held: bool = False
    """This process took the answer and has not confirmed it: the lease lives (the store's
    ``aclose``, like the process dying, lets it lapse)."""
    handoff: str = ""
    """Where the outcome went as the ask ended (:func:`bridge.judging.handoff`), and how far
    its hand-off got since: ``taken``, ``confirmed`` (by the waiting call), ``sent`` (fed)."""
    answers_key: str | None = None
    attempt: str | None = None
    fed: dict[str, str] = field(default_factory=dict)
    """The entry of each stream (by name) that delivers this ask; later duplicates are dropped."""
    seq: int = 0
    log: list[tuple[int, HistoryEvent]] = field(default_factory=list)
    noise: list[tuple[int, HistoryEvent]] = field(default_factory=list)
    noise_dropped: int = 0
    render_at: float | None = None
    render_by: str | None = None
    """The submission attempt whose step claimed the showing last (``lua/lib/showing.lua``)."""
    render_tries: int = 0
    rendered: bool = False
    submitted: dict[str, tuple[str, str]] = field(default_factory=dict)
    """With ``required`` >= 2: per person, their submission's agreement key
    (:func:`bridge.judging.agreement_key`) and the attempt that recorded it."""
    reminded_at: float | None = None
    escalated: bool = False
    timer_step: str | None = None
    """The reminder or escalation claimed and not yet done (see
    ``bridge/store/redis/lua/timer.lua``)."""
    timer_at: float = 0.0
    timer_tries: int = 0

    def next_step(self, *, unposted: bool = False) -> tuple[str, float] | None:
        rec = self.record
        return next_step(
            rec.follow_ups,
            rec.created_at,
            reminded=rec.reminded,
            reminded_at=self.reminded_at,
            escalated=self.escalated,
            unposted=unposted,
        )

    def step_finished(self, step: str) -> bool:
        if step == "escalate":
            return self.escalated
        return self.record.reminded >= int(step.removeprefix("remind:"))

    def agreement(self) -> dict[str, str]:
        """Each person's current agreement key (see :func:`bridge.judging.agreeing`)."""
        return {person: key for person, (key, _) in self.submitted.items()}

    def lease_live(self, now: float) -> bool:
        return self.waiting > 0 or self.held or now < self.lease_until

    def show_in(self, interval: float, now: float) -> float | None:
        """Seconds until a sweep should show the ended ask's final state; ``None`` when there
        is nothing to show (see ``show_in`` in ``bridge/store/redis/lua/lib/core.lua``)."""
        rec = self.record
        if rec.message is None or self.rendered or self.render_tries >= RENDER_TRIES:
            return None
        since = rec.answered_at or rec.closed_at or now
        since = max(since, self.render_at or 0.0)
        return since + interval - now


class Stream:
    """One stream read through one consumer group, as Redis does it (XADD, XREADGROUP, XAUTOCLAIM,
    XACK): the answers feed, and the stream of ended asks, each trimmed by age (the retention) as
    Redis's are. Call with the store's lock held."""

    def __init__(self, name: str, idle: float, retention: float) -> None:
        self.name = name
        self.idle = idle
        self.retention = retention
        self._ids = itertools.count(1)
        self._entries: OrderedDict[str, str] = OrderedDict()  # entry id -> ask id
        self._fresh: deque[str] = deque()  # entries not yet handed to any consumer, oldest first
        self._pending: dict[str, tuple[str, float]] = {}  # entry -> (consumer, handed out at)
        self.listeners: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def add(self, ask_id: str) -> None:
        now_ms = int(time.time() * 1000)
        cutoff = now_ms - self.retention * 1000  # XADD MINID: entries older than the retention
        while self._entries and int(next(iter(self._entries)).split("-")[0]) < cutoff:
            oldest = next(iter(self._entries))
            self.drop(oldest)
            if self._fresh and self._fresh[0] == oldest:
                self._fresh.popleft()
        entry_id = f"{now_ms}-{next(self._ids)}"
        self._entries[entry_id] = ask_id
        self._fresh.append(entry_id)
        for loop, event in self.listeners:
            loop.call_soon_threadsafe(event.set)

    def take_batch(
        self, consumer: str, restart: bool, live: Callable[[str], AskState | None]
    ) -> list[Delivery]:
        """Like XREADGROUP 0 (on restart), then XAUTOCLAIM of idle entries, then XREADGROUP >."""
        now = time.time()
        mine = [e for e, (c, _) in self._pending.items() if restart and c == consumer]
        stale = [
            e for e, (_, at) in self._pending.items() if now - at >= self.idle and e not in mine
        ]
        fresh = list(self._fresh)
        self._fresh.clear()
        out: list[Delivery] = []
        for entry_id in [*mine, *stale, *fresh]:
            self._pending[entry_id] = (consumer, now)
            entry = live(self._entries.get(entry_id, ""))
            if entry is None or entry.fed.setdefault(self.name, entry_id) != entry_id:
                self.drop(entry_id)
                continue
            out.append(Delivery(entry_id, entry.record))
        return out

    def keep(self, consumer: str, entry_ids: Sequence[str]) -> None:
        """Like XCLAIM with no minimum idle time: to ``consumer``, idle from now."""
        now = time.time()
        for entry_id in entry_ids:
            if entry_id in self._pending:
                self._pending[entry_id] = (consumer, now)

    def drop(self, entry_id: str) -> None:
        self._pending.pop(entry_id, None)
        self._entries.pop(entry_id, None)


class MemoryState(Store):
    """The memory store's state and shared steps (its operations: :class:`MemoryStore`)."""

    def __init__(self, **settings: Unpack[StoreSettings]) -> None:
        """The settings of every store (:class:`~bridge.store.base.Store`)."""
        super().__init__(**settings)
        self._lock = threading.Lock()
        self._asks: dict[str, AskState] = {}
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._timers: dict[str, float] = {}  # pending ask with follow-ups -> when to visit it
        self._feed = Stream("feed", self.claim_idle, self.retention)
        self._ended = Stream("ended", self.ended_idle, self.retention)

    # -- internals (call with the lock held) ---------------------------------------------------

    def _live(self, ask_id: str, now: float | None = None) -> AskState | None:
        entry = self._asks.get(ask_id)
        if entry is not None and entry.purge_at <= (time.time() if now is None else now):
            del self._asks[ask_id]
            return None
        return entry

    def _event(
        self, entry: AskState, kind: str, user_id: str | None, now: float, **detail: Any
    ) -> None:
        entry.seq += 1
        event = (entry.seq, HistoryEvent(at=now, kind=kind, user_id=user_id, detail=detail))
        if kind not in NOISE_KINDS:
            entry.log.append(event)
            return
        entry.noise.append(event)
        over = len(entry.noise) - self._noise_cap
        if over > 0:
            del entry.noise[:over]
            entry.noise_dropped += over

    def _finish(self, entry: AskState, status: AskStatus, now: float) -> None:
        rec = entry.record
        entry.handoff = handoff(
            answered=status is AskStatus.ANSWERED,
            deferred=rec.deferred,
            waiter_live=entry.lease_live(now),
        )
        entry.record = rec.model_copy(
            update={"status": status, "deferred": rec.deferred or entry.handoff == "feed"}
        )
        if entry.handoff == "none" and rec.message is None:  # settled (``tidy``, lib/core.lua)
            self._undescribe(entry)
        entry.purge_at = now + self.retention
        self._timers.pop(rec.id, None)
        if entry.handoff == "feed":
            self._enqueue(entry)
        self._ended.add(rec.id)  # under the same lock: as atomic as the ending itself
        self._wake(rec.id)

    def _expire(self, entry: AskState, now: float) -> None:
        """End a pending ask past ``expires_at``, by a sweep or by a submission that found it."""
        entry.record = entry.record.model_copy(update={"closed_at": now})
        self._event(entry, "expired", None, now)
        self._finish(entry, AskStatus.EXPIRED, now)

    def _tidy(self, entry: AskState) -> None:
        """Its final state is shown, or cannot be: an ask that ended with nobody to tell is
        settled, and its descriptions go (``tidy`` in ``bridge/store/redis/lua/lib/core.lua``)."""
        if entry.handoff == "none":
            self._undescribe(entry)

    @staticmethod
    def _undescribe(entry: AskState) -> None:
        """The outcome reached whoever gets it: drop the options' descriptions (``undescribe`` in
        ``bridge/store/redis/lua/lib/core.lua``)."""
        rec = entry.record
        entry.record = rec.model_copy(update={"questions": rec.questions.undescribed()})

    def _enqueue(self, entry: AskState) -> None:
        self._feed.add(entry.record.id)
        entry.handoff = "sent"
        tell_handed_to_feed(entry.record)

    def _wake(self, ask_id: str) -> None:
        for fut in self._waiters.get(ask_id, ()):
            fut.get_loop().call_soon_threadsafe(_resolve, fut)

    @staticmethod
    def _take(entry: AskState) -> None:
        """The waiting call claims the outcome (a ``waiter`` hand-off, or one it took already)
        and holds the lease until it confirms."""
        if entry.handoff in ("waiter", "taken"):
            entry.handoff = "taken"
            entry.held = True

    def _to_feed(self, entry: AskState, now: float) -> None:
        """Hand an answer nobody will return to the feed (see ``release.lua`` and ``settle.lua``
        in ``bridge/store/redis/lua/``)."""
        entry.held = False
        entry.lease_until = 0.0
        entry.record = entry.record.model_copy(update={"deferred": True})
        self._event(entry, "handed_to_feed", None, now)
        self._enqueue(entry)

    # -- the feeds -----------------------------------------------------------------------------

    async def _read(self, stream: Stream, consumer: str) -> AsyncIterator[Delivery]:
        changed = asyncio.Event()
        token = (asyncio.get_running_loop(), changed)
        with self._lock:
            stream.listeners.append(token)
        restart = True  # first round: this consumer's own unacknowledged deliveries
        try:
            while True:
                changed.clear()
                with self._lock:
                    batch = stream.take_batch(consumer, restart, self._live)
                restart = False
                for delivery in batch:
                    yield delivery
                if not batch and not changed.is_set():
                    try:
                        await asyncio.wait_for(changed.wait(), timeout=min(stream.idle, 1.0))
                    except TimeoutError:
                        pass
        finally:
            with self._lock:
                stream.listeners.remove(token)

    def feed(self, consumer: str) -> AsyncIterator[Delivery]:
        return self._read(self._feed, consumer)

    async def ack(self, delivery: Delivery) -> None:
        with self._lock:
            self._feed.drop(delivery.delivery_id)
            entry = self._live(delivery.record.id)
            if entry is not None and entry.fed.get(self._feed.name) == delivery.delivery_id:
                self._undescribe(entry)  # its reader has the outcome (lua/acked.lua)

    def ended(self, consumer: str) -> AsyncIterator[Delivery]:
        return self._read(self._ended, consumer)

    async def ack_ended(self, delivery: Delivery) -> None:
        with self._lock:
            self._ended.drop(delivery.delivery_id)

    async def keep_ended(self, consumer: str, deliveries: Sequence[Delivery]) -> None:
        with self._lock:
            self._ended.keep(consumer, [d.delivery_id for d in deliveries])


def _resolve(fut: asyncio.Future[None]) -> None:
    """Wake one waiter, on its own event loop (through ``call_soon_threadsafe``)."""
    if not fut.done():
        fut.set_result(None)
