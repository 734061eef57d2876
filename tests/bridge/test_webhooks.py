"""Outcome webhooks over the memory store and real Redis, to a loopback HTTP receiver written
here: delivered and signed per Standard Webhooks (checked with the ``standardwebhooks`` package),
each destination with its own secret, retried until a receiver that was down is up (once for the
bridge, one ``webhook-id`` on the wire), a failing receiver delaying nobody else and costing a
bounded trail and log, replicas sharing the work, giving up, the allow-list of notify URLs
(refused up front, and at send time before any connection: hosts resolved by a stub, never
reaching anything but loopback), and the settings."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import logging
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from pydantic import ValidationError
from standardwebhooks import Webhook, WebhookVerificationError

from bridge.aio import stop
from bridge.asking import AskPolicy, ChatHandler
from bridge.deferred import AskUserDeferred
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, Destination, Responder
from bridge.settings import SettingsError
from bridge.store.base import Delivery, Store, StoreUnavailable
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from bridge.tool import tools_interactive
from bridge.webhook_settings import DESTINATIONS_ENV, WebhookDestination, WebhookSettings
from bridge.webhooks import ID_HEADER, KEEP_LAST, PER_ORIGIN, WebhookWorker
from tests.support.engine_fixtures import new_record, url_for
from tests.support.loopback_receiver import Hit, Receiver, Trap
from tests.support.procs import cli_env

ROOT = Path(__file__).resolve().parents[2]


def whsec() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


SECRET = whsec()
"""ASK_BRIDGE_WEBHOOK_SECRET: the main URL's."""
OWN = whsec()
"""The allow-list entry's, for the asks' own notify URLs."""
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


