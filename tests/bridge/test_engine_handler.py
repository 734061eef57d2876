"""The chat handler end to end with the in-memory poster: block, defer, timeouts, cancel, expiry."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time

import pytest
from redis.asyncio import Redis

from bridge.asking import AskPolicy, ChatHandler
from bridge.deferred import AskUserDeferred
from bridge.errors import NotAnswered, PostFailed, ToolRejected
from bridge.feed import render_delivery
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer, Question, QuestionSet
from bridge.poster import Poster
from bridge.record import AskRecord, AskStatus, Destination, MessageRef, Responder
from bridge.result import AskUserAnswered
from bridge.store.base import Delivery, Store, SubmitOutcome
from bridge.store.keys import Fields, Keys
from bridge.store.redis import RedisStore
from bridge.sweeper import Sweeper
from bridge.tool import AskUserTool
from tests.support.engine_fixtures import StoreFactory, new_record, questions
from tests.support.redis_server import RedisServer

DEST = Destination(platform="memory", channel="C42")
QS = list(questions(2).questions)
ALICE = Responder(user_id="U_ALICE", name="Alice")
ANSWERS = (
    Answer(question="Question number 0?", selected=("Yes",)),
    Answer(question="Question number 1?", selected=("No", "Later")),
)


async def test_block_returns_the_answers(store: Store) -> None:
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=10))
    call = asyncio.create_task(handler(QS, {"thread": "t1"}))
    posted = await poster.next_post()
    assert posted.destination == DEST and posted.context == {"thread": "t1"}
    await message_recorded(store, posted.id)
    result = await store.submit(posted.id, ALICE, ANSWERS)
    assert result.outcome is SubmitOutcome.ACCEPTED
    answered = await call
    assert isinstance(answered, AskUserAnswered) and answered.answers == ANSWERS
    assert [w.user_id for w in answered.who] == [ALICE.user_id]  # who answered, for the host
    assert answered.extra == {"ask_id": posted.id} and not answered.tell_model
    record = await store.get(posted.id)
    assert record is not None and record.message is not None  # posted and remembered
    assert poster.updated(posted.id) == []  # the submitter re-renders, not the handler
    kinds = [e.kind for e in await store.history(posted.id)]
    assert kinds == ["created", "posted", "answered"]


async def message_recorded(store: Store, ask_id: str) -> None:
    """Return once the handler has recorded where it posted the ask, as a click on the message
    would find it. A test's answer sent the moment ``post`` returned races that record (on
    Cluster it loses often: the message's ``due`` writes go before its script, round trips
    apart), and an answer that beats the record is shown by the handler, by design
    (``ChatHandler._message_posted``): a test that says who shows the answer waits for this."""
    async with asyncio.timeout(10):
        while (await store.get(ask_id)).message is None:  # type: ignore[union-attr]  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_the_model_reads_the_questions_whole_and_the_store_then_drops_descriptions(
    store: Store,
) -> None:
    """The waiting call's result echoes every option's description, as the model sent them;
    once it returned them (confirmed), the store keeps the ask without them."""
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=10))
    call = asyncio.create_task(handler.ask_outcome(QS, {}))
    posted = await poster.next_post()
    await store.submit(posted.id, ALICE, ANSWERS)
    outcome = await call
    asked = QuestionSet(questions=tuple(QS))
    assert json.loads(outcome.text)["questions"] == asked.wire()
    assert json.loads(outcome.text)["questions"][0]["options"][0]["description"]
    kept = await store.get(posted.id)
    assert kept is not None and kept.questions == asked.undescribed()


async def test_defer_mode_returns_at_once_and_answer_reaches_feed(store: Store) -> None:
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(mode="defer"))
    outcome = await handler(QS, {})
    assert isinstance(outcome, AskUserDeferred)
    assert outcome.extra is not None
    ask_id = outcome.extra["ask_id"]
    assert outcome.extra["message"]["channel"] == "C42"
    await store.submit(ask_id, ALICE, ANSWERS)
    feed = store.feed("host")
    delivery = await asyncio.wait_for(anext(feed), 10)
    await feed.aclose()  # type: ignore[attr-defined]
    assert delivery.record.id == ask_id
    result = json.loads(render_delivery(delivery))
    assert result["answers"][1]["selected"] == ["No", "Later"]
    asked = QuestionSet(questions=tuple(QS))
    assert result["questions"] == asked.wire()  # whole until acknowledged
    await store.ack(delivery)
    kept = await store.get(ask_id)
    assert kept is not None and kept.questions == asked.undescribed()


async def test_timeout_defers_and_keeps_ask_open(store: Store) -> None:
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=0.1, on_timeout="defer"))
    outcome = await handler(QS, {})
    assert isinstance(outcome, AskUserDeferred)
    ask_id = outcome.extra["ask_id"]  # type: ignore[index]
    record = await store.get(ask_id)
    assert record is not None and record.status is AskStatus.PENDING and record.deferred
    assert (await store.submit(ask_id, ALICE, ANSWERS)).outcome is SubmitOutcome.ACCEPTED
    feed = store.feed("host")
    assert (await asyncio.wait_for(anext(feed), 10)).record.id == ask_id
    await feed.aclose()  # type: ignore[attr-defined]


async def test_timeout_error_closes_shows_and_tells_model(store: Store) -> None:
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=0.1, on_timeout="error"))
    with pytest.raises(ToolRejected, match=r"nobody answered within 0\.1 seconds"):
        await handler(QS, {})
    ask_id = poster.posts[0].id
    (update,) = poster.updated(ask_id)
    assert update.status is AskStatus.EXPIRED
    late = await store.submit(ask_id, ALICE, ANSWERS)
    assert late.outcome is SubmitOutcome.CLOSED


async def test_cancelling_the_call_cancels_the_ask(store: Store) -> None:
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=30))
    call = asyncio.create_task(handler(QS, {}))
    posted = await poster.next_post()
    await asyncio.sleep(0.05)  # let the call reach its wait
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    (update,) = poster.updated(posted.id)
    assert update.status is AskStatus.CANCELLED
    assert (await store.submit(posted.id, ALICE, ANSWERS)).outcome is SubmitOutcome.CLOSED


async def test_expiry_is_swept_and_shown_once(make_store: StoreFactory) -> None:
    store = await make_store()
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(mode="defer", expires=0.2))
    outcome = await handler(QS, {})
    ask_id = outcome.extra["ask_id"]  # type: ignore[union-attr]
    sweepers = [Sweeper(store, {"memory": poster}), Sweeper(await make_store(), {"memory": poster})]
    await asyncio.sleep(0.25)  # the ask's own expiry time must pass (a clock, nothing to await)
    swept = await asyncio.gather(*(s.sweep_once() for s in sweepers))
    assert sorted(len(s) for s in swept) == [0, 1]
    (update,) = poster.updated(ask_id)
    assert update.status is AskStatus.EXPIRED
    assert (await store.submit(ask_id, ALICE, ANSWERS)).outcome is SubmitOutcome.CLOSED


async def test_post_failure_is_a_clear_tool_error(store: Store) -> None:
    poster = MemoryPoster(fail_post=RuntimeError("channel_not_found"))
    handler = ChatHandler(poster, store, DEST)
    with pytest.raises(ToolRejected, match="could not show the questions in memory"):
        await handler(QS, {})
    assert await store.list_pending() == []


async def test_answer_racing_the_timeout_is_not_lost(store: Store) -> None:
    """The answer lands after the wait gave up but before defer(): defer hands it back."""
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=0))
    record = None

    real_wait = store.wait

    async def wait_then_answer(ask_id: str, timeout: float) -> object:  # noqa: ASYNC109
        nonlocal record
        record = await store.submit(ask_id, ALICE, ANSWERS)
        return None  # as if the timeout fired just before the answer

    store.wait = wait_then_answer  # type: ignore[method-assign,assignment]
    try:
        assert (await handler(QS, {})).answers == ANSWERS  # type: ignore[union-attr]
    finally:
        store.wait = real_wait  # type: ignore[method-assign]
    assert record is not None


async def first_delivery(store: Store) -> Delivery:
    feed = store.feed("host")
    try:
        return await asyncio.wait_for(anext(feed), 10)
    finally:
        await feed.aclose()  # type: ignore[attr-defined]


async def assert_fed_once(store: Store, ask_id: str) -> None:
    """The ask's answer is on the feed, handed there once; after its ack, the feed moves on."""
    delivery = await first_delivery(store)
    assert delivery.record.id == ask_id and delivery.record.answers == ANSWERS
    assert delivery.record.deferred
    await store.ack(delivery)
    kinds = [e.kind for e in await store.history(ask_id)]
    assert kinds.count("handed_to_feed") == 1 and kinds.count("answered") == 1
    marker = new_record(deferred=True)
    await store.create(marker)
    await store.submit(marker.id, ALICE, ANSWERS[:1])
    assert (await first_delivery(store)).record.id == marker.id


