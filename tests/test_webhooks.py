"""Outcome webhooks over the memory store and real Redis, to a loopback HTTP receiver written
here: delivered and signed, retried until a receiver that was down is up (once for the bridge, the
same idempotency key on the wire), a failing receiver delaying nobody else, replicas sharing the
work, giving up, and the settings."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from engine_fixtures import new_record, url_for
from loopback_receiver import Receiver
from procs import cli_env

from bridge.aio import stop
from bridge.asking import AskPolicy, ChatHandler
from bridge.deferred import AskUserDeferred
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, Destination, Responder
from bridge.settings import SettingsError, WebhookSettings
from bridge.store.base import Store
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from bridge.webhooks import (
    IDEMPOTENCY_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    WebhookWorker,
    verify_signature,
)

SECRET = "s3cret-" + secrets.token_hex(8)
ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)


@pytest.fixture(params=["memory", "redis"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[Callable[[], Store]]:
    """``stores()``: a store of this test's backend; Redis ones share a prefix (replicas)."""
    url = url_for(str(request.param), request)
    prefix = f"wh{secrets.token_hex(3)}"
    made: list[Store] = []
    memory = MemoryStore()

    def factory() -> Store:
        if url is None:
            return memory
        store = RedisStore.from_url(url, prefix=prefix)
        made.append(store)
        return store

    yield factory
    for store in made:
        await store.aclose()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    got = await Receiver().start()
    yield got
    await got.stop()


async def running(worker: WebhookWorker) -> asyncio.Task[None]:
    return asyncio.create_task(worker.run())


async def stopped(*tasks: asyncio.Task[None]) -> None:
    """As ``serve`` stops the worker: cancelled until it ended (one cancel can be swallowed)."""
    for task in tasks:
        await stop(task)


def worker(store: Store, url: str | None = None, **options: Any) -> WebhookWorker:
    options.setdefault("first_delay", 0.1)
    options.setdefault("max_delay", 0.4)
    return WebhookWorker(store, SECRET, url=url, **options)


async def ended(store: Store, *, notify: tuple[str, ...] = (), answer: bool = True) -> AskRecord:
    rec = new_record(deferred=True).model_copy(update={"notify": notify})
    rec = rec.model_copy(update={"context": {"pipeline": "deploy-42"}})
    await store.create(rec)
    if answer:
        await store.submit(rec.id, ALICE, YES)
    else:
        await store.close(rec.id, AskStatus.CANCELLED)
    return rec


async def hooks(store: Store, ask_id: str) -> list[dict[str, Any]]:
    return [e.detail for e in await store.history(ask_id) if e.kind == "webhook"]