@pytest.fixture
async def trap() -> AsyncIterator[Trap]:
    got = await Trap().start()
    yield got
    await got.stop()


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every address a socket of this process tries to connect to, refused or not (recorded
    before the suite's own guard, which fails any non-loopback one, runs)."""
    made: list[Any] = []
    guarded, guarded_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> Any:
        made.append(address)
        return guarded(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        made.append(address)
        return guarded_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield made


class StubResolver(AbstractResolver):
    """Names mapped to the addresses a hostile or careless DNS answers; every lookup noted."""

    def __init__(self, names: dict[str, list[str]]) -> None:
        self.names = names
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in self.names[host]
        ]

    async def close(self) -> None:
        pass


def allowing(receiver: Receiver, secret: str = OWN, **more: Any) -> WebhookDestination:
    """An allow-list entry covering every path of ``receiver``."""
    return WebhookDestination(prefix=f"http://127.0.0.1:{receiver.port}/", secret=secret, **more)


def allow_list(*entries: WebhookDestination) -> str:
    """``entries`` as the text of ASK_BRIDGE_WEBHOOK_DESTINATIONS."""
    return json.dumps([e.model_dump() for e in entries])


async def running(worker: WebhookWorker) -> asyncio.Task[None]:
    return asyncio.create_task(worker.run())


async def stopped(*tasks: asyncio.Task[None]) -> None:
    """As ``serve`` stops the worker: cancelled until it ended (one cancel can be swallowed)."""
    for task in tasks:
        await stop(task)


def worker(
    store: Store,
    url: str | None = None,
    *,
    destinations: tuple[WebhookDestination, ...] = (),
    **options: Any,
) -> WebhookWorker:
    options.setdefault("first_delay", 0.1)
    options.setdefault("max_delay", 0.4)
    secret = SECRET if url else None
    return WebhookWorker(store, url=url, secret=secret, destinations=destinations, **options)


async def ended(store: Store, *, notify: tuple[str, ...] = (), answer: bool = True) -> AskRecord:
    """An ask that ended, written to the store as it is (its notify URLs unchecked: an ask made
    under another allow-list, or by an older version)."""
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


def check_trail(events: list[dict[str, Any]]) -> None:
    """The trail of one (ask, URL) that ended: its first attempt, the failed ones numbered by a
    power of two, then the last, listing the last few failed attempts that have none."""
    attempts = [e["attempt"] for e in events]
    assert attempts[0] == 1 and attempts == sorted(set(attempts)), attempts
    *failed, last = events
    assert all(e["status"] == "failed" and e["attempt"] & (e["attempt"] - 1) == 0 for e in failed)
    after = failed[-1]["attempt"] + 1 if failed else 1
    missing = list(range(after, last["attempt"]))[-KEEP_LAST:]
    assert [p["attempt"] for p in last.get("previous", [])] == missing, events


def verified(secret: str, hit: Hit) -> Any:
    """The payload of ``hit`` as a Standard Webhooks receiver reads it (raises if not signed)."""
    return Webhook(secret).verify(hit.body, hit.headers)


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
    payload = verified(SECRET, hit)
    assert payload["status"] == "answered" and payload["context"] == {"pipeline": "deploy-42"}
    assert [(w["user_id"], w["name"]) for w in payload["answered_by"]] == [("U_ALICE", "Alice")]
    assert payload["result"]["answers"][0]["selected"] == ["Yes"]
    # our own format: the options without descriptions, whether or not the store still has them
    options = [o for q in payload["result"]["questions"] for o in q["options"]]
    assert options and all(list(o) == ["label"] for o in options)
    assert verified(SECRET, by_id[cancelled.id])["status"] == "cancelled"
    assert hit.headers["webhook-signature"].startswith("v1,")
    forgeries = [
        Hit(hit.path, hit.headers, hit.body.replace(b"Yes", b"No!")),  # tampered with
        Hit(hit.path, {**hit.headers, ID_HEADER: "fresh-id"}, hit.body),  # replayed, new id
        Hit(hit.path, {**hit.headers, "webhook-timestamp": str(int(time.time()) - 3600)}, hit.body),
    ]
    for forged in forgeries:
        with pytest.raises(WebhookVerificationError):
            verified(SECRET, forged)
    with pytest.raises(WebhookVerificationError):
        verified(whsec(), hit)
    assert hit.headers[ID_HEADER] != by_id[cancelled.id].headers[ID_HEADER]
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


async def test_each_destination_signs_with_its_own_secret(
    stores: Callable[[], Store], receiver: Receiver
) -> None:
    """The main URL's requests verify with ASK_BRIDGE_WEBHOOK_SECRET only, a notify URL's with
    its allow-list entry's only: no receiver holds a key that signs for another."""
    store = stores()
    other = await Receiver().start()
    entries = (allowing(receiver), allowing(other, secret=(third := whsec())))
    task = await running(worker(store, receiver.url("main"), destinations=entries))
    try:
        rec = await ended(store, notify=(receiver.url("own"), other.url("own")))
        await receiver.until(lambda: len(receiver.hits) == 2)
        await other.until(lambda: len(other.hits) == 1)
    finally:
        await stopped(task)
        await other.stop()
    (main,), (own,), (elsewhere,) = receiver.on("main"), receiver.on("own"), other.hits
    assert verified(SECRET, main)["ask_id"] == rec.id
    assert verified(OWN, own)["ask_id"] == rec.id
    assert verified(third, elsewhere)["ask_id"] == rec.id
    for hit, wrong in ((main, OWN), (own, SECRET), (own, third), (elsewhere, OWN)):
        with pytest.raises(WebhookVerificationError):
            verified(wrong, hit)


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
    check_trail(events)
    assert [e["status"] for e in events].count("delivered") == 1
    assert "error" in events[0]  # refused connection
    before = events[-1].get("previous") or [events[-2]]
    assert before[-1]["code"] == 503
    assert len(down.hits) == 2  # the 503 and the delivery: at least once on the wire ...
    assert len({h.headers[ID_HEADER] for h in down.hits}) == 1  # ... one webhook-id


class FlakyAcks(MemoryStore):
    """A store whose first ``failures`` acknowledgements fail, as an unreachable store's do."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.acked = asyncio.Event()

    async def ack_ended(self, delivery: Delivery) -> None:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("the store is down")
        await super().ack_ended(delivery)
        self.acked.set()


async def test_a_store_down_at_the_ack_is_waited_out_and_logged_once_each_way(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bridge.webhooks")
    store = FlakyAcks(failures=3)
    task = await running(worker(store, receiver.url()))
    try:
        await ended(store)
        await asyncio.wait_for(store.acked.wait(), 20)
    finally:
        await stopped(task)
    assert len(receiver.hits) == 1  # sent once; only its acknowledgement waited for the store
    said = [r.getMessage() for r in caplog.records if "webhooks: the store" in r.getMessage()]
    assert said == [
        "webhooks: the store: the store is down",
        "webhooks: the store: reachable again",
    ]


async def test_a_failing_receiver_delays_nobody_else(
    stores: Callable[[], Store], receiver: Receiver
) -> None:
    store = stores()
    task = await running(worker(store, max_delay=5.0, destinations=(allowing(receiver),)))
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


async def test_a_day_of_failures_costs_a_bounded_trail_and_log(
    stores: Callable[[], Store], receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    """Hundreds of failed attempts (a retry day, compressed) leave about ten events in the ask's
    trail and one warning line: the first attempt, the powers of two, the last with the few
    before it; the count of attempts is right throughout."""
    store = stores()
    options = {"first_delay": 0.001, "max_delay": 0.002, "give_up_after": 3.0}
    task = await running(worker(store, receiver.url("fail"), **options))
    caplog.set_level(logging.INFO, logger="bridge.webhooks")
    try:
        rec = await ended(store)
        events = await trail_until(
            store, rec.id, lambda e: bool(e) and e[-1]["status"] == "gave_up"
        )
    finally:
        await stopped(task)
    attempts = len(receiver.hits)
    assert attempts >= 100, attempts  # else the compression did not compress
    check_trail(events)
    assert events[-1]["attempt"] == attempts and events[-1]["code"] == 500
    assert len(events) <= attempts.bit_length() + 1 and len(events[-1]["previous"]) == KEEP_LAST
    trail = await store.history(rec.id)
    assert len(json.dumps([e.model_dump() for e in trail])) < 6000
    ours = [r for r in caplog.records if r.name == "bridge.webhooks"]
    lines = [r.getMessage() for r in ours if rec.id in r.getMessage()]
    warnings = [r for r in ours if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "retrying" in warnings[0].getMessage()
    assert len(lines) == 2  # that warning, and the error giving up
    assert "t0ps3cr3t" not in "".join(lines)


async def test_in_flight_requests_are_limited_per_origin_in_a_bounded_map(
    receiver: Receiver,
) -> None:
    """Twenty URLs of one origin (queries differing) share its limit of requests in flight, and
    the worker keeps nothing per URL once they are done."""
    store = MemoryStore()
    live = worker(store, destinations=(allowing(receiver),))
    task = await running(live)
    try:
        for n in range(4):
            urls = tuple(f"http://127.0.0.1:{receiver.port}/slow?run={n}-{i}" for i in range(5))
            await ended(store, notify=urls)
        await receiver.until(lambda: len(receiver.hits) == 20)
        await asyncio.sleep(0.5)
        assert live._origins.slots == {}  # nothing kept once nothing is in flight
    finally:
        await stopped(task)
    assert receiver.most == PER_ORIGIN


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


HOSTILE = [
    "http://127.0.0.1/admin",
    "http://127.0.0.1:6379/",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://0177.0.0.1/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "https://hooks.example.com.evil.test/ask/",
    "https://hooks.example.com@127.0.0.1/ask/",
    "https://hooks.example.com/ask/../admin",
    "https://hooks.example.com/ask/%2e%2e/admin",
    "https://hooks.example.com/asking",
    "http://hooks.example.com/ask/",
    "https://hooks.example.com:8443/ask/",
]


def test_notify_urls_nobody_allowed_are_refused_up_front(
    monkeypatch: pytest.MonkeyPatch, connects: list[Any]
) -> None:
    """An ask names only URLs under a prefix of the allow-list: any other (loopback, metadata,
    private, numeric host forms, look-alikes of the allowed prefix) is refused when the policy is
    made, with nothing looked up or connected to. The model never chooses one: the tool's schema
    has no such field."""
    looked_up: list[Any] = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: looked_up.append(a))
    entry = WebhookDestination(prefix="https://hooks.example.com/ask/", secret=OWN)
    monkeypatch.setenv(DESTINATIONS_ENV, allow_list(entry))
    for url in HOSTILE:
        with pytest.raises(ValidationError) as refused:
            AskPolicy(notify=(url,))
        (error,) = refused.value.errors()
        assert error["loc"] == ("notify",) and "\n" not in error["msg"], url
    allowed = "https://hooks.example.com/ask/deploy?run=7"
    assert AskPolicy(notify=(allowed,)).notify == (allowed,)
    monkeypatch.delenv(DESTINATIONS_ENV)
    with pytest.raises(ValidationError, match=DESTINATIONS_ENV):
        AskPolicy(notify=(allowed,))
    assert looked_up == [] and connects == []
    (tool,) = tools_interactive()
    schema = json.dumps(tool.parameters).lower()
    assert "notify" not in schema and "url" not in schema and "webhook" not in schema


async def test_ask_refuses_a_notify_url_nobody_allowed_in_one_line(trap: Trap) -> None:
    env = cli_env(
        SLACK_BOT_TOKEN="xoxb-test", SLACK_API_URL=f"http://127.0.0.1:{trap.port}/api/",
        **{DESTINATIONS_ENV: allow_list(WebhookDestination(
            prefix="https://hooks.example.com/ask/", secret=OWN))},
    )  # fmt: skip
    questions = json.dumps(
        [{"question": "Ship?", "header": "Ship", "multiSelect": False,
          "options": [{"label": "y", "description": "y"}, {"label": "n", "description": "n"}]}]
    )  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "ask", "--channel", "C0DEPLOY",
        "--notify", "http://169.254.169.254/latest/meta-data/", "-", env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(questions.encode()), 60)
    assert proc.returncode == 1 and out == b""
    assert err.count(b"\n") == 1 and b"--notify" in err and DESTINATIONS_ENV.encode() in err, err
    assert trap.connections == 0  # refused before anything was posted


async def test_serve_refuses_at_send_time_before_any_connection(
    receiver: Receiver, trap: Trap, connects: list[Any]
) -> None:
    """Notify URLs stored with an ask are checked again when sent: one no entry of this worker
    covers is refused; a covered one whose host resolves to a loopback, private, link-local,
    multicast, unspecified, shared or IPv4-in-IPv6 address (here by a stub resolver) is refused
    after the lookup and before any connection -- unless its entry names that network. Each is
    one ``refused`` event, never retried; a redirect is not followed."""
    names = {
        "metadata.google.internal": ["169.254.169.254"],
        "private.hooks.test": ["10.1.2.3"],
        "loop.hooks.test": ["127.0.0.1"],
        "mapped.hooks.test": ["::ffff:127.0.0.1"],
        "linklocal.hooks.test": ["fe80::1"],
        "multicast.hooks.test": ["224.0.0.251"],
        "zero.hooks.test": ["0.0.0.0"],
        "shared.hooks.test": ["100.64.0.1"],
        "sixtofour.hooks.test": ["2002:a00:1::1"],
        "mixed.hooks.test": ["93.184.216.34", "192.168.1.10"],
        "inside.hooks.test": ["127.0.0.1"],
    }
    stub = StubResolver(names)
    entries = [
        WebhookDestination(prefix=f"http://{name}:{trap.port}/", secret=OWN)
        for name in names
        if name != "inside.hooks.test"
    ]
    entries.append(
        WebhookDestination(
            prefix=f"http://inside.hooks.test:{receiver.port}/",
            secret=OWN,
            networks=("127.0.0.0/8",),
        )
    )
    receiver.moved_to = f"http://127.0.0.1:{trap.port}/"
    entries.append(allowing(receiver))
    resolved = [f"http://{name}:{trap.port}/hook" for name in names if name != "inside.hooks.test"]
    uncovered = [
        f"http://127.0.0.1:{trap.port}/admin",
        f"http://2130706433:{trap.port}/",
        "http://169.254.169.254/latest/meta-data/",
    ]
    inside = f"http://inside.hooks.test:{receiver.port}/ok"
    moved = receiver.url("moved")
    store = MemoryStore()
    urls = [*resolved, *uncovered, inside, moved]
    task = await running(worker(store, destinations=tuple(entries), resolver=stub))
    try:
        recs = [await ended(store, notify=tuple(urls[i : i + 5])) for i in range(0, len(urls), 5)]
        ask_of = {url: rec for rec in recs for url in rec.notify}
        await receiver.until(lambda: len(receiver.on("ok")) == 1 and len(receiver.on("moved")) >= 2)
        for url in [*resolved, *uncovered]:
            await trail_until(store, ask_of[url].id, refused_at(url))
        await asyncio.sleep(0.5)  # a refusal is final: no retry comes
    finally:
        await stopped(task)
    for url in [*resolved, *uncovered]:
        events = [e for e in await hooks(store, ask_of[url].id) if e["url"] == url]
        assert [(e["status"], e["attempt"]) for e in events] == [("refused", 1)], url
        assert "code" not in events[0]  # nothing was asked of it, so nothing is told of it
        why = "not a public address" if url in resolved else f"no {DESTINATIONS_ENV} entry"
        assert why in events[0]["error"], events
    assert set(stub.asked) == set(names)  # resolved first, then refused
    assert trap.connections == 0
    assert {address[:2] for address in connects} == {("127.0.0.1", receiver.port)}
    (delivered,) = [e for e in await hooks(store, ask_of[inside].id) if e["url"] == inside]
    assert delivered["status"] == "delivered" and verified(OWN, receiver.on("ok")[0])
    shown = moved.split("?")[0]
    redirected = [e for e in await hooks(store, ask_of[moved].id) if e["url"] == shown]
    assert redirected and all(e["code"] == 307 for e in redirected)


def refused_at(url: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda events: any(e["url"] == url and e["status"] == "refused" for e in events)


def test_settings_name_the_variable_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(match: str, **env: str) -> None:
        for name in ("ASK_BRIDGE_WEBHOOK_URL", "ASK_BRIDGE_WEBHOOK_SECRET", DESTINATIONS_ENV):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        with pytest.raises(SettingsError, match=match) as bad:
            WebhookSettings()
        assert "\n" not in str(bad.value) and SECRET not in str(bad.value)
        assert "hunter2" not in str(bad.value)

    url, key = "ASK_BRIDGE_WEBHOOK_URL", "ASK_BRIDGE_WEBHOOK_SECRET"
    refused(url, **{url: "ftp://hooks.example/x", key: SECRET})
    refused(key, **{url: "https://hooks.example/x"})  # a URL without its secret
    refused(key, **{key: SECRET})  # a secret without its URL: it signs nothing else
    refused(key, **{url: "https://hooks.example/x", key: "hunter2"})  # not whsec_
    refused(key, **{url: "https://hooks.example/x", key: "whsec_" + "A" * 8})  # too short
    entry = {"prefix": "https://ci.example/hooks/", "secret": OWN}
    refused(DESTINATIONS_ENV, **{DESTINATIONS_ENV: "https://ci.example/hooks/ hunter2"})
    refused(DESTINATIONS_ENV, **{DESTINATIONS_ENV: json.dumps({"prefix": "x"})})
    for bad in (
        {**entry, "secret": "whsec_hunter2"},
        {**entry, "prefix": "https://ci.example/hooks/?token=hunter2"},
        {**entry, "prefix": "https://user:hunter2@ci.example/hooks/"},
        {**entry, "prefix": "http://2130706433/"},
        {**entry, "networks": ["10.0.0.0/33"]},
        {**entry, "extra": 1},
    ):
        refused(DESTINATIONS_ENV, **{DESTINATIONS_ENV: json.dumps([bad])})
    refused(DESTINATIONS_ENV, **{DESTINATIONS_ENV: json.dumps([entry, entry])})
    monkeypatch.setenv(DESTINATIONS_ENV, json.dumps([{**entry, "networks": ["10.96.0.5/12"]}]))
    (parsed,) = WebhookSettings().destinations
    assert parsed.networks == ("10.96.0.0/12",) and WebhookSettings().enabled
    assert OWN not in repr(WebhookSettings())
    monkeypatch.setenv(url, " https://hooks.example/x ")
    monkeypatch.setenv(key, SECRET)
    assert WebhookSettings().url == "https://hooks.example/x"
    assert AskPolicy(notify=(" https://ci.example/hooks/a ",)).notify == (
        "https://ci.example/hooks/a",
    )


@pytest.mark.parametrize(
    "env",
    [
        {"ASK_BRIDGE_WEBHOOK_URL": "not a url", "ASK_BRIDGE_WEBHOOK_SECRET": SECRET},
        {DESTINATIONS_ENV: '[{"prefix": "http://10.0.0.1/", "secret": "plain-text"}]'},
    ],
    ids=["url", "destinations"],
)
async def test_serve_with_a_bad_webhook_setting_fails_in_one_line(env: dict[str, str]) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "serve", env=cli_env(**env),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1 and out == b""
    name = next(iter(env)).encode()
    assert err.count(b"\n") == 1 and name in err and b"plain-text" not in err, err


async def test_an_asks_own_notify_url_from_the_policy(
    stores: Callable[[], Store], receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``AskPolicy.notify`` goes with the ask (a creation field), so a worker without any URL of
    its own still tells that receiver, signed with the allow-list entry's secret."""
    monkeypatch.setenv(DESTINATIONS_ENV, allow_list(allowing(receiver)))
    store = stores()
    destination = Destination(platform="memory", channel="C42")
    policy = AskPolicy(mode="defer", notify=(receiver.url("own"),))
    deferred = await ChatHandler(MemoryPoster(), store, destination, policy)(
        list(new_record().questions.questions), {"run": 7}
    )
    assert isinstance(deferred, AskUserDeferred) and deferred.extra is not None
    ask_id = str(deferred.extra["ask_id"])
    assert (await store.get(ask_id)).notify == (receiver.url("own"),)  # type: ignore[union-attr]
    task = await running(worker(store, destinations=WebhookSettings().destinations))
    try:
        await store.close(ask_id, AskStatus.CANCELLED)
        await receiver.until(lambda: len(receiver.hits) == 1)
    finally:
        await stopped(task)
    (hit,) = receiver.on("own")
    assert verified(OWN, hit)["context"]["run"] == 7


def example_receiver() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "webhook_receiver_example", ROOT / "examples" / "webhook_receiver.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_example_receiver_refuses_forgeries_replays_and_garbage(
    receiver: Receiver,
) -> None:
    """``examples/webhook_receiver.py``'s ``handle``, fed the bridge's real request and hostile
    variations of it: the request is taken once (a repeat of its webhook-id answered 200 and not
    acted on); a replay under a fresh id, a tampered body, missing headers, non-ASCII or garbled
    signatures, a body that is not UTF-8 each get 401 -- never an exception."""
    example = example_receiver()
    store = MemoryStore()
    task = await running(WebhookWorker(store, url=receiver.url(), secret=example.SECRET))
    try:
        rec = await ended(store)
        await receiver.until(lambda: len(receiver.hits) == 1)
    finally:
        await stopped(task)
    (hit,) = receiver.hits
    headers = {k: v for k, v in hit.headers.items() if k.lower().startswith("webhook-")}
    assert example.handle(headers, hit.body) == 200 and example.seen == {hit.headers[ID_HEADER]}
    assert example.handle(headers, hit.body) == 200 and len(example.seen) == 1  # a repeat
    signature = headers["webhook-signature"]
    hostile: list[tuple[dict[str, str], bytes]] = [
        ({**headers, ID_HEADER: "fresh-" + rec.id}, hit.body),
        (headers, hit.body.replace(b"Yes", b"No!")),
        ({}, hit.body),
        ({k: v for k, v in headers.items() if k != "webhook-signature"}, hit.body),
        ({**headers, "webhook-signature": "v1,\u00e9\u00e9\u00e9"}, hit.body),
        ({**headers, "webhook-signature": "v1"}, hit.body),
        ({**headers, "webhook-signature": "v1,%%%"}, hit.body),
        ({**headers, "webhook-signature": signature + "\u00ff"}, hit.body),
        ({**headers, "webhook-timestamp": "soon"}, hit.body),
        (headers, b"\xff\xfe" + hit.body),
    ]
    for forged, body in hostile:
        assert example.handle(forged, body) == 401, forged
    assert len(example.seen) == 1