async def test_cancelled_after_taking_the_answer_hands_it_to_the_feed(store: Store) -> None:
    """The race: the store's take ran (the answer is the waiter's) but the call was cancelled
    before it read the reply. Nothing reached the model, so the answer must reach the feed."""
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=30))
    real_wait = store.wait
    taken = asyncio.Event()

    async def take_then_stall(ask_id: str, timeout: float) -> object:  # noqa: ASYNC109
        got = await real_wait(ask_id, timeout)  # hand-off waiter -> taken
        assert got is not None and got.answers == ANSWERS and not got.deferred
        taken.set()
        await asyncio.Event().wait()  # the reply is "still on the wire" when the cancel lands
        raise AssertionError("unreachable")

    store.wait = take_then_stall  # type: ignore[method-assign,assignment]
    try:
        call = asyncio.create_task(handler(QS, {}))
        posted = await poster.next_post()
        await message_recorded(store, posted.id)  # else the handler shows it (see there)
        assert (await store.submit(posted.id, ALICE, ANSWERS)).outcome is SubmitOutcome.ACCEPTED
        await taken.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    finally:
        store.wait = real_wait  # type: ignore[method-assign]
    assert poster.updated(posted.id) == []  # answered: the submitter re-renders, not us
    await assert_fed_once(store, posted.id)
    assert await store.sweep() == []
    await store.release(posted.id)  # a second release (or a sweep) never feeds it again
    assert [e.kind for e in await store.history(posted.id)].count("handed_to_feed") == 1


