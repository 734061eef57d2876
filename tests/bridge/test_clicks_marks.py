"""A click's showing marks the final state shown *together* (the store may send the mark with its
next calls: ``Store.mark_rendered``'s ``together``), and out of its turn: the turns bound the
message updates at once (``show_at_once``), and a mark waiting for company must not hold one.
Every other showing -- a sweep's, a cancel's, through ``show_final`` -- marks at once."""

from __future__ import annotations

import asyncio
import time

from bridge.answering import Answering, Caller
from bridge.clicks import Clicks
from bridge.memory_poster import MemoryPoster
from bridge.models import Option, Question, QuestionSet
from bridge.record import AskRecord, AskStatus, Destination
from bridge.replies import Replies
from bridge.showing import show_final
from bridge.store.memory import MemoryStore

REPLIES = Replies(mention=lambda who: f"<m:{who}>", text=lambda text: f"[{text}]")
ALICE = Caller("U0ALICE", "alice")


class HeldMarks(MemoryStore):
    """A store whose marks made together wait until the test lets them land; each mark is
    recorded with how it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.land = asyncio.Event()
        self.marks: list[tuple[str, bool]] = []

    async def mark_rendered(self, ask_id: str, *, together: bool = False) -> None:
        self.marks.append((ask_id, together))
        if together:
            await self.land.wait()
        await super().mark_rendered(ask_id, together=together)


class Counted(MemoryPoster):
    """Sets ``all_updated`` once ``expected`` messages were updated."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected = expected
        self.all_updated = asyncio.Event()

    async def update(self, record: AskRecord) -> None:
        await super().update(record)
        if len(self.updates) >= self.expected:
            self.all_updated.set()


def one_click_record() -> AskRecord:
    question = Question(
        question="Ship it?",
        header="Ship",
        options=(Option(label="Yes", description="Now"), Option(label="No", description="Hold")),
    )
    return AskRecord(
        questions=QuestionSet(questions=(question,)),
        destination=Destination(platform="memory", channel="C1"),
        expires_at=time.time() + 3600,
    )


async def posted(store: MemoryStore, poster: MemoryPoster) -> AskRecord:
    record = one_click_record()
    await store.create(record)
    shown = await store.set_message(record.id, await poster.post(record))
    assert shown is not None
    return shown


async def test_a_clicks_showing_gives_its_turn_back_before_its_mark_lands() -> None:
    store, poster = HeldMarks(), Counted(3)
    records = [await posted(store, poster) for _ in range(3)]
    answering = Answering(store, poster, REPLIES)
    clicks = Clicks(answering, show_at_once=1)
    for record in records:
        clicks.show(await answering.pick(record.id, 0, 0, ALICE))
    async with asyncio.timeout(5):
        await poster.all_updated.wait()  # one turn at a time, and every message updated ...
    assert {(r.id, True) for r in records} == set(store.marks)  # ... while no mark has landed
    for record in records:
        assert "rendered" not in [e.kind for e in await store.history(record.id)]
    store.land.set()
    await clicks.drain()
    for record in records:
        assert (await store.history(record.id))[-1].kind == "rendered"
        assert poster.updated(record.id)[-1].status is AskStatus.ANSWERED


async def test_a_showing_other_than_a_clicks_marks_at_once() -> None:
    store, poster = HeldMarks(), MemoryPoster()
    record = await posted(store, poster)
    await store.close(record.id, AskStatus.CANCELLED, by="ops")
    async with asyncio.timeout(5):
        shown = await show_final(store, poster, record.id)  # never waits on store.land
    assert shown is not None and store.marks == [(record.id, False)]
