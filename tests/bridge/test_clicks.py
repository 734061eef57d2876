"""The one click entry point (:meth:`bridge.clicks.Clicks.handle`) through a recording Responder.

The platforms' harnesses drive it through Slack's and Discord's real code paths; this suite pins
the protocol itself, for every timing a platform may ask for, over the memory store and Redis:
what is answered in time, what is acknowledged first and told later, what a form-opening click
shows, and that a malformed control id is explained without touching the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from bridge.answering import Answering, Caller, Outcome, Verdict
from bridge.clicks import Click, Clicks, Kind, Timing
from bridge.judging import Picks
from bridge.memory_poster import MemoryPoster
from bridge.record import AskRecord, AskStatus
from bridge.replies import BAD_CONTROL, MAYBE_SAVED, Replies
from bridge.store.base import Store
from tests.support.engine_fixtures import new_record

REPLIES = Replies(mention=lambda who: f"<m:{who}>", text=str)
ALICE = Caller("U0ALICE", "alice")
BOB = Caller("U0BOB", "bob")


@pytest.fixture(params=["memory", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@dataclass
class Recorder:
    """A platform's Responder that writes down what it was asked to do, in order."""

    timing: Timing = Timing.JUDGE_FIRST
    budget: float | None = None
    carries_words: bool = True
    """Whether the platform's answer can carry a refusal's words (Discord's ephemeral
    response can; Slack's ack cannot, so its words are told after)."""
    did: list[tuple[str, Any]] = field(default_factory=list)
    words: list[str | None] = field(default_factory=list)
    """The words of every verdict answered or told."""
    moved: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at each step (:func:`until_done` waits on it)."""

    def _did(self, step: str, verdict: Verdict | None = None) -> None:
        self.did.append((step, verdict.outcome if verdict is not None else None))
        if verdict is not None and step in ("respond", "tell"):
            self.words.append(verdict.explain)
        self.moved.set()

    async def acknowledge(self) -> None:
        self._did("acknowledge")

    async def respond(self, verdict: Verdict) -> bool:
        self._did("respond", verdict)
        return self.carries_words

    async def tell(self, verdict: Verdict) -> None:
        self._did("tell", verdict)

    async def open_form(self, record: AskRecord) -> None:
        self.did.append(("open_form", record.id))
        self.moved.set()

    def steps(self) -> list[str]:
        return [step for step, _ in self.did]


class Held(Answering):
    """Answering whose judgements wait at ``gate``: a store slower than any budget."""

    gate: asyncio.Event

    async def _held(self, judge: Callable[[], Awaitable[Verdict]]) -> Verdict:
        await self.gate.wait()
        return await judge()

    def pick(self, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, Verdict]:  # type: ignore[override]
        return self._held(lambda: Answering.pick(self, *args, **kwargs))

    def open_form(self, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, Verdict]:  # type: ignore[override]
        return self._held(lambda: Answering.open_form(self, *args, **kwargs))

    def submit_form(self, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, Verdict]:  # type: ignore[override]
        return self._held(lambda: Answering.submit_form(self, *args, **kwargs))


async def posted(store: Store, poster: MemoryPoster, *, n: int = 1) -> AskRecord:
    record = new_record(n=n)
    await store.create(record)
    await store.set_message(record.id, await poster.post(record))
    return record


async def until_done(responder: Recorder, steps: int) -> None:
    async with asyncio.timeout(10):
        while True:
            responder.moved.clear()
            if len(responder.did) >= steps:
                return
            await responder.moved.wait()


async def test_a_click_judged_in_time_is_answered_with_its_verdict_and_shown(
    store: Store,
) -> None:
    poster = MemoryPoster()
    clicks = Clicks(Answering(store, poster, REPLIES))
    record = await posted(store, poster)
    responder = Recorder()
    await clicks.handle(Click(Kind.PICK, record.id, ALICE, 0, 1), responder)
    assert responder.did == [("respond", Outcome.ACCEPTED)]  # no ack without its verdict
    stored = await store.get(record.id)
    assert stored is not None and stored.status is AskStatus.ANSWERED  # stored before the answer
    await clicks.drain()
    (update,) = poster.updated(record.id)
    assert update.status is AskStatus.ANSWERED


async def test_a_refusal_the_answer_cannot_carry_is_told_after_it(store: Store) -> None:
    poster = MemoryPoster()
    clicks = Clicks(Answering(store, poster, REPLIES))
    record = await posted(store, poster)
    await clicks.handle(Click(Kind.PICK, record.id, ALICE, 0, 0), Recorder())
    late = Recorder(carries_words=False)
    await clicks.handle(Click(Kind.PICK, record.id, BOB, 0, 1), late)
    await clicks.drain()
    assert late.did == [("respond", Outcome.ALREADY_ANSWERED), ("tell", Outcome.ALREADY_ANSWERED)]
    assert late.words[0] and late.words[0] == late.words[1]


async def test_a_slow_store_is_acknowledged_at_once_and_told_later(store: Store) -> None:
    poster = MemoryPoster()
    record = await posted(store, poster)
    await Clicks(Answering(store, poster, REPLIES)).handle(
        Click(Kind.PICK, record.id, ALICE, 0, 0), Recorder()
    )  # Alice takes it
    answering = Held(store, poster, REPLIES)
    answering.gate = asyncio.Event()
    clicks = Clicks(answering, ack_budget=0.05)
    first = Recorder()
    handled = asyncio.create_task(clicks.handle(Click(Kind.PICK, record.id, BOB, 0, 1), first))
    await asyncio.wait_for(handled, 5)  # returns without waiting for the store
    assert first.steps() == ["acknowledge"]
    answering.gate.set()
    await until_done(first, 2)
    await clicks.drain()
    assert first.did[1] == ("tell", Outcome.ALREADY_ANSWERED)  # once the store answered
    assert first.words[-1]


async def test_a_form_opens_in_time_or_after_a_placeholder(store: Store) -> None:
    poster = MemoryPoster()
    quick = Clicks(Answering(store, poster, REPLIES))
    record = await posted(store, poster, n=2)
    now = Recorder(timing=Timing.ACK_FIRST, budget=5)
    await quick.handle(Click(Kind.FORM, record.id, ALICE), now)
    await quick.drain()
    assert now.did == [("open_form", record.id)]

    answering = Held(store, poster, REPLIES)
    answering.gate = asyncio.Event()
    slow = Clicks(answering)
    placeholder = Recorder(timing=Timing.ACK_FIRST, budget=0.05)
    await slow.handle(Click(Kind.FORM, record.id, ALICE), placeholder)
    await until_done(placeholder, 1)
    assert placeholder.steps() == ["acknowledge"]  # a loading modal, filled in later
    answering.gate.set()
    await until_done(placeholder, 2)
    await slow.drain()
    assert placeholder.did[1] == ("open_form", record.id)


async def test_an_answer_that_must_carry_its_verdict_says_maybe_saved_out_of_time(
    store: Store,
) -> None:
    poster = MemoryPoster()
    answering = Held(store, poster, REPLIES)
    answering.gate = asyncio.Event()
    clicks = Clicks(answering)
    record = await posted(store, poster, n=2)
    responder = Recorder(timing=Timing.VERDICT_ONLY, budget=0.05)
    picks = {0: Picks((0,)), 1: Picks((1,))}
    await clicks.handle(Click(Kind.SUBMIT, record.id, ALICE, picks=picks), responder)
    assert responder.did == [("respond", Outcome.UNAVAILABLE)]
    assert responder.words == [MAYBE_SAVED]  # it may have been: never "nothing was saved"
    answering.gate.set()
    await clicks.drain()
    stored = await store.get(record.id)
    assert stored is not None and stored.status is AskStatus.PENDING  # withdrawn: nothing saved


async def test_a_malformed_control_is_explained_and_changes_nothing(store: Store) -> None:
    poster = MemoryPoster()
    clicks = Clicks(Answering(store, poster, REPLIES))
    record = await posted(store, poster)
    forged = Click.control(f"askb:pick:{record.id}:0:99x", ALICE, steps=False)
    assert forged is not None and forged.kind is Kind.BAD
    responder = Recorder(carries_words=False)
    await clicks.handle(forged, responder)
    await clicks.drain()
    assert responder.did == [("respond", Outcome.INVALID), ("tell", Outcome.INVALID)]
    assert responder.words == [BAD_CONTROL, BAD_CONTROL]
    stored = await store.get(record.id)
    assert stored is not None and stored.status is AskStatus.PENDING
    assert Click.control("not-ours", ALICE, steps=False) is None
