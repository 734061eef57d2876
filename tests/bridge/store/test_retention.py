"""What an ended ask keeps, over every backend: its options' descriptions stay until its outcome
reached whoever gets it -- the waiting call's result and a feed delivery echo the questions whole
-- and go then (the call confirmed, the delivery was acknowledged, or, with nobody to tell, the ask
was settled: at once with no message, else once shown), while
its outcome, labels and audit trail stay; and everything that can still touch it -- a late click,
the sweeper, the outcome for the feed and webhooks, a re-render -- works on it, also on an ask
ended by a version that kept them."""

from __future__ import annotations

import asyncio
import json
import secrets
import time

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from bridge.feed import outcome_payload, render_delivery
from bridge.models import Answer, Option, QuestionSet
from bridge.record import AskRecord, AskStatus, MessageRef, Responder
from bridge.result import answers_result
from bridge.store.base import Store
from bridge.store.keys import Fields
from bridge.store.redis import RedisStore
from bridge.store.terms import Delivery, DuplicateAsk, SubmitOutcome, creation_text
from tests.support.engine_fixtures import new_record, url_for

ALICE = Responder(user_id="U_ALICE", name="Alice")
BOB = Responder(user_id="U_BOB", name="Bob")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)
MESSAGE = MessageRef(platform="memory", channel="C1", message_id="1")
TRICKY = ('Go "now" \\ ,"description":"x"}\n', "\u20ac \t, ends in \\", 'a \\"quoted\\" \\\\"')
"""Descriptions holding what the store's JSON surgery must not be fooled by: quotes, backslashes
(a closing quote after an even run of them, an escaped one after an odd run), its own key."""


def tricky_record(*, deferred: bool = False) -> AskRecord:
    """One single-select question (a click answers it) whose descriptions look like JSON, and a
    context with a ``description`` of its own (the caller's: kept)."""
    rec = new_record(deferred=deferred)
    q = rec.questions.questions[0]
    options = tuple(
        Option(label=o.label, description=d) for o, d in zip(q.options, TRICKY, strict=True)
    )
    qs = QuestionSet(questions=(q.model_copy(update={"options": options}),))
    return rec.model_copy(update={"questions": qs, "context": {"description": '"mine",'}})


def echoed(result: str) -> list[dict[str, object]]:
    """The questions a tool result (JSON text) echoes."""
    questions: list[dict[str, object]] = json.loads(result)["questions"]
    return questions


async def answered_and_shown(store: Store, rec: AskRecord) -> AskRecord:
    """Create, post, answer by a click while a call waits, return it, show it: settled. Until the
    call confirms, the answer it returns and the stored ask hold every description."""
    await store.create(rec)
    await store.set_message(rec.id, MESSAGE)
    waiting = asyncio.create_task(store.wait(rec.id, 10))
    await asyncio.sleep(0.05)
    assert (await store.pick(rec.id, ALICE, 0, 0)).outcome is SubmitOutcome.ACCEPTED
    returned = await asyncio.wait_for(waiting, 10)
    assert returned is not None and returned.questions == rec.questions
    assert returned.answers is not None
    assert echoed(answers_result(returned.questions, returned.answers)) == rec.questions.wire()
    held = await store.get(rec.id)
    assert held is not None and held.questions == rec.questions  # a slow call may still take it
    await store.confirm(rec.id)
    confirmed = await store.get(rec.id)
    assert confirmed is not None and confirmed.questions == rec.questions.undescribed()
    await store.confirm(rec.id)  # a retry changes nothing
    assert await store.get(rec.id) == confirmed
    assert await store.claim_render(rec.id) is not None
    await store.mark_rendered(rec.id)
    kept = await store.get(rec.id)
    assert kept is not None
    return kept


async def next_delivery(store: Store) -> Delivery:
    feed = store.feed("c1")
    try:
        return await asyncio.wait_for(anext(feed), 10)
    finally:
        await feed.aclose()  # type: ignore[attr-defined]


