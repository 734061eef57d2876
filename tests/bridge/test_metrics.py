"""What serve's /metrics and lifecycle log lines count: each expiry once, whoever made it (a sweep,
or a click that found the ask past its expiry), and every answer put on the answers feed logged
``handed_to_feed`` with its ask id, over the memory store and real Redis."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from prometheus_client import REGISTRY

from bridge.answering import Answering, Caller, Outcome
from bridge.asking import AskPolicy, ChatHandler
from bridge.clicks import Clicks
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, Destination, MessageRef, Responder
from bridge.replies import Replies
from bridge.result import AskUserAnswered
from bridge.sweeper import Sweeper
from tests.support.engine_fixtures import StoreFactory, new_record, questions

pytestmark = pytest.mark.parametrize("store_kind", ["memory", "redis"])
REPLIES = Replies(mention=lambda who: who, text=str)
YES = (Answer(question="Question number 0?", selected=("Yes",)),)


def expired_count() -> float:
    labels = {"platform": "memory", "status": "expired"}
    return REGISTRY.get_sample_value("ask_bridge_asks_ended_total", labels) or 0.0


def steps(caplog: pytest.LogCaptureFixture, ask_id: str) -> list[dict[str, object]]:
    found = [getattr(r, "fields", None) for r in caplog.records if r.name == "bridge.lifecycle"]
    return [f for f in found if isinstance(f, dict) and f.get("ask_id") == ask_id]


class Unreachable(MemoryPoster):
    """A platform that fails every update."""

    async def update(self, record: AskRecord) -> None:
        raise ConnectionError("the platform is unreachable")


async def posted(store_factory: StoreFactory, *, expires_in: float) -> AskRecord:
    store = await store_factory()
    record = new_record(expires_in=expires_in)
    await store.create(record)
    ref = MessageRef(platform="memory", channel="C1", message_id="1")
    done = await store.set_message(record.id, ref)
    assert done is not None
    return done


async def test_an_expiry_a_click_finds_is_counted_once(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.lifecycle")
    store, poster = await make_store(), MemoryPoster()
    record = await posted(make_store, expires_in=0.2)
    await asyncio.sleep(0.3)
    before = expired_count()
    answering = Answering(store, poster, REPLIES)
    verdict = await answering.pick(record.id, 0, 0, Caller(user_id="U_LATE"))
    assert verdict.outcome is Outcome.CLOSED  # this click expired it
    assert expired_count() == before + 1
    (line,) = [f for f in steps(caplog, record.id) if f["step"] == "expired"]
    assert line["user_id"] == "U_LATE" and line["outcome"] == "expired"

    clicks = Clicks(answering)
    clicks.show(verdict)
    await clicks.drain(5.0)
    await Sweeper(store, {"memory": poster}).sweep_once(now=time.time() + 3600)
    again = await answering.pick(record.id, 0, 0, Caller(user_id="U_LATER"))
    assert again.outcome is Outcome.CLOSED  # found it expired already: not this click's doing
    assert expired_count() == before + 1


async def test_a_sweep_counts_its_expiry_once_even_when_shown_later(
    make_store: StoreFactory,
) -> None:
    store = await make_store(render_interval=0.2)
    record = await posted(make_store, expires_in=60)
    before = expired_count()
    at = time.time() + 120
    await Sweeper(store, {"memory": Unreachable()}).sweep_once(now=at)  # expired, not shown
    assert expired_count() == before + 1
    await asyncio.sleep(0.3)  # past the render interval: the failed claim lapses
    poster = MemoryPoster()
    shown = await Sweeper(store, {"memory": poster}).sweep_once(now=at + 3600)
    assert [r.id for r in shown] == [record.id]  # a later sweep shows it ...
    assert expired_count() == before + 1  # ... without counting it again


async def test_a_sweep_without_the_platform_counts_its_expiry_all_the_same(
    make_store: StoreFactory,
) -> None:
    """A replica serving only another platform expires the ask: counted there, once; the replica
    that has its platform shows it later without counting it again."""
    store = await make_store(render_interval=0.2)
    record = await posted(make_store, expires_in=60)
    before = expired_count()
    at = time.time() + 120
    assert await Sweeper(store, {"other": MemoryPoster()}).sweep_once(now=at) == []
    assert expired_count() == before + 1
    await asyncio.sleep(0.3)
    shown = await Sweeper(store, {"memory": MemoryPoster()}).sweep_once(now=at + 3600)
    assert [r.id for r in shown] == [record.id]
    assert expired_count() == before + 1


async def test_an_answer_nobody_took_is_logged_handed_to_the_feed(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.lifecycle")
    store = await make_store(lease_ttl=0.2)
    record = new_record()
    await store.create(record)  # the creator holds the lease ... and dies without waiting
    await store.submit(record.id, Responder(user_id="U_A", name="A"), YES)
    deadline = time.monotonic() + 10
    while not any(f["step"] == "handed_to_feed" for f in steps(caplog, record.id)):
        assert time.monotonic() < deadline, "never handed to the feed"
        await Sweeper(store, {}).sweep_once()  # a TTL cannot be awaited: sweep until it lapses
        await asyncio.sleep(0.05)
    got = await store.get(record.id)
    assert got is not None and got.status is AskStatus.ANSWERED and got.deferred


async def test_the_waiting_process_logs_its_answer_to_resume_latency(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.lifecycle")
    store, poster = await make_store(), MemoryPoster()
    dest = Destination(platform="memory", channel="C42")
    labels = {"platform": "memory"}
    name = "ask_bridge_answer_to_resume_seconds_count"
    before = REGISTRY.get_sample_value(name, labels) or 0.0
    handler = ChatHandler(poster, store, dest, AskPolicy(wait=10))
    call = asyncio.create_task(handler(list(questions(1).questions), {}))
    posted_ask = await poster.next_post()
    await store.submit(posted_ask.id, Responder(user_id="U_A", name="A"), YES)
    outcome = await call
    assert isinstance(outcome, AskUserAnswered) and outcome.answers == YES
    (line,) = [f for f in steps(caplog, posted_ask.id) if f["step"] == "resumed"]
    assert isinstance(line["seconds"], float) and 0 <= line["seconds"] < 10
    assert REGISTRY.get_sample_value(name, labels) == before + 1
