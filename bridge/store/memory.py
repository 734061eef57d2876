"""``MemoryStore``: the embedded default when no ``REDIS_URL`` is set (one process, no durability).

It keeps the exact semantics of :class:`~bridge.store.redis.RedisStore` -- verdicts, hand-off to a
live waiter or the feed, leases, sweeping, retention, audit trail -- so code tested against it
behaves the same on Redis. Each operation runs under one lock with no ``await`` inside, which is
what makes it atomic (the Lua script's job in Redis); waiters on any event loop are woken safely.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.followups import next_step
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, MessageRef, Responder, Submission
from bridge.store.base import (
    DEFAULT_ENDED_IDLE,
    DEFAULT_LEASE_TTL,
    DEFAULT_NOISE_CAP,
    DEFAULT_RENDER_INTERVAL,
    DEFAULT_RETENTION,
    DEFAULT_TIMER_RETRY,
    NO_LONGER_ALLOWED,
    NOISE_KINDS,
    RENDER_TRIES,
    SWEEP_BATCH,
    TIMER_TRIES,
    Delivery,
    DuplicateAsk,
    Ended,
    HistoryEvent,
    Store,
    SubmitOutcome,
    SubmitResult,
    TimerClaim,
    check_close_status,
    check_event_kind,
    creation_text,
    dump_answers,
    merge_history,
    parse_step,
    tell_handed_to_feed,
    timer_detail,
)


def _authorised(record: AskRecord, key: str, ids: Sequence[str]) -> bool:
    """Whether a submission's person, by key and authorising ids, may answer ``record``."""
    allowed = set(record.answerers)
    return not allowed or key in allowed or any(i in allowed for i in ids)


@dataclass
class _Ask:
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
    answers_key: str | None = None
    attempt: str | None = None
    fed: dict[str, str] = field(default_factory=dict)
    """The entry of each stream (by name) that delivers this ask; later duplicates are dropped."""
    seq: int = 0
    log: list[tuple[int, HistoryEvent]] = field(default_factory=list)
    noise: list[tuple[int, HistoryEvent]] = field(default_factory=list)
    noise_dropped: int = 0
    render_at: float | None = None
    render_tries: int = 0
    rendered: bool = False
    submitted: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """With ``required`` >= 2: per user id, their submission's key (canonical answers, ``T``
    first when typed: see ``subk:`` in ``keys.py``) and the attempt that recorded it."""
    reminded_at: float | None = None
    escalated: bool = False
    timer_step: str | None = None
    """The reminder or escalation claimed and not yet done (see ``timer`` in ask.lua)."""
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

    def lease_live(self, now: float) -> bool:
        return self.waiting > 0 or self.held or now < self.lease_until

    def show_in(self, interval: float, now: float) -> float | None:
        """Seconds until a sweep should show the ended ask's final state; ``None`` when there
        is nothing to show (see ``show_in`` in ask.lua)."""
        rec = self.record
        if rec.message is None or self.rendered or self.render_tries >= RENDER_TRIES:
            return None
        since = rec.answered_at or rec.closed_at or now
        since = max(since, self.render_at or 0.0)
        return since + interval - now


class _Stream:
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
        self, consumer: str, restart: bool, live: Callable[[str], _Ask | None]
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