async def test_an_answered_ask_keeps_its_outcome_without_descriptions(store: Store) -> None:
    rec = tricky_record()
    kept = await answered_and_shown(store, rec)
    assert kept.questions == rec.questions.undescribed() != rec.questions
    assert [o.label for o in kept.questions.questions[0].options] == ["Yes", "No", "Later"]
    assert kept.context == rec.context and kept.destination == rec.destination
    assert kept.answers == YES and kept.answered_by == ALICE and kept.answered_at
    assert kept.status is AskStatus.ANSWERED and kept.message == MESSAGE
    # `ask-bridge wait` on it now: the outcome, its questions as kept
    assert echoed(render_delivery(kept)) == rec.questions.undescribed().wire()
    # webhooks leave the descriptions out whenever they send it
    whole = kept.model_copy(update={"questions": rec.questions})
    assert outcome_payload(kept, descriptions=False) == outcome_payload(whole, descriptions=False)
    assert "Go" not in json.dumps(outcome_payload(whole, descriptions=False))
    # late clicks are judged on the labels kept, and land in the trail
    assert (await store.pick(rec.id, ALICE, 0, 0)).outcome is SubmitOutcome.REPEATED
    late = await store.pick(rec.id, BOB, 0, 1)
    assert late.outcome is SubmitOutcome.ALREADY_ANSWERED and late.record == kept
    kinds = [e.kind for e in await store.history(rec.id)]
    assert kinds == ["created", "posted", "answered", "rendered", "late"]
    assert await store.sweep(time.time() + 7200) is not None  # nothing left for a sweeper
    assert await store.get(rec.id) == kept


async def test_a_fed_answer_keeps_its_descriptions_until_the_delivery_is_acked(
    store: Store,
) -> None:
    """Deferred, answered, shown (settled for the sweeper): the feed's delivery -- read again by
    a reader that died before its ack -- echoes the questions whole; the ack drops them."""
    rec = tricky_record(deferred=True)
    await store.create(rec)
    await store.set_message(rec.id, MESSAGE)
    assert (await store.pick(rec.id, ALICE, 0, 0)).outcome is SubmitOutcome.ACCEPTED
    assert await store.claim_render(rec.id) is not None
    await store.mark_rendered(rec.id)
    assert await store.sweep(time.time() + 7200) is not None
    first = await next_delivery(store)
    assert first.record.questions == rec.questions
    assert echoed(render_delivery(first)) == rec.questions.wire()
    again = await next_delivery(store)  # not acked: handed out again, whole
    assert again.delivery_id == first.delivery_id and again.record == first.record
    stored = await store.get(rec.id)
    assert stored is not None and stored.questions == rec.questions
    await store.ack(again)
    acked = await store.get(rec.id)
    assert acked == first.record.model_copy(update={"questions": rec.questions.undescribed()})
    await store.ack(again)  # a retry changes nothing
    assert await store.get(rec.id) == acked
    # every reader still works on it
    assert (await store.pick(rec.id, BOB, 0, 1)).outcome is SubmitOutcome.ALREADY_ANSWERED
    assert (await store.pick(rec.id, ALICE, 0, 0)).outcome is SubmitOutcome.REPEATED
    assert await store.claim_render(rec.id) is None  # shown already
    assert [e.kind for e in await store.history(rec.id)][-2:] == ["rendered", "late"]
    assert await store.sweep(time.time() + 7200) is not None
    assert await store.get(rec.id) == acked


async def test_an_ask_that_ended_unanswered_keeps_its_labels(store: Store) -> None:
    """Cancelled with nobody waiting to be told: its descriptions go once it is settled, its final
    state shown (not in the ending step itself: an expiry storm's whole store part)."""
    rec = tricky_record()
    await store.create(rec)
    await store.set_message(rec.id, MESSAGE)
    closed = await store.close(rec.id, AskStatus.CANCELLED, by="U_ADMIN")
    assert closed is not None and closed.questions == rec.questions
    shown = await store.claim_render(rec.id)  # what its final state is shown from
    assert shown == closed
    await store.mark_rendered(rec.id)  # settled
    closed = closed.model_copy(update={"questions": rec.questions.undescribed()})
    assert await store.get(rec.id) == closed
    assert (await store.submit(rec.id, BOB, YES)).outcome is SubmitOutcome.CLOSED
    result = json.loads(render_delivery(closed))
    assert result["status"] == "cancelled"
    assert result["questions"] == rec.questions.undescribed().wire()
    await store.create(rec)  # a retry of its create (its reply lost) is still recognised
    with pytest.raises(DuplicateAsk):
        await store.create(rec.model_copy(update={"expires_at": rec.expires_at + 1}))