async def test_cancelled_while_deferring_a_taken_answer_hands_it_to_the_feed(store: Store) -> None:
    """Same race on the timeout path: ``defer()`` took the answer that just landed, then the
    call was cancelled before it could return it."""
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=0))
    real_wait, real_defer = store.wait, store.defer
    taken = asyncio.Event()

    async def answer_during_timeout(ask_id: str, timeout: float) -> object:  # noqa: ASYNC109
        await store.submit(ask_id, ALICE, ANSWERS)
        return None  # as if the timeout fired just before the answer

    async def defer_then_stall(ask_id: str) -> object:
        got = await real_defer(ask_id)  # hand-off waiter -> taken
        assert got is not None and got.answers == ANSWERS and not got.deferred
        taken.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    store.wait = answer_during_timeout  # type: ignore[method-assign,assignment]
    store.defer = defer_then_stall  # type: ignore[method-assign,assignment]
    try:
        call = asyncio.create_task(handler(QS, {}))
        posted = await poster.next_post()
        await taken.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    finally:
        store.wait, store.defer = real_wait, real_defer  # type: ignore[method-assign]
    await assert_fed_once(store, posted.id)


async def test_returned_answers_never_reach_the_feed(store: Store) -> None:
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=10))
    call = asyncio.create_task(handler(QS, {}))
    posted = await poster.next_post()
    await message_recorded(store, posted.id)  # else the handler shows it (see there)
    await store.submit(posted.id, ALICE, ANSWERS)
    assert (await call).answers == ANSWERS  # type: ignore[union-attr]
    swept = await store.sweep(time.time() + 3600)  # long after any lease would lapse
    assert [r.status for r in swept] == [AskStatus.ANSWERED]  # never shown: its turn to be
    marker = new_record(deferred=True)
    await store.create(marker)
    await store.submit(marker.id, ALICE, ANSWERS[:1])
    assert (await first_delivery(store)).record.id == marker.id
    assert "handed_to_feed" not in [e.kind for e in await store.history(posted.id)]


