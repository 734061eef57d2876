"""The store's reminders and escalation (``claim_timers``/``timer_done``), over every backend:
each step claimed by one replica, re-claimable only once its claimant failed to mark it done,
logged once, and gone once the ask ends."""

from __future__ import annotations

import asyncio
import time

from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, Destination, FollowUps, MessageRef, Responder
from bridge.store.base import Store
from bridge.store.terms import TIMER_TRIES
from tests.support.engine_fixtures import StoreFactory, new_record

ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)
FIRST = MessageRef(platform="memory", channel="C1", message_id="1")
SECOND = MessageRef(platform="memory", channel="C9", message_id="2")
MANAGERS = Destination(platform="memory", channel="C9")


def with_follow_ups(**options: object) -> AskRecord:
    return new_record().model_copy(update={"follow_ups": FollowUps.model_validate(options)})


async def posted(store: Store, **options: object) -> AskRecord:
    rec = with_follow_ups(**options)
    await store.create(rec)
    await store.set_message(rec.id, FIRST)
    return rec


async def test_a_reminder_is_claimed_once_then_the_next_follows_the_last(
    make_store: StoreFactory,
) -> None:
    a, b = await make_store(timer_retry=30), await make_store(timer_retry=30)
    rec = await posted(a, remind_after=100, remind_times=2)
    assert await a.claim_timers(rec.created_at + 99) == []  # not due yet
    due = rec.created_at + 101
    claims = [*await a.claim_timers(due), *await b.claim_timers(due)]
    assert [(c.kind, c.n, c.ask_id) for c in claims] == [("remind", 1, rec.id)]
    assert claims[0].record.message == FIRST and claims[0].record.status is AskStatus.PENDING
    assert await b.claim_timers(due + 29) == []  # its claimant is at work
    done = await b.timer_done(claims[0])
    assert done is not None and done.reminded == 1
    assert await a.timer_done(claims[0]) is not None  # a retry logs nothing more
    marked = time.time()
    assert await a.claim_timers(marked + 99) == []  # the next is due 100 s after this one
    (second,) = await b.claim_timers(marked + 101)
    assert (second.kind, second.n) == ("remind", 2)
    await a.timer_done(second)
    assert await a.claim_timers(marked + 10_000) == []  # remind_times reached
    trail = [(e.kind, e.detail) for e in await a.history(rec.id) if e.kind == "reminded"]
    assert trail == [("reminded", {"n": 1}), ("reminded", {"n": 2})]
    assert (await b.get(rec.id)).reminded == 2  # type: ignore[union-attr]


async def test_many_replicas_claim_each_step_exactly_once(make_store: StoreFactory) -> None:
    stores = [await make_store(timer_retry=30) for _ in range(4)]
    recs = [await posted(stores[0], remind_after=10, escalate_after=10, escalate_to=MANAGERS)]
    recs += [await posted(stores[0], remind_after=10) for _ in range(5)]
    due = max(r.created_at for r in recs) + 11
    rounds = await asyncio.gather(*(s.claim_timers(due) for s in stores for _ in range(3)))
    claims = [c for found in rounds for c in found]
    # one step per ask per claim: the escalation (tied with the reminder) comes first
    assert sorted((c.ask_id, c.step) for c in claims) == sorted(
        [(recs[0].id, "escalate"), *((r.id, "remind:1") for r in recs[1:])]
    )


async def test_a_claim_never_marked_done_is_claimed_again_after_the_interval(
    make_store: StoreFactory,
) -> None:
    a, b = await make_store(timer_retry=30), await make_store(timer_retry=30)
    rec = await posted(a, remind_after=100)
    due = rec.created_at + 101
    (lost,) = await a.claim_timers(due)  # its process dies before posting or marking
    assert await b.claim_timers(due + 29) == []
    (again,) = await b.claim_timers(due + 31)
    assert (again.kind, again.n) == (lost.kind, lost.n) == ("remind", 1)
    await b.timer_done(again)
    await a.timer_done(lost)  # a late mark of the same step changes nothing
    kinds = [e.kind for e in await a.history(rec.id)]
    assert kinds.count("reminded") == 1


async def test_a_step_every_claim_failed_is_given_up(store: Store) -> None:
    rec = await posted(store, remind_after=100, remind_times=2)
    at = rec.created_at + 101
    for _ in range(TIMER_TRIES):
        assert [c.n for c in await store.claim_timers(at)] == [1]
        at += 61  # the default timer-retry interval is 60 s
    assert await store.claim_timers(at) == []  # given up: the next waits remind_after again
    (gave_up,) = [e for e in await store.history(rec.id) if e.kind == "reminded"]
    assert gave_up.detail == {"n": 1, "gave_up": True}
    assert [c.n for c in await store.claim_timers(at + 101)] == [2]