async def test_a_deferred_ask_that_expires_keeps_its_descriptions_for_the_feed(
    store: Store,
) -> None:
    """Its expiry is fed (the deferring host is told): whole until acked."""
    rec = tricky_record(deferred=True).model_copy(update={"expires_at": time.time() + 0.2})
    await store.create(rec)
    await asyncio.sleep(0.3)
    assert await store.sweep() is not None
    delivery = await next_delivery(store)
    assert delivery.record.status is AskStatus.EXPIRED
    assert echoed(render_delivery(delivery)) == rec.questions.wire()
    await store.ack(delivery)
    acked = await store.get(rec.id)
    assert acked is not None and acked.questions == rec.questions.undescribed()


async def test_an_ask_that_ends_with_nothing_to_show_is_settled_at_once(store: Store) -> None:
    """Closed with no message to show it on, an ask has nothing left to do: nothing a pending ask
    needs stays, though no sweep visits it again."""
    rec = tricky_record()
    await store.create(rec)
    closed = await store.close(rec.id, AskStatus.EXPIRED)
    assert closed is not None and closed.questions == rec.questions.undescribed()
    assert await store.sweep(time.time() + 7200) == []
    assert await store.get(rec.id) == closed


def raw_client(kind: str, url: str) -> Redis | RedisCluster:
    if kind == "cluster":
        return RedisCluster.from_url(url.replace("+cluster", ""), decode_responses=True)
    return Redis.from_url(url, decode_responses=True)


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_the_stored_body_loses_exactly_the_descriptions(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """The body an ended ask keeps is the canonical JSON of the record without descriptions,
    whatever its texts hold: the surgery in lua/lib/core.lua (``undescribed``) cut
    nothing else."""
    url = url_for(kind, request)
    assert url is not None
    store = RedisStore.from_url(url, prefix=f"ret{secrets.token_hex(3)}")
    raw = raw_client(kind, url)
    try:
        rec = tricky_record()
        await store.create(rec)
        assert await raw.hget(store.keys.rec(rec.id), Fields.BODY) == creation_text(rec)
        await answered_and_shown(store, rec.model_copy(update={"id": rec.id + "b"}))
        kept = await raw.hget(store.keys.rec(rec.id + "b"), Fields.BODY)
        bare = rec.model_copy(update={"id": rec.id + "b", "questions": rec.questions.undescribed()})
        assert kept == creation_text(bare)
    finally:
        await store.aclose()
        await raw.aclose()


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_an_ask_ended_by_the_version_before_is_read_alike_and_settled_anew(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """A rolling upgrade: asks a version that kept every description ended keep them in Redis.
    Every reader takes them; a webhook's outcome is the same text; settling them again (the
    waiting call confirmed) drops them."""
    url = url_for(kind, request)
    assert url is not None
    store = RedisStore.from_url(url, prefix=f"old{secrets.token_hex(3)}")
    raw = raw_client(kind, url)
    try:
        rec = tricky_record()
        kept = await answered_and_shown(store, rec)
        key = store.keys.rec(rec.id)
        await raw.hset(key, Fields.BODY, creation_text(rec))  # as the version before kept it
        old = await store.get(rec.id)
        assert old == kept.model_copy(update={"questions": rec.questions})
        assert outcome_payload(old, descriptions=False) == outcome_payload(kept, descriptions=False)
        assert (await store.pick(rec.id, ALICE, 0, 0)).outcome is SubmitOutcome.REPEATED
        late = await store.pick(rec.id, BOB, 0, 1)
        assert late.outcome is SubmitOutcome.ALREADY_ANSWERED and late.record == old
        await store.mark_rendered(rec.id)  # any settling step
        assert await raw.hget(key, Fields.BODY) == creation_text(kept)
        assert await store.get(rec.id) == kept
    finally:
        await store.aclose()
        await raw.aclose()


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_an_ask_closed_before_it_was_posted_keeps_nothing_a_pending_ask_needs(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """It leaves the sweeper's index at once (nothing to show): its ending settles it."""
    url = url_for(kind, request)
    assert url is not None
    store = RedisStore.from_url(url, prefix=f"nomsg{secrets.token_hex(3)}")
    raw = raw_client(kind, url)
    try:
        rec = tricky_record()
        await store.create(rec)
        assert await raw.hget(store.keys.rec(rec.id), "exp") is not None
        assert await store.close(rec.id, AskStatus.CANCELLED) is not None
        assert await raw.zscore(store.keys.due, rec.id) is None
        assert await raw.hget(store.keys.rec(rec.id), "exp") is None
    finally:
        await store.aclose()
        await raw.aclose()
