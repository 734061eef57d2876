"""``RedisStore``: pending asks in Redis, shared by replicas (:mod:`bridge.store.redis` says how
they stay correct). This module holds the operations on one ask; its bases hold the rest, by
concern: connections and script calls (:mod:`.connected`), the global indexes (:mod:`.indexes`),
listing (:mod:`.listing`), sweeping (:mod:`.sweeping`), follow-ups (:mod:`.timers`) and the
streams (:mod:`.streams`)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from bridge.followups import next_step
from bridge.models import Answer, holds_typed
from bridge.record import AskRecord, AskStatus, MessageRef
from bridge.store.ask_terms import AskTerms, Judged
from bridge.store.base import Store
from bridge.store.keys import Fields, pending_member
from bridge.store.redis import codec
from bridge.store.redis.connected import INDEX_TTL
from bridge.store.redis.faults import REDIS_ERRORS, gave_up, guarded, reraise
from bridge.store.redis.listing import Listing
from bridge.store.redis.scripts import (
    Close,
    Confirm,
    Create,
    Defer,
    Event,
    Message,
    Release,
    Submit,
    Take,
    posted,
    rechecked_arg,
)
from bridge.store.redis.streams import Streams
from bridge.store.redis.sweeping import Sweeping
from bridge.store.redis.timers import Timers
from bridge.store.terms import (
    DuplicateAsk,
    SubmitOutcome,
    SubmitResult,
    Submitting,
    check_close_status,
    check_event_kind,
    creation_text,
    dump_answers,
    give_up_at,
)

_OUTCOMES = {
    "accepted": SubmitOutcome.ACCEPTED,
    "repeated": SubmitOutcome.REPEATED,
    "recorded": SubmitOutcome.RECORDED,
    "already_answered": SubmitOutcome.ALREADY_ANSWERED,
    "closed": SubmitOutcome.CLOSED,
    "expired": SubmitOutcome.CLOSED,  # this submission found it past expires_at and expired it
    "not_allowed": SubmitOutcome.NOT_ALLOWED,
    "invalid": SubmitOutcome.INVALID,  # a form with problems, the ask pending
    "verify": SubmitOutcome.VERIFY,
}


_READING = "a read of the ask before its submission"


class RedisStore(Listing, Sweeping, Timers, Streams):
    """The shared store. Build with :meth:`from_url` (or pass clients for tests/embedding)."""

    @guarded("create")
    async def _create(self, record: AskRecord) -> None:
        await self._init()
        member = pending_member(record.destination.platform, record.id)
        detail = json.dumps(
            {
                "destination": record.destination.model_dump(mode="json"),
                "answerers": record.answerers,
            },
            separators=(",", ":"),  # kept in the audit trail for the retention: no padding
        )
        create = Create(
            body=creation_text(record),
            expires_at=repr(record.expires_at),
            answerers=json.dumps(list(record.answerers)),
            deferred="1" if record.deferred else "0",
            ttl_ms=self._ttl_ms(record),
            lease_ms=int(self.lease_ttl * 1000),
            detail=detail,
            waker=self._wakeups.channel_for(record.id),
            required=record.required,
            pending_member=member,
            terms_channel="" if self._cluster else self.keys.terms,
        )
        first = next_step(
            record.follow_ups, record.created_at, reminded=0, reminded_at=None, escalated=False
        )
        if first is not None:  # indexed first, like ``due``: never pending yet never reminded
            await self._time({record.id: first[1]})
        # indexed first (same pipeline, in order): an ask is never pending yet unswept
        reply = await self._index_and_run(
            record.id, create, record.expires_at, now=record.created_at
        )
        if reply[0] == "exists":
            raise DuplicateAsk(f"an ask with id {record.id!r} already exists")
        if self._cluster and reply[1] == "pending":  # the script could not: other slots
            ttl = INDEX_TTL + int(self.retention)
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zadd(self.keys.pending, {member: 0})
                pipe.expire(self.keys.pending, ttl)
                pipe.zadd(self.keys.created, {record.id: record.created_at})
                pipe.expire(self.keys.created, ttl)
                await pipe.execute()

    @guarded("get")
    async def get(self, ask_id: str) -> AskRecord | None:
        await self._init()
        raw = await self._r.hgetall(self.keys.rec(ask_id))
        return codec.record(raw) if raw else None

    async def _terms(self, ask_id: str) -> AskTerms | None:
        """One field read (the body holds every field fixed at creation: :mod:`.codec`), within
        the caller's deadline (:func:`~bridge.store.terms.giving_up_after`). It comes before
        the submission's script, so when it fails nothing was saved, nor will be."""
        await self._init()
        deadline = asyncio.timeout_at(give_up_at())
        try:
            async with deadline:
                body = await self._r.hget(self.keys.rec(ask_id), Fields.BODY)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise gave_up(_READING, maybe_saved=False) from None
        except REDIS_ERRORS as exc:
            reraise(_READING, exc, maybe_saved=False)
        return AskTerms.parsed(body) if body else None

    @guarded("set_message")
    async def set_message(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        raw = await self._set_message(ask_id, message, brief=False)
        return codec.record(raw) if raw is not None else None

    @guarded("message_posted")
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
        call = Message(*posted(message), "1" if brief else "0")
        # Indexed with the script (NX: an indexed ask keeps its score): an ask that ended, and
        # left the index, before its message was known must be shown -- by a sweep if need be.
        mark = time.time() + self.render_interval
        reply = await self._index_and_run(ask_id, call, mark, nx=True)
        if reply[0] != "ok":
            await self._r.zrem(self.keys.due, ask_id)
            return None
        if len(reply) == 1:  # brief, and pending
            return {Fields.STATUS: "pending"}
        return codec.pairs(reply[1])

    @guarded("defer")
    async def defer(self, ask_id: str) -> AskRecord | None:
        await self._init()
        reply = await self._run(ask_id, Defer(int(self.lease_ttl * 1000)))
        if reply[0] == "missing":
            return None
        if reply[0] == "taken":
            self._wakeups.hold(ask_id)
        return codec.record(codec.pairs(reply[1]))

    @guarded("confirm")
    async def confirm(self, ask_id: str) -> None:
        self._wakeups.release(ask_id)  # first: should the script fail, the lease lapses (feed)
        await self._init()
        reply = await self._run(ask_id, Confirm())
        if reply[0] == "ok" and reply[1] == "1":
            await self._r.zrem(self.keys.due, ask_id)

    # Each way of answering names itself in its errors, the read of its ask's terms included.
    submit = guarded("submit")(Store.submit)
    pick = guarded("pick")(Store.pick)
    submit_form = guarded("submit_form")(Store.submit_form)

    async def _submit(
        self, ask_id: str, by: Submitting, answers: Sequence[Answer], judged: Judged
    ) -> SubmitResult:
        """One script (``submit.lua``) records the answers the caller built. Indexed with the
        script, sent with the verdict: should this process die right after the script accepts, a
        sweeper still visits the ask soon and finishes the hand-off (XX: only indexed asks)."""
        await self._init()
        dumped, chosen = dump_answers(answers)
        submit = Submit(
            key=by.who.key,  # one submission per person (bridge.identities), else per user
            may="1" if judged.may else "0",
            responder=by.who.model_dump_json(),
            user=json.dumps(by.who.user_id),
            attempt=by.attempt,  # in the script's arguments: redis-py's re-send carries it
            rechecked=rechecked_arg(judged.others),
            answers=chosen,
            detail=_detail(by.who.name, dumped),
            typed="1" if holds_typed(answers) else "0",
            invalid="1" if judged.problems else "0",
            show=repr(self.render_interval) if by.claim else "",
        )
        mark = by.now + self.lease_ttl
        reply = await self._index_and_run(ask_id, submit, mark, now=by.now, xx=True)
        return await self._judged(ask_id, reply, judged)

    async def _judged(self, ask_id: str, reply: list[Any], judged: Judged) -> SubmitResult:
        """A submission's verdict (an ``INVALID`` form's with the problems ``judged`` found),
        after finishing what the script left to this process; its record is built only if the
        caller reads it (see :class:`SubmitResult`)."""
        if reply[0] == "missing":
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        raw = codec.pairs(reply[1])
        verify = tuple(json.loads(reply[2])) if reply[0] == "verify" else ()
        problems = judged.problems if reply[0] == "invalid" else None
        claimed = len(reply) == 3 and reply[2] == "claimed"
        result = SubmitResult(
            _OUTCOMES[reply[0]],
            None,
            problems,
            build=lambda: codec.record(raw),
            verify=verify,
            claimed=claimed,
        )
        if reply[0] in ("accepted", "expired"):  # this submission ended it
            if self._cluster:
                record = result.record
                assert record is not None  # built from the reply's record hash
                await self._unpend(record)
            await self._ended(ask_id, raw)
        return result

    @guarded("close")
    async def close(
        self, ask_id: str, status: AskStatus, *, by: str | None = None
    ) -> AskRecord | None:
        await self._init()
        check_close_status(status)
        call = Close(status.value, json.dumps(by))
        # Rescored with the script (XX: only indexed asks): the closer shows the final state;
        # should it not, the sweeper does once the render interval has passed.
        mark = time.time() + self.render_interval
        reply = await self._index_and_run(ask_id, call, mark, xx=True)
        if reply[0] != "closed":
            return None
        raw = codec.pairs(reply[1])
        record = codec.record(raw)
        await self._unpend(record)
        await self._ended(ask_id, raw)
        return record

    @guarded("release")
    async def release(self, ask_id: str) -> None:
        self._wakeups.release(ask_id)
        await self._init()
        # Indexed with the script (a take may have unindexed it): should this cleanup be cut
        # short after the script moved the answer to ``feed``, a sweeper still puts it there.
        mark = time.time() + self.lease_ttl
        reply = await self._index_and_run(ask_id, Release(), mark)
        if reply[0] == "feed":
            await self._to_feed(ask_id)

    @guarded("record_event")
    async def record_event(
        self, ask_id: str, kind: str, *, user_id: str | None = None, **detail: Any
    ) -> None:
        await self._init()
        check_event_kind(kind)
        await self._run(ask_id, Event(kind, json.dumps(user_id), json.dumps(detail)))

    @guarded("observe")
    async def observe(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Like :meth:`wait`, woken by the same subscription, but reads the record instead of
        taking the outcome, and holds no lease."""
        deadline = await self._hearing(timeout)
        while True:
            woken, _ = await self._woken(ask_id, deadline, observe=True)
            if not woken:
                return None
            raw = await self._r.hgetall(self.keys.rec(ask_id))
            if not raw:
                await self._check_epoch()  # gone before its retention: was the data lost?
                return None
            record = codec.record(raw)
            if record.status is not AskStatus.PENDING:
                return record

    async def _hearing(self, seconds: float) -> float:
        """Start hearing wake-ups (as :meth:`listening`, without waiting for it); the event
        loop's time ``seconds`` from now: a waiting call's deadline."""
        await self._init()
        self._wakeups.start()
        return asyncio.get_running_loop().time() + seconds

    async def _woken(
        self, ask_id: str, deadline: float, *, observe: bool = False
    ) -> tuple[bool, str | None]:
        """Whether the ask's next wake-up (:meth:`Wakeups.woken`) came before ``deadline`` (the
        event loop's time), and the record it carried, if any."""
        try:
            async with asyncio.timeout_at(deadline):
                await self._wakeups.subscribed()
                return True, await self._wakeups.woken(ask_id, observe=observe)
        except TimeoutError:
            return False, None

    async def wait(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Wait for the ask to leave ``pending``; take the answer if it is this waiter's.

        The record comes back with ``deferred=True`` when the answer went to the feed instead
        (this waiter's lease had lapsed); ``None`` on timeout or for an unknown ask. A taken
        answer's lease is kept alive by this store until :meth:`confirm` or :meth:`release`.
        (Not ``_guarded``: a waiting call keeps this frame for hours, one frame is enough.)
        """
        try:
            deadline = await self._hearing(timeout)
            while True:
                woken, carried = await self._woken(ask_id, deadline)
                if not woken:
                    return None
                if carried is not None:  # the wake-up carries the record: no take needed
                    raw = codec.pairs(json.loads(carried))
                    if raw.get(Fields.HANDOFF) in ("waiter", "taken"):
                        self._wakeups.hold(ask_id)  # the lease lives until this call confirms
                    return codec.record(raw)
                reply = await self._run(ask_id, Take(int(self.lease_ttl * 1000)))
                if reply[0] == "missing":
                    await self._check_epoch()  # gone before its retention: was the data lost?
                    return None
                record = codec.record(codec.pairs(reply[1]))
                if reply[0] == "taken":
                    self._wakeups.hold(ask_id)  # the lease lives until this call confirms
                if record.status is not AskStatus.PENDING:
                    return record
        except REDIS_ERRORS as exc:
            reraise("wait", exc)


def _detail(name: str | None, dumped: list[dict[str, Any]]) -> str:
    """A submission's audit-trail detail (the answers without their questions,
    :func:`~bridge.store.terms.dump_answers`) as compact JSON, each answer's keys sorted: the
    bytes the scripts that built it wrote before (and ``lib/submission.lua`` splices it into the
    stored submission)."""
    answers = json.dumps(dumped, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return f'{{"name":{json.dumps(name, ensure_ascii=False)},"answers":{answers}}}'