async def test_an_escalation_is_recorded_as_a_second_message(store: Store) -> None:
    rec = await posted(store, escalate_after=1800, escalate_to=MANAGERS)
    (claim,) = await store.claim_timers(rec.created_at + 1801)
    assert claim.kind == "escalate" and claim.record.follow_ups is not None
    assert claim.record.follow_ups.escalate_to == MANAGERS
    done = await store.timer_done(claim, SECOND)
    assert done is not None and done.message == FIRST and done.escalations == (SECOND,)
    assert done.messages == (FIRST, SECOND)
    assert await store.timer_done(claim, SECOND) == done  # a retry: recorded once
    assert (await store.get(rec.id)).messages == (FIRST, SECOND)  # type: ignore[union-attr]
    (event,) = [e for e in await store.history(rec.id) if e.kind == "escalated"]
    assert event.detail == {
        "to": MANAGERS.model_dump(mode="json"),
        "message": SECOND.model_dump(mode="json"),
    }
    assert await store.claim_timers(rec.created_at + 100_000) == []
    answered = await store.submit(rec.id, ALICE, YES)
    assert answered.record is not None and answered.record.escalations == (SECOND,)


async def test_reminders_and_the_escalation_wait_for_the_post(make_store: StoreFactory) -> None:
    """An ask never shown -- its post failed, or its process died before recording it -- may be
    one whose caller was told it failed: escalating it would post questions the agent gave up
    on. Nothing follows it until its post is recorded; then the steps come as due."""
    store = await make_store(timer_retry=30)
    rec = with_follow_ups(remind_after=10, remind_times=1, escalate_after=20, escalate_to=MANAGERS)
    await store.create(rec)  # not posted yet (or its poster died, or its caller failed)
    assert await store.claim_timers(rec.created_at + 11) == []
    assert await store.claim_timers(rec.created_at + 21) == []  # the escalation waits too
    assert await store.claim_timers(rec.created_at + 1000) == []
    assert "escalated" not in {e.kind for e in await store.history(rec.id)}
    await store.set_message(rec.id, FIRST)
    (claim,) = await store.claim_timers(rec.created_at + 1031)  # looked at again 30 s on
    assert (claim.kind, claim.n) == ("remind", 1)
    await store.timer_done(claim)
    assert [c.kind for c in await store.claim_timers(rec.created_at + 1062)] == ["escalate"]


async def test_an_ended_ask_has_no_timers(store: Store) -> None:
    answered = await posted(store, remind_after=10)
    closed = await posted(store, remind_after=10, escalate_after=10, escalate_to=MANAGERS)
    expiring = await posted(store, remind_after=10)
    await store.submit(answered.id, ALICE, YES)
    await store.close(closed.id, AskStatus.CANCELLED)
    await store.sweep(expiring.expires_at + 1)
    assert await store.claim_timers(time.time() + 10_000) == []
    for rec in (answered, closed, expiring):
        kinds = {e.kind for e in await store.history(rec.id)}
        assert not kinds & {"reminded", "escalated"}


async def test_nothing_is_due_at_or_after_the_expiry(store: Store) -> None:
    rec = await posted(store, escalate_after=3600, escalate_to=MANAGERS)  # expires in 3600 s
    assert await store.claim_timers(rec.created_at + 3599.5) == []
    assert await store.claim_timers(rec.created_at + 3600.5) == []
    assert "escalated" not in {e.kind for e in await store.history(rec.id)}


async def test_an_escalation_posted_as_the_ask_ended_is_shown_ended_too(
    make_store: StoreFactory,
) -> None:
    store = await make_store(render_interval=10)
    rec = await posted(store, escalate_after=60, escalate_to=MANAGERS)
    (claim,) = await store.claim_timers(rec.created_at + 61)
    closed = await store.close(rec.id, AskStatus.CANCELLED)  # while the escalation was posted
    assert closed is not None and closed.messages == (FIRST,)
    assert await store.claim_render(rec.id) is not None
    await store.mark_rendered(rec.id)  # the first message shows it ended
    done = await store.timer_done(claim, SECOND)
    assert done is not None and done.status is AskStatus.CANCELLED
    assert done.messages == (FIRST, SECOND)
    swept = await store.sweep(time.time() + 11)  # so a sweep shows it again, on both
    assert [(r.id, r.messages) for r in swept] == [(rec.id, (FIRST, SECOND))]
    late = await store.claim_render(rec.id, now=time.time() + 22, known=closed)
    assert late is not None and late.messages == (FIRST, SECOND)  # the held record learns both