class MemoryStore(Store):
    def __init__(
        self,
        *,
        retention: float = DEFAULT_RETENTION,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        claim_idle: float = 60.0,
        noise_cap: int = DEFAULT_NOISE_CAP,
        render_interval: float = DEFAULT_RENDER_INTERVAL,
        timer_retry: float = DEFAULT_TIMER_RETRY,
        ended_idle: float = DEFAULT_ENDED_IDLE,
    ) -> None:
        if noise_cap < 1:
            raise ValueError(f"noise_cap must be at least 1, not {noise_cap}")
        self.timer_retry = timer_retry
        self.retention = retention
        self.lease_ttl = lease_ttl
        self.claim_idle = claim_idle
        self.render_interval = render_interval
        self._noise_cap = noise_cap
        self._lock = threading.Lock()
        self._asks: dict[str, _Ask] = {}
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._timers: dict[str, float] = {}  # pending ask with follow-ups -> when to visit it
        self._feed = _Stream("feed", claim_idle, retention)
        self._ended = _Stream("ended", ended_idle, retention)

    # -- internals (call with the lock held) ---------------------------------------------------

    def _live(self, ask_id: str, now: float | None = None) -> _Ask | None:
        entry = self._asks.get(ask_id)
        if entry is not None and entry.purge_at <= (time.time() if now is None else now):
            del self._asks[ask_id]
            return None
        return entry

    def _event(
        self, entry: _Ask, kind: str, user_id: str | None, now: float, **detail: Any
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

    def _finish(self, entry: _Ask, status: AskStatus, now: float) -> None:
        rec = entry.record
        if rec.deferred:
            entry.handoff = "feed"
        elif status is AskStatus.ANSWERED:
            entry.handoff = "waiter" if entry.lease_live(now) else "feed"
        else:
            entry.handoff = "none"
        entry.record = rec.model_copy(
            update={"status": status, "deferred": rec.deferred or entry.handoff == "feed"}
        )
        if entry.handoff == "none" and rec.message is None:  # settled (``tidy`` in ask.lua)
            self._undescribe(entry)
        entry.purge_at = now + self.retention
        self._timers.pop(rec.id, None)
        if entry.handoff == "feed":
            self._enqueue(entry)
        self._ended.add(rec.id)  # under the same lock: as atomic as the ending itself
        self._wake(rec.id)

    def _expire(self, entry: _Ask, now: float) -> None:
        """End a pending ask past ``expires_at``, by a sweep or by a submission that found it."""
        entry.record = entry.record.model_copy(update={"closed_at": now})
        self._event(entry, "expired", None, now)
        self._finish(entry, AskStatus.EXPIRED, now)

    def _tidy(self, entry: _Ask) -> None:
        """Its final state is shown, or cannot be: an ask that ended with nobody to tell is
        settled, and its descriptions go (``tidy`` in ask.lua)."""
        if entry.handoff == "none":
            self._undescribe(entry)

    @staticmethod
    def _undescribe(entry: _Ask) -> None:
        """The outcome reached whoever gets it: drop the options' descriptions (``ask.lua``)."""
        rec = entry.record
        entry.record = rec.model_copy(update={"questions": rec.questions.undescribed()})

    def _enqueue(self, entry: _Ask) -> None:
        self._feed.add(entry.record.id)
        entry.handoff = "sent"
        tell_handed_to_feed(entry.record)

    def _wake(self, ask_id: str) -> None:
        for fut in self._waiters.get(ask_id, ()):
            fut.get_loop().call_soon_threadsafe(_resolve, fut)

    @staticmethod
    def _take(entry: _Ask) -> None:
        """The waiting call claims the outcome (a ``waiter`` hand-off, or one it took already)
        and holds the lease until it confirms."""
        if entry.handoff in ("waiter", "taken"):
            entry.handoff = "taken"
            entry.held = True

    def _to_feed(self, entry: _Ask, now: float) -> None:
        """Hand an answer nobody will return to the feed (see ``release``/``settle`` in ask.lua)."""
        entry.held = False
        entry.lease_until = 0.0
        entry.record = entry.record.model_copy(update={"deferred": True})
        self._event(entry, "handed_to_feed", None, now)
        self._enqueue(entry)

    # -- the contract --------------------------------------------------------------------------

    async def create(self, record: AskRecord) -> None:
        created = creation_text(record)
        with self._lock:
            existing = self._live(record.id)
            if existing is not None:
                if existing.created == created:
                    return  # a retry of this very create
                raise DuplicateAsk(f"an ask with id {record.id!r} already exists")
            now = record.created_at
            entry = _Ask(
                record=record,
                created=created,
                purge_at=max(record.expires_at, now) + self.retention,
                lease_until=0.0 if record.deferred else now + self.lease_ttl,
            )
            self._event(
                entry,
                "created",
                None,
                now,
                destination=record.destination.model_dump(mode="json"),
                answerers=list(record.answerers),
            )
            self._asks[record.id] = entry
            first = entry.next_step()
            if first is not None:
                self._timers[record.id] = first[1]

    async def get(self, ask_id: str) -> AskRecord | None:
        with self._lock:
            entry = self._live(ask_id)
            return entry.record if entry else None

    async def set_message(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        with self._lock:
            entry = self._live(ask_id)
            if entry is None:
                return None
            if entry.record.message != message:
                entry.record = entry.record.model_copy(update={"message": message})
                detail = message.model_dump(mode="json")
                self._event(entry, "posted", None, time.time(), message=detail)
            return entry.record

    async def defer(self, ask_id: str) -> AskRecord | None:
        with self._lock:
            entry = self._live(ask_id)
            if entry is None:
                return None
            if entry.record.status is AskStatus.PENDING:
                if not entry.record.deferred:
                    entry.record = entry.record.model_copy(update={"deferred": True})
                    entry.lease_until = 0.0
                    self._event(entry, "deferred", None, time.time())
            else:
                self._take(entry)
            return entry.record

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
        dumped, chosen = dump_answers(answers)
        detail: dict[str, Any] = {"name": who.name, "answers": dumped}
        with self._lock:
            now = time.time() if now is None else now
            entry = self._live(ask_id, now)
            if entry is None:
                return SubmitResult(SubmitOutcome.NOT_FOUND, None)
            rec = entry.record
            if rec.status is AskStatus.PENDING and rec.expires_at <= now:
                self._expire(entry, now)  # as a sweep would have; see ``submit`` in ask.lua
                kind = "late" if rec.may_answer(who) else "refused"
                self._event(entry, kind, who.user_id, now, **detail)
                return SubmitResult(SubmitOutcome.CLOSED, entry.record)
            if not rec.may_answer(who):
                self._event(entry, "refused", who.user_id, now, **detail)
                return SubmitResult(SubmitOutcome.NOT_ALLOWED, rec)
            if rec.status is AskStatus.ANSWERED:
                by = rec.answered_by
                by_me = by is not None and by.key == who.key
                mine = entry.submitted.get(who.key)
                if entry.answers_key == chosen and (by_me or (mine and mine[0] == chosen)):
                    same = by_me and attempt is not None and attempt == entry.attempt
                    return SubmitResult(
                        SubmitOutcome.ACCEPTED if same else SubmitOutcome.REPEATED, rec
                    )
                self._event(entry, "late", who.user_id, now, **detail)
                return SubmitResult(SubmitOutcome.ALREADY_ANSWERED, rec)
            if rec.status is not AskStatus.PENDING:
                self._event(entry, "late", who.user_id, now, **detail)
                return SubmitResult(SubmitOutcome.CLOSED, rec)
            if rec.required > 1:
                pending = self._record_submission(
                    entry, who, answers, chosen, attempt, now, detail, verified
                )
                if pending is not None:
                    return pending
                agreed = sorted(u for u, (key, _) in entry.submitted.items() if key == chosen)
                detail["agreed"] = agreed
            entry.record = entry.record.model_copy(
                update={"answers": tuple(answers), "answered_by": who, "answered_at": now}
            )
            entry.answers_key = chosen
            entry.attempt = attempt
            self._event(entry, "answered", who.user_id, now, **detail)
            self._finish(entry, AskStatus.ANSWERED, now)
            return SubmitResult(SubmitOutcome.ACCEPTED, entry.record)

    def _record_submission(
        self,
        entry: _Ask,
        who: Responder,
        answers: Sequence[Answer],
        chosen: str,
        attempt: str | None,
        now: float,
        detail: dict[str, Any],
        verified: Mapping[str, Sequence[str]] | None,
    ) -> SubmitResult | None:
        """An ask needing several people: record the person's submission (replacing theirs).
        The verdict while the ask stays pending, or ``None`` when this submission makes
        ``required`` equal untyped ones (see ``record_submission`` in ask.lua): re-checking, as
        ``verified`` allows, the authority of the others it would count (:meth:`Store.submit`)."""
        rec = entry.record
        typed = any(a.other_text is not None for a in answers)
        key = "T" + chosen if typed else chosen
        mine = entry.submitted.get(who.key)
        if mine is not None and mine[0] == key:
            same = attempt is not None and attempt == mine[1]
            return SubmitResult(SubmitOutcome.RECORDED if same else SubmitOutcome.REPEATED, rec)
        if not typed and verified is not None:
            others = [k for k, (kk, _) in entry.submitted.items() if kk == chosen and k != who.key]
            if len(others) + 1 >= rec.required:
                unverified = tuple(sorted(k for k in others if k not in verified))
                if unverified:
                    return SubmitResult(SubmitOutcome.VERIFY, rec, verify=unverified)
                for other in others:
                    if not _authorised(rec, other, verified[other]):
                        self._withdraw(entry, other, now)
                rec = entry.record
        entry.submitted[who.key] = (key, attempt)  # one per person, whichever platform
        sub = Submission(
            user_id=who.user_id, name=who.name, at=now, answers=tuple(answers), person=who.person
        )
        subs = [s for s in rec.submissions if s.key != who.key] + [sub]
        subs.sort(key=lambda s: (s.at, s.user_id))
        entry.record = rec.model_copy(update={"submissions": tuple(subs)})
        agreeing = sum(1 for k, _ in entry.submitted.values() if k == chosen)
        if typed or agreeing < rec.required:
            kind = "submitted" if mine is None else "resubmitted"  # see NOISE_KINDS
            self._event(entry, kind, who.user_id, now, **detail)
            return SubmitResult(SubmitOutcome.RECORDED, entry.record)
        return None

    def _withdraw(self, entry: _Ask, key: str, now: float) -> None:
        """The person behind submission ``key`` lost their authority: it no longer counts."""
        kept, attempt = entry.submitted[key]
        entry.submitted[key] = ("W" + kept, attempt)  # never equal to an answer: never agrees
        subs = tuple(
            s.model_copy(update={"withdrawn": True}) if s.key == key else s
            for s in entry.record.submissions
        )
        entry.record = entry.record.model_copy(update={"submissions": subs})
        user = next(s.user_id for s in subs if s.key == key)
        self._event(entry, "withdrawn", user, now, reason=NO_LONGER_ALLOWED)

    async def close(
        self, ask_id: str, status: AskStatus, *, by: str | None = None
    ) -> AskRecord | None:
        check_close_status(status)
        with self._lock:
            now = time.time()
            entry = self._live(ask_id, now)
            if entry is None:
                return None
            if entry.record.status is status:
                return entry.record  # closed so already (a retry, or a sweep came first)
            if entry.record.status is not AskStatus.PENDING:
                return None
            entry.record = entry.record.model_copy(update={"closed_at": now})
            self._event(entry, status.value, by, now)
            self._finish(entry, status, now)
            return entry.record

    async def release(self, ask_id: str) -> None:
        with self._lock:
            entry = self._live(ask_id)
            if entry is None:
                return
            entry.lease_until = 0.0
            entry.held = False
            if entry.handoff in ("waiter", "taken", "confirmed"):  # see ``release`` in ask.lua
                self._to_feed(entry, time.time())

    async def confirm(self, ask_id: str) -> None:
        with self._lock:
            entry = self._live(ask_id)
            if entry is not None and entry.handoff == "taken":
                entry.handoff = "confirmed"
                entry.held = False
                entry.lease_until = 0.0
                self._undescribe(entry)  # the call's result echoed them

    async def wait(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        entry = await self._until_ended(ask_id, timeout, holds_lease=True)
        if entry is None:
            return None
        with self._lock:
            self._take(entry)
            return entry.record

    async def observe(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        # no lease, no take: the outcome goes where it would have gone
        entry = await self._until_ended(ask_id, timeout, holds_lease=False)
        if entry is None:
            return None
        with self._lock:
            return entry.record

    async def _until_ended(
        self,
        ask_id: str,
        timeout: float,  # noqa: ASYNC109
        *,
        holds_lease: bool,
    ) -> _Ask | None:
        """Block until the ask leaves ``pending``: its entry, or ``None`` on timeout or for an
        unknown ask. ``holds_lease``: a waiting call (:meth:`wait`) keeps the ask's lease alive
        meanwhile and for a lease after; an observer (:meth:`observe`) does not."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            entry = self._live(ask_id)
            if entry is None:
                return None
            if holds_lease:
                entry.waiting += 1
            self._waiters.setdefault(ask_id, set()).add(fut)
            if entry.record.status is not AskStatus.PENDING:
                fut.set_result(None)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return None
        finally:
            with self._lock:
                group = self._waiters.get(ask_id, set())
                group.discard(fut)
                if not group:
                    self._waiters.pop(ask_id, None)
                if holds_lease:
                    entry.waiting -= 1
                    entry.lease_until = time.time() + self.lease_ttl
        return entry

    async def record_event(
        self, ask_id: str, kind: str, *, user_id: str | None = None, **detail: Any
    ) -> None:
        check_event_kind(kind)
        with self._lock:
            entry = self._live(ask_id)
            if entry is not None:
                self._event(entry, kind, user_id, time.time(), **detail)

    async def history(self, ask_id: str) -> list[HistoryEvent]:
        with self._lock:
            entry = self._live(ask_id)
            if entry is None:
                return []
            return merge_history(entry.log, entry.noise, entry.noise_dropped)

    async def list_pending(self) -> list[AskRecord]:
        with self._lock:
            now = time.time()
            found = [
                e.record
                for e in list(self._asks.values())
                if self._live(e.record.id, now) and e.record.status is AskStatus.PENDING
            ]
        return sorted(found, key=lambda r: r.created_at)

    async def count_pending(self, platform: str | None = None) -> int:
        with self._lock:
            now = time.time()
            return sum(
                1
                for e in self._asks.values()
                if e.record.status is AskStatus.PENDING
                and e.purge_at > now
                and (platform is None or e.record.destination.platform == platform)
            )

    async def sweep_batches(
        self, now: float | None = None, *, size: int = SWEEP_BATCH
    ) -> AsyncIterator[list[Ended]]:
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size}")
        now = time.time() if now is None else now
        with self._lock:
            ask_ids = list(self._asks)
        for start in range(0, len(ask_ids), size):
            shown: list[Ended] = []
            with self._lock:
                for ask_id in ask_ids[start : start + size]:
                    entry = self._live(ask_id, now)
                    if entry is None:
                        continue
                    if entry.record.status is AskStatus.PENDING:
                        if entry.record.expires_at <= now:
                            self._expire(entry, now)
                            shown.append(Ended(ask_id, entry.record.destination.platform, True))
                        continue
                    if entry.handoff in ("waiter", "taken") and not entry.lease_live(time.time()):
                        self._to_feed(entry, now)  # nobody took it, or the taker died unconfirmed
                    wait = entry.show_in(self.render_interval, now)
                    if wait is None:
                        self._tidy(entry)  # nothing (more) to show: settled
                    elif wait <= 0:
                        shown.append(Ended(ask_id, entry.record.destination.platform))
            if shown:
                yield shown

    async def claim_render(
        self,
        ask_id: str,
        *,
        now: float | None = None,
        message: MessageRef | None = None,
        unshown: bool = False,
    ) -> AskRecord | None:
        with self._lock:
            now = time.time() if now is None else now
            entry = self._live(ask_id, now)
            if entry is None or entry.record.status is AskStatus.PENDING:
                return None
            if unshown and entry.rendered:
                return None
            if entry.record.message is None and message is not None:  # see ``claim`` in ask.lua
                entry.record = entry.record.model_copy(update={"message": message})
                detail = message.model_dump(mode="json")
                self._event(entry, "posted", None, time.time(), message=detail)
            last = entry.render_at
            if entry.record.message is None or (
                last is not None and now - last < self.render_interval
            ):
                return None
            entry.render_at = now
            entry.render_tries += 1
            return entry.record

    async def mark_rendered(self, ask_id: str) -> None:
        with self._lock:
            entry = self._live(ask_id)
            if entry is not None and entry.record.status is not AskStatus.PENDING:
                if not entry.rendered:
                    entry.rendered = True
                    self._event(entry, "rendered", None, time.time())
                    self._tidy(entry)

    async def claim_timers(self, now: float | None = None) -> list[TimerClaim]:
        claims: list[TimerClaim] = []
        with self._lock:
            now = time.time() if now is None else now
            for ask_id, due in list(self._timers.items()):
                if due > now:
                    continue
                entry = self._live(ask_id, now)
                if entry is None or entry.record.status is not AskStatus.PENDING:
                    del self._timers[ask_id]
                    continue
                later, claim = self._claim_step(entry, now)
                if later is None:
                    del self._timers[ask_id]
                else:
                    self._timers[ask_id] = later
                if claim is not None:
                    claims.append(claim)
        return claims

    def _claim_step(self, entry: _Ask, now: float) -> tuple[float | None, TimerClaim | None]:
        """When to visit the ask again (``None``: never), and the step claimed now, if any
        (see ``timer`` in ask.lua)."""
        rec = entry.record
        if rec.expires_at <= now:
            return None, None  # the sweep expires it
        unposted = rec.message is None
        found = entry.next_step(unposted=unposted)
        if found is not None and found[1] >= rec.expires_at:
            found = None
        if unposted and entry.next_step() is not None:
            again = now + self.timer_retry  # follow-ups wait for the post: look again then
            if found is None or found[1] > again:
                return again, None
        if found is None:
            return None, None
        step, at = found
        if at > now:
            return at, None
        if entry.timer_step == step:
            if now - entry.timer_at < self.timer_retry:
                return entry.timer_at + self.timer_retry, None
            if entry.timer_tries >= TIMER_TRIES:
                gave_up = parse_step(rec.id, step, rec)
                detail: dict[str, Any] = {"gave_up": True}
                if gave_up.kind == "remind":
                    detail = {"n": gave_up.n, **detail}
                self._step_done(entry, gave_up, None, now, detail)
                after = entry.next_step()
                return (now if after is None else after[1]), None
            entry.timer_tries += 1
        else:
            entry.timer_step, entry.timer_tries = step, 1
        entry.timer_at = now
        return now + self.timer_retry, parse_step(rec.id, step, rec)

    def _step_done(
        self,
        entry: _Ask,
        claim: TimerClaim,
        message: MessageRef | None,
        now: float,
        detail: dict[str, Any],
    ) -> None:
        if claim.kind == "escalate":
            entry.escalated = True
            if message is not None:
                escalations = (*entry.record.escalations, message)
                entry.record = entry.record.model_copy(update={"escalations": escalations})
            self._event(entry, "escalated", None, now, **detail)
        else:
            entry.record = entry.record.model_copy(update={"reminded": claim.n})
            entry.reminded_at = now
            self._event(entry, "reminded", None, now, **detail)
        entry.timer_step = None
        entry.timer_tries = 0

    async def timer_done(
        self, claim: TimerClaim, message: MessageRef | None = None, *, now: float | None = None
    ) -> AskRecord | None:
        with self._lock:
            now = time.time() if now is None else now
            entry = self._live(claim.ask_id, now)
            if entry is None:
                return None
            if not entry.step_finished(claim.step):
                self._step_done(entry, claim, message, now, timer_detail(claim, message))
                if entry.record.status is not AskStatus.PENDING and message is not None:
                    entry.rendered = False  # the new message is still to be shown as ended
                    entry.render_tries = 0
            if entry.record.status is AskStatus.PENDING:
                after = entry.next_step()
                if after is None:
                    self._timers.pop(claim.ask_id, None)
                else:
                    self._timers[claim.ask_id] = after[1]
            return entry.record

    # -- the feeds -----------------------------------------------------------------------------

    async def _read(self, stream: _Stream, consumer: str) -> AsyncIterator[Delivery]:
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
                self._undescribe(entry)  # its reader has the outcome (see ``acked`` in ask.lua)

    def ended(self, consumer: str) -> AsyncIterator[Delivery]:
        return self._read(self._ended, consumer)

    async def ack_ended(self, delivery: Delivery) -> None:
        with self._lock:
            self._ended.drop(delivery.delivery_id)

    async def keep_ended(self, consumer: str, deliveries: Sequence[Delivery]) -> None:
        with self._lock:
            self._ended.keep(consumer, [d.delivery_id for d in deliveries])

    async def aclose(self) -> None:
        """Stop keeping taken answers' leases alive, as a process that dies would: each lapses
        one lease term from now, and a sweep then hands its answer to the feed."""
        with self._lock:
            until = time.time() + self.lease_ttl
            for entry in self._asks.values():
                if entry.held:
                    entry.held = False
                    entry.lease_until = until


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