class _ClickedAtOnce(MemoryPoster):
    """A poster on which someone answers before ``post`` even returns: the click lands before the
    handler could record where the message is, so the accepting click cannot re-render it."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store
        self.verdicts: list[SubmitOutcome] = []

    async def post(self, record: AskRecord) -> MessageRef:
        ref = await super().post(record)
        result = await self.store.submit(record.id, ALICE, ANSWERS)
        self.verdicts.append(result.outcome)
        assert result.record is not None and result.record.message is None
        return ref


async def test_an_ask_answered_before_its_message_is_known_is_still_shown(
    store: Store,
) -> None:
    poster = _ClickedAtOnce(store)
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=10))
    assert (await handler(QS, {})).answers == ANSWERS  # type: ignore[union-attr]
    assert poster.verdicts == [SubmitOutcome.ACCEPTED]
    (ask_id,) = {r.id for r in poster.posts}
    (rendered,) = poster.updated(ask_id)
    assert rendered.status is AskStatus.ANSWERED and rendered.message is not None


@pytest.mark.parametrize("recorded", [False, True], ids=["before-recording", "after-recording"])
async def test_cancelled_while_recording_the_message_closes_and_shows_it(
    store: Store, recorded: bool
) -> None:
    """The cancellation lands between the post and the wait, while recording the message
    (``message_posted``) is in flight (before or after the store took it): the ask must not stay
    pending with live controls."""
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=30))
    real_message_posted = store.message_posted
    reached = asyncio.Event()

    async def stalled_message_posted(ask_id: str, message: MessageRef) -> AskRecord | None:
        if recorded:
            await real_message_posted(ask_id, message)
        reached.set()
        await asyncio.Event().wait()  # the cancellation lands here
        raise AssertionError("unreachable")

    store.message_posted = stalled_message_posted  # type: ignore[method-assign]
    try:
        call = asyncio.create_task(handler(QS, {}))
        await reached.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    finally:
        store.message_posted = real_message_posted  # type: ignore[method-assign]
    (posted,) = poster.posts
    record = await store.get(posted.id)
    assert record is not None and record.status is AskStatus.CANCELLED
    (update,) = poster.updated(posted.id)
    assert update.status is AskStatus.CANCELLED and update.message is not None
    assert (await store.submit(posted.id, ALICE, ANSWERS)).outcome is SubmitOutcome.CLOSED


async def test_cancelled_while_creating_closes_what_the_create_stored(store: Store) -> None:
    """Ctrl-C right after the call began: the store has the ask but its reply is not read yet.
    The ask is closed as cancelled, not left pending for the sweeper to expire hours later."""
    poster = MemoryPoster()
    handler = ChatHandler(poster, store, DEST, AskPolicy(wait=30))
    real_create = store.create
    stored = asyncio.Event()
    reply = asyncio.Event()  # never set: the reply is lost to the cancellation
    made: list[str] = []

    async def slow_reply(record: AskRecord) -> None:
        await real_create(record)
        made.append(record.id)
        stored.set()
        await reply.wait()  # the reply in flight: the cancellation lands here

    store.create = slow_reply  # type: ignore[method-assign]
    try:
        call = asyncio.create_task(handler(QS, {}))
        await stored.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    finally:
        store.create = real_create  # type: ignore[method-assign]
    record = await store.get(made[0])
    assert record is not None and record.status is AskStatus.CANCELLED
    assert poster.posts == []  # never posted, so nothing to show


async def test_errors_tell_how_the_ask_ended(store: Store) -> None:
    """Callers tell "nobody answered" from a failed post by type, with the record it ended as."""
    handler = ChatHandler(MemoryPoster(), store, DEST, AskPolicy(wait=0, on_timeout="error"))
    with pytest.raises(NotAnswered) as ended:
        await handler(QS, {})
    assert ended.value.record.status is AskStatus.EXPIRED
    failing = MemoryPoster(fail_post=RuntimeError("channel_not_found"))
    with pytest.raises(PostFailed) as failed:
        await ChatHandler(failing, store, DEST)(QS, {})
    assert failed.value.record.status is AskStatus.CANCELLED
    assert failed.value.record.message is None


async def test_a_store_that_lost_the_ask_is_named_and_the_message_ended(
    standalone: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis restarted without persistence under a waiting call: the model is told why nobody
    can answer, the log names the likely cause, and the message stops offering its controls."""
    store = RedisStore.from_url(standalone.url, prefix="lostask")
    raw = Redis.from_url(standalone.url)
    try:
        poster = MemoryPoster()
        handler = ChatHandler(poster, store, DEST, AskPolicy(wait=0.5))
        call = asyncio.create_task(handler(QS, {}))
        posted = await poster.next_post()
        await asyncio.sleep(0.1)  # the call waits, holding no record of its own
        lost = [key async for key in raw.scan_iter(match="lostask:*")]
        await raw.delete(*lost)  # what a restart without persistence leaves: nothing
        with pytest.raises(NotAnswered) as raised:
            await call
        assert "store lost these questions" in raised.value.message
        assert "appendonly" in raised.value.message
        (shown,) = poster.updated(posted.id)
        assert shown.status is AskStatus.CANCELLED and shown.message is not None
        # shown as it was asked, from what the call kept for this case
        assert shown.model_dump(exclude={"status", "message"}) == posted.model_dump(
            exclude={"status", "message"}
        )
        logged = [r.getMessage() for r in caplog.records if r.name == "bridge.asking"]
        assert any("lost its data" in line and posted.id in line for line in logged)
    finally:
        await raw.aclose()
        await store.aclose()


