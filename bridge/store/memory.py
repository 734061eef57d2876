"""``MemoryStore``: the embedded default when no ``REDIS_URL`` is set (one process, no durability).

It keeps the exact semantics of :class:`~bridge.store.redis.RedisStore` -- verdicts, hand-off to a
live waiter or the feed, leases, sweeping, retention, audit trail -- so code tested against it
behaves the same on Redis. Each operation runs under one lock with no ``await`` inside, which is
what makes it atomic (the Lua script's job in Redis); waiters on any event loop are woken safely.

It holds only its storage and those atomic steps: what a submission is (its defaults) and how a
click or form is judged from the ask's terms before it is submitted (who may answer, the form's
problems, the answers) are the base class's template methods (:class:`~bridge.store.base.Store`),
and the rules each step decides by -- when several people agree, where an outcome goes -- are
:mod:`bridge.judging`'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from bridge.judging import (
    agreed,
    agreeing,
    agreement_key,
    recheck,
    repeats_answer,
    withdrawn_key,
)
from bridge.models import Answer, holds_typed
from bridge.record import AskRecord, AskStatus, MessageRef, Submission
from bridge.store.ask_terms import AskTerms, Judged
from bridge.store.memory_state import AskState, MemoryState
from bridge.store.terms import (
    NO_LONGER_ALLOWED,
    TIMER_TRIES,
    DuplicateAsk,
    Ended,
    HistoryEvent,
    SubmitOutcome,
    SubmitResult,
    Submitting,
    TimerClaim,
    check_close_status,
    check_event_kind,
    creation_text,
    dump_answers,
    merge_history,
    parse_step,
    timer_detail,
)


class MemoryStore(MemoryState):
    """The store in this process (see the module)."""

    # -- the contract --------------------------------------------------------------------------

    async def _create(self, record: AskRecord) -> None:
        created = creation_text(record)
        with self._lock:
            existing = self._live(record.id)
            if existing is not None:
                if existing.created == created:
                    return  # a retry of this very create
                raise DuplicateAsk(f"an ask with id {record.id!r} already exists")
            now = record.created_at
            entry = AskState(
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

    async def _terms(self, ask_id: str) -> AskTerms | None:
        record = await self.get(ask_id)
        return AskTerms.of(record) if record is not None else None

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

    async def _submit(
        self, ask_id: str, by: Submitting, answers: Sequence[Answer], judged: Judged
    ) -> SubmitResult:
        dumped, chosen = dump_answers(answers)
        detail: dict[str, Any] = {"name": by.who.name, "answers": dumped}
        with self._lock:
            entry = self._live(ask_id, by.now)
            if entry is None:
                return SubmitResult(SubmitOutcome.NOT_FOUND, None)
            result = self._submitted(entry, by, answers, judged, chosen, detail)
            if by.claim and result.outcome is not SubmitOutcome.VERIFY:
                result.claimed = self._claim(entry, by.now, by.attempt)  # as lua/submit.lua
            return result

    def _submitted(
        self,
        entry: AskState,
        by: Submitting,
        answers: Sequence[Answer],
        judged: Judged,
        chosen: str,
        detail: dict[str, Any],
    ) -> SubmitResult:
        """:meth:`_submit`'s verdict on the live ``entry``, under the lock."""
        who, now, attempt = by.who, by.now, by.attempt
        rec = entry.record
        if judged.problems and rec.status is AskStatus.PENDING:
            return SubmitResult(SubmitOutcome.INVALID, rec, judged.problems)
        if rec.status is AskStatus.PENDING and rec.expires_at <= now:
            self._expire(entry, now)  # as a sweep would have (lua/lib/submission.lua)
            kind = "late" if judged.may else "refused"
            self._event(entry, kind, who.user_id, now, **detail)
            return SubmitResult(SubmitOutcome.CLOSED, entry.record)
        if not judged.may:
            self._event(entry, "refused", who.user_id, now, **detail)
            return SubmitResult(SubmitOutcome.NOT_ALLOWED, rec)
        if rec.status is AskStatus.ANSWERED:
            by_me = rec.answered_by is not None and rec.answered_by.key == who.key
            mine = entry.submitted.get(who.key)
            if repeats_answer(entry.answers_key, chosen, by_me, mine[0] if mine else None):
                same = by_me and attempt == entry.attempt  # the accepting attempt re-sent
                return SubmitResult(SubmitOutcome.ACCEPTED if same else SubmitOutcome.REPEATED, rec)
            self._event(entry, "late", who.user_id, now, **detail)
            return SubmitResult(SubmitOutcome.ALREADY_ANSWERED, rec)
        if rec.status is not AskStatus.PENDING:
            self._event(entry, "late", who.user_id, now, **detail)
            return SubmitResult(SubmitOutcome.CLOSED, rec)
        if rec.required > 1:
            pending = self._record_submission(entry, by, judged, answers, chosen, detail)
            if pending is not None:
                return pending
            detail["agreed"] = agreeing(entry.agreement(), chosen)
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
        entry: AskState,
        by: Submitting,
        judged: Judged,
        answers: Sequence[Answer],
        chosen: str,
        detail: dict[str, Any],
    ) -> SubmitResult | None:
        """An ask needing several people: record the person's submission (replacing theirs).
        The verdict while the ask stays pending, or ``None`` when this submission makes
        ``required`` equal untyped ones (``record_submission`` in
        ``bridge/store/redis/lua/lib/submission.lua``): re-checking, by the verdicts on
        ``verified`` (:attr:`Judged.others`), the authority of the others it would count
        (:meth:`Store.submit`)."""
        rec, who = entry.record, by.who
        typed = holds_typed(answers)
        key = agreement_key(chosen, typed)
        mine = entry.submitted.get(who.key)
        if mine is not None and mine[0] == key:
            same = by.attempt == mine[1]  # this very attempt re-sent keeps its verdict
            return SubmitResult(SubmitOutcome.RECORDED if same else SubmitOutcome.REPEATED, rec)
        if not typed:
            others = [k for k in agreeing(entry.agreement(), chosen) if k != who.key]
            check = recheck(others, rec.required, judged.others)
            if check.unverified:
                return SubmitResult(SubmitOutcome.VERIFY, rec, verify=check.unverified)
            for other in check.withdrawn:
                self._withdraw(entry, other, by.now)
            rec = entry.record
        entry.submitted[who.key] = (key, by.attempt)  # one per person, whichever platform
        sub = Submission(
            user_id=who.user_id, name=who.name, at=by.now, answers=tuple(answers), person=who.person
        )
        subs = [s for s in rec.submissions if s.key != who.key] + [sub]
        subs.sort(key=lambda s: (s.at, s.user_id))
        entry.record = rec.model_copy(update={"submissions": tuple(subs)})
        if not agreed(len(agreeing(entry.agreement(), chosen)), rec.required, typed):
            kind = "submitted" if mine is None else "resubmitted"  # see NOISE_KINDS
            self._event(entry, kind, who.user_id, by.now, **detail)
            return SubmitResult(SubmitOutcome.RECORDED, entry.record)
        return None

    def _withdraw(self, entry: AskState, key: str, now: float) -> None:
        """The person behind submission ``key`` lost their authority: it no longer counts."""
        kept, attempt = entry.submitted[key]
        entry.submitted[key] = (withdrawn_key(kept), attempt)  # never agrees again
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
            if entry.handoff in ("waiter", "taken", "confirmed"):  # see lua/release.lua
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
    ) -> AskState | None:
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

    async def _sweep_batches(self, now: float, size: int) -> AsyncGenerator[list[Ended]]:
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

    async def _claim_render(
        self,
        ask_id: str,
        now: float,
        message: MessageRef | None,
        unshown: bool,
        known: AskRecord | None,
    ) -> AskRecord | None:
        # ``known`` saves nothing here: the record is held built, and returned as is
        with self._lock:
            entry = self._live(ask_id, now)
            if entry is None or entry.record.status is AskStatus.PENDING:
                return None
            if unshown and entry.rendered:
                return None
            if entry.record.message is None and message is not None:  # see lua/claim.lua
                entry.record = entry.record.model_copy(update={"message": message})
                detail = message.model_dump(mode="json")
                self._event(entry, "posted", None, time.time(), message=detail)
            return entry.record if self._claim(entry, now) else None

    def _claim(self, entry: AskState, now: float, token: str | None = None) -> bool:
        """Claim the showing of the ended ask's final state at ``now`` (``lua/lib/showing.lua``):
        it ended, has a message, and nobody claimed it within the render interval -- or
        ``token``'s submission claimed it already (that attempt sent again). Under the lock."""
        last = entry.render_at
        if entry.record.status is AskStatus.PENDING or entry.record.message is None:
            return False
        if token is not None and entry.render_by == token:
            return True
        if last is not None and now - last < self.render_interval:
            return False
        entry.render_at, entry.render_by = now, token
        entry.render_tries += 1
        return True

    async def mark_rendered(self, ask_id: str, *, together: bool = False) -> None:
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

    def _claim_step(self, entry: AskState, now: float) -> tuple[float | None, TimerClaim | None]:
        """When to visit the ask again (``None``: never), and the step claimed now, if any
        (see ``bridge/store/redis/lua/timer.lua``)."""
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
        entry: AskState,
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

    async def aclose(self) -> None:
        """Stop keeping taken answers' leases alive, as a process that dies would: each lapses
        one lease term from now, and a sweep then hands its answer to the feed."""
        with self._lock:
            until = time.time() + self.lease_ttl
            for entry in self._asks.values():
                if entry.held:
                    entry.held = False
                    entry.lease_until = until