async def trail_until(
    store: Store, ask_id: str, check: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """The ask's webhook events once ``check`` passes (written by the worker: polled)."""
    deadline = time.monotonic() + 20
    while not check(events := await hooks(store, ask_id)):
        assert time.monotonic() < deadline, events
        await asyncio.sleep(0.05)
    return events


async def test_delivered_signed_and_recorded(
    stores: Callable[[], Store], receiver: Receiver
) -> None:
    store = stores()
    task = await running(worker(store, receiver.url()))
    try:
        answered = await ended(store)
        cancelled = await ended(store, answer=False)
        await receiver.until(lambda: len(receiver.hits) == 2)
    finally:
        await stopped(task)
    by_id = {hit.ask_id: hit for hit in receiver.hits}
    hit = by_id[answered.id]
    payload = json.loads(hit.body)
    assert payload["status"] == "answered" and payload["context"] == {"pipeline": "deploy-42"}
    assert [(w["user_id"], w["name"]) for w in payload["answered_by"]] == [("U_ALICE", "Alice")]
    assert payload["result"]["answers"][0]["selected"] == ["Yes"]
    # our own format: the options without descriptions, whether or not the store still has them
    options = [o for q in payload["result"]["questions"] for o in q["options"]]
    assert options and all(list(o) == ["label"] for o in options)
    assert json.loads(by_id[cancelled.id].body)["status"] == "cancelled"
    timestamp, signature = hit.headers[TIMESTAMP_HEADER], hit.headers[SIGNATURE_HEADER]
    assert signature.startswith("v1=")
    assert verify_signature(SECRET, timestamp, hit.body, signature)
    assert not verify_signature(SECRET, timestamp, hit.body.replace(b"Yes", b"No!"), signature)
    assert not verify_signature("another secret", timestamp, hit.body, signature)
    assert not verify_signature(SECRET, str(int(timestamp) - 3600), hit.body, signature)
    assert not verify_signature(SECRET, timestamp, hit.body, signature, now=time.time() + 301)
    assert hit.headers[IDEMPOTENCY_HEADER] != by_id[cancelled.id].headers[IDEMPOTENCY_HEADER]
    (event,) = await hooks(store, answered.id)
    assert event["status"] == "delivered" and event["attempt"] == 1 and event["code"] == 204
    assert event["url"] == receiver.url().split("?")[0]  # no query: it may hold a token
    trail = json.dumps([e.model_dump() for e in await store.history(answered.id)])
    assert SECRET not in trail and "t0ps3cr3t" not in trail
    # acknowledged: a worker started later sends nothing again
    again = await running(worker(store, receiver.url(), consumer="later"))
    await asyncio.sleep(1.5)
    await stopped(again)
    assert len(receiver.hits) == 2


async def test_a_receiver_down_then_up_gets_it_once_for_the_bridge(
    stores: Callable[[], Store],
) -> None:
    store = stores()
    down = Receiver(flaky=1)  # not listening yet; then one 503 before it accepts
    task = await running(worker(store, down.url("flaky")))
    try:
        rec = await ended(store)
        await trail_until(store, rec.id, lambda e: len(e) >= 2)  # refused, retried
        await down.start()
        await down.until(lambda: len(down.hits) == 2)
        await trail_until(store, rec.id, lambda e: e[-1]["status"] == "delivered")
        await asyncio.sleep(1.0)  # nothing more is sent once delivered
    finally:
        await stopped(task)
        await down.stop()
    events = await hooks(store, rec.id)
    statuses = [e["status"] for e in events]
    assert statuses.count("delivered") == 1 and statuses[-1] == "delivered"
    assert set(statuses[:-1]) == {"failed"} and len(statuses) >= 3
    assert [e["attempt"] for e in events] == list(range(1, len(events) + 1))
    assert "error" in events[0] and events[-2]["code"] == 503
    assert len(down.hits) == 2  # the 503 and the delivery: at least once on the wire ...
    assert len({h.headers[IDEMPOTENCY_HEADER] for h in down.hits}) == 1  # ... one key


async def test_a_failing_receiver_delays_nobody_else(
    stores: Callable[[], Store], receiver: Receiver
) -> None:
    store = stores()
    task = await running(worker(store, max_delay=5.0))
    try:
        failing = [await ended(store, notify=(receiver.url("fail"),)) for _ in range(5)]
        both = await ended(store, notify=(receiver.url("fail"), receiver.url("ok")))
        fine = await ended(store, notify=(receiver.url("ok"),))
        t0 = time.monotonic()
        await receiver.until(lambda: len(receiver.on("ok")) == 2, within=10)
        took = time.monotonic() - t0
        await receiver.until(lambda: len(receiver.on("fail")) >= 12)  # still retried
    finally:
        await stopped(task)
    assert took < 3.0
    assert {h.ask_id for h in receiver.on("ok")} == {both.id, fine.id}
    assert {h.ask_id for h in receiver.on("fail")} >= {r.id for r in failing}


async def test_replicas_share_the_work_without_duplicates(
    stores: Callable[[], Store], receiver: Receiver
) -> None:
    a, b = stores(), stores()
    tasks = [
        await running(worker(a, receiver.url(), consumer="replica-a")),
        await running(worker(b, receiver.url(), consumer="replica-b")),
    ]
    try:
        recs = [await ended(a if i % 2 else b) for i in range(20)]
        await receiver.until(lambda: len(receiver.hits) >= 20)
        await asyncio.sleep(1.0)
    finally:
        await stopped(*tasks)
    assert sorted(h.ask_id for h in receiver.hits) == sorted(r.id for r in recs)


async def test_gives_up_after_the_limit_with_an_error_line(
    stores: Callable[[], Store], receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    store = stores()
    task = await running(worker(store, receiver.url("fail"), give_up_after=0.8))
    try:
        rec = await ended(store)
        await trail_until(store, rec.id, lambda e: any(d["status"] == "gave_up" for d in e))
        count = len(receiver.hits)
        await asyncio.sleep(1.0)
    finally:
        await stopped(task)
    assert len(receiver.hits) == count  # no more attempts
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and rec.id in errors[0].getMessage()
    assert "gave up" in errors[0].getMessage() and "t0ps3cr3t" not in errors[0].getMessage()


def test_settings_refuse_a_bad_url_or_a_url_without_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASK_BRIDGE_WEBHOOK_URL", "ftp://hooks.example/x")
    monkeypatch.setenv("ASK_BRIDGE_WEBHOOK_SECRET", "k")
    with pytest.raises(SettingsError, match="ASK_BRIDGE_WEBHOOK_URL") as bad:
        WebhookSettings()
    assert "\n" not in str(bad.value)
    monkeypatch.setenv("ASK_BRIDGE_WEBHOOK_URL", "https://hooks.example/x")
    monkeypatch.delenv("ASK_BRIDGE_WEBHOOK_SECRET")
    with pytest.raises(SettingsError, match="ASK_BRIDGE_WEBHOOK_SECRET"):
        WebhookSettings()
    monkeypatch.setenv("ASK_BRIDGE_WEBHOOK_SECRET", "k")
    assert WebhookSettings().enabled and WebhookSettings().url == "https://hooks.example/x"
    with pytest.raises(ValueError, match="webhook URL"):
        AskPolicy(notify=("javascript:alert(1)",))
    assert AskPolicy(notify=(" https://a.example/h ",)).notify == ("https://a.example/h",)


async def test_serve_with_a_bad_webhook_url_fails_in_one_line() -> None:
    env = cli_env(ASK_BRIDGE_WEBHOOK_URL="not a url", ASK_BRIDGE_WEBHOOK_SECRET="k")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "serve", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1 and out == b""
    assert err.count(b"\n") == 1 and b"ASK_BRIDGE_WEBHOOK_URL" in err, err


async def test_an_asks_own_notify_url_from_the_policy(
    stores: Callable[[], Store], receiver: Receiver
) -> None:
    """``AskPolicy.notify`` goes with the ask (a creation field), so a worker without any URL of
    its own still tells that receiver."""
    store = stores()
    destination = Destination(platform="memory", channel="C42")
    policy = AskPolicy(mode="defer", notify=(receiver.url("own"),))
    deferred = await ChatHandler(MemoryPoster(), store, destination, policy)(
        list(new_record().questions.questions), {"run": 7}
    )
    assert isinstance(deferred, AskUserDeferred) and deferred.extra is not None
    ask_id = str(deferred.extra["ask_id"])
    assert (await store.get(ask_id)).notify == (receiver.url("own"),)  # type: ignore[union-attr]
    task = await running(worker(store))
    try:
        await store.close(ask_id, AskStatus.CANCELLED)
        await receiver.until(lambda: len(receiver.hits) == 1)
    finally:
        await stopped(task)
    (hit,) = receiver.on("own")
    assert json.loads(hit.body)["context"]["run"] == 7