class _IdPoster(Poster):
    """Shows nothing and keeps only the ids it posted (a platform keeps no record either)."""

    platform = "memory"

    def __init__(self) -> None:
        self.posted: asyncio.Queue[str] = asyncio.Queue()

    async def post(self, record: AskRecord) -> MessageRef:
        self.posted.put_nowait(record.id)
        return MessageRef(platform="memory", channel="C42", message_id=record.id)

    async def update(self, record: AskRecord) -> None:
        return None


def _live_questions(text: str) -> int:
    """Question models of that text alive in this process."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Question) and o.question == text)


async def test_a_waiting_tool_call_holds_no_copy_of_its_question_set(
    standalone: RedisServer,
) -> None:
    """A process may hold 100,000 waiting calls: while one waits, neither the tool nor the chat
    handler keeps the validated question set (the store hands it back with the answer), and the
    result still echoes it and the answers."""
    store = RedisStore.from_url(standalone.url, prefix="heldqs")
    try:
        poster = _IdPoster()
        tool = AskUserTool(callback=ChatHandler(poster, store, DEST, AskPolicy(wait=30)))
        text = "Which one of these shall we keep while waiting?"
        arguments = [
            {
                "question": text,
                "header": "Keep",
                "options": [
                    {"label": "Yes", "description": "keep it"},
                    {"label": "No", "description": "drop it"},
                ],
            }
        ]
        call = asyncio.create_task(tool.ainvoke(arguments))
        ask_id = await poster.posted.get()
        await store.listening()
        deadline = time.monotonic() + 20  # the call gets past set_message to its wait
        while time.monotonic() < deadline:
            if not _live_questions(text):
                break
            await asyncio.sleep(0.02)
        assert _live_questions(text) == 0
        assert not call.done()  # still waiting: nothing answered it yet
        answer = Answer(question=text, selected=("No",))
        assert (await store.submit(ask_id, ALICE, [answer])).outcome is SubmitOutcome.ACCEPTED
        outcome = await call
        assert outcome.questions.questions[0].question == text
        assert outcome.answers == (answer,)
        assert json.loads(outcome.text)["answers"][0]["selected"] == ["No"]
    finally:
        await store.aclose()


async def test_a_call_drops_its_question_set_once_posted(standalone: RedisServer) -> None:
    """A wave of calls records their messages at once: none of them holds its validated
    question set through that round trip (the memory would stay in the process), yet a call
    whose store lost the ask still shows the message ended as asked."""
    text = "Which one of these shall we drop once posted?"
    live: list[int] = []

    class Watching(RedisStore):
        async def message_posted(self, ask_id: str, message: MessageRef) -> AskRecord | None:
            live.append(_live_questions(text))
            return await super().message_posted(ask_id, message)

    store = Watching.from_url(standalone.url, prefix="postedqs")
    try:
        poster = _IdPoster()
        tool = AskUserTool(callback=ChatHandler(poster, store, DEST, AskPolicy(wait=30)))
        options = [{"label": "Yes", "description": "now"}, {"label": "No", "description": "no"}]
        call = asyncio.create_task(
            tool.ainvoke([{"question": text, "header": "Drop", "options": options}])
        )
        ask_id = await poster.posted.get()
        await store.submit(ask_id, ALICE, [Answer(question=text, selected=("Yes",))])
        outcome = await call
        assert live == [0]
        assert outcome.answers == (Answer(question=text, selected=("Yes",)),)
    finally:
        await store.aclose()


async def test_a_wake_up_carries_the_record_so_the_waiter_reads_nothing_more(
    standalone: RedisServer,
) -> None:
    """Answer to resume is the submission's one script and its PUBLISH: the waiting call returns
    the record the wake-up carries (and confirms it), with no take in between."""
    store = RedisStore.from_url(standalone.url, prefix="carried")
    clicks = RedisStore.from_url(standalone.url, prefix="carried")
    raw = Redis.from_url(standalone.url, decode_responses=True)

    async def scripts_run() -> int:
        stats = await raw.info("commandstats")
        return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))

    try:
        record = new_record()
        await store.create(record)
        await store.listening()
        registered = await scripts_run() + 1  # the waiter's one re-read (``watch``)
        waiting = asyncio.create_task(store.wait(record.id, 10))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if await scripts_run() >= registered:
                break
            await asyncio.sleep(0.02)
        before = await scripts_run()
        assert before == registered  # registered and re-read: nothing runs until the answer
        answers = [
            Answer(question=q.question, selected=(q.options[0].label,))
            for q in record.questions.questions
        ]
        assert (await clicks.submit(record.id, ALICE, answers)).ok
        done = await waiting
        assert done is not None and done.answers is not None and not done.deferred
        assert await scripts_run() - before == 1  # the submission; no take
        await store.confirm(record.id)  # returned without a take: the hand-off still settles
        assert await raw.hget(Keys("carried").rec(record.id), Fields.HANDOFF) == "confirmed"
    finally:
        await raw.aclose()
        await clicks.aclose()
        await store.aclose()


async def test_leases_outlast_renewals_that_land_late(standalone: RedisServer) -> None:
    """A process saturated for longer than a lease (here: its loop blocked) renews late; the
    lapsed lease is made anew and the next leases lengthened by that lateness, so an answer
    another process gives during a second stall as long still goes to the waiting call rather
    than to the feed."""
    store = RedisStore.from_url(standalone.url, prefix="latelease", lease_ttl=1.0)
    record = new_record()
    answers = [
        Answer(question=q.question, selected=(q.options[0].label,))
        for q in record.questions.questions
    ]

    async def click() -> None:  # another process: its own loop, its own store
        clicks = RedisStore.from_url(standalone.url, prefix="latelease")
        try:
            assert (await clicks.submit(record.id, ALICE, answers)).ok
        finally:
            await clicks.aclose()

    try:
        await store.create(record)
        await store.listening()
        waiting = asyncio.create_task(store.wait(record.id, 30))
        await asyncio.sleep(0.2)
        time.sleep(2.0)  # saturated: the renewal due meanwhile lands 2 s late  # noqa: ASYNC251
        await asyncio.sleep(0.5)  # it lands, and the next round lengthens the leases
        clicker = threading.Timer(1.2, lambda: asyncio.run(click()))
        clicker.start()
        time.sleep(1.8)  # saturated again, longer than a lease: the click lands  # noqa: ASYNC251
        await asyncio.to_thread(clicker.join)
        done = await waiting
        assert done is not None and done.answers is not None and not done.deferred
    finally:
        await store.aclose()
