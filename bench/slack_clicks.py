"""Slack click latency through the HTTP app, next to the engine's raw answer-to-resume.

Run: ``.venv/bin/python -m bench.slack_clicks [N] [--busy]`` (default 300 sequential clicks;
``--busy``: a process spinning on a core beside every measured phase, :mod:`bench.busy`).

* engine: ``store.submit`` on one connection -> ``store.wait`` returns on another (same Redis).
* click-to-resume: a signed ``block_actions`` POST to an ``ask-bridge serve`` process (HTTP
  mode, separate OS process) -> the waiting ``store.wait`` in this process returns.
* under load: clicks fired open-loop at 200 per second for 5 seconds, each on an ask with its own
  waiting call, while 1,000 more calls wait on asks nobody answers; each click's ack (the HTTP
  response; target: p99 under 100 ms, Slack's hard limit is 3 s) and its waiting call's resume
  are timed from the moment the click was *due*, so a late send counts against the figure;
  so is the message showing the outcome (its ``chat.update`` reaching the fake Slack): acks
  come first (:mod:`bridge.answering`), and this is what that costs the message.
  Beside them, the CPU time ``serve`` spent per click in that phase, from the first click to the
  last outcome shown on its message -- showing it is part of what a click costs, and when
  ``serve`` falls behind on showing, a figure taken at the last resume leaves out the showings
  still queued then (printed too: "to the last resume") -- and this process's, which sends the
  clicks, hosts the fake Slack and runs the waiting calls: on a 2-core machine the three of them
  and Redis share two cores, so a p99 that varies from run to run is read beside the CPU it had
  to share.

Slack itself is the loopback fake from the test suite, so the figures exclude Slack's network.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid

import aiohttp

from bench import busy, floor
from bench.busy import cpu_seconds as cpu_seconds  # web_streams.py and web_pages.py use it
from bench.engine_common import pct, server_url
from bridge import routing
from bridge.models import Answer, QuestionSet
from bridge.record import AskRecord, Destination, Responder
from bridge.store.redis import RedisStore
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from tests.support.procs import Serve, cli_env
from tests.support.samples import one_question_set
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, block_actions, form_body, signed

RATE = 200
CPU_PER_CLICK: dict[str, float] = {}
"""CPU seconds per click in the loaded phase: ``serve``'s to the last outcome shown (``serve``)
and to the last resume (``resumed``), this process's (``bench``), and the bare libraries' doing
the same wire work at the same rate (``floor``, :mod:`bench.floor`)."""
SECONDS = 5
PARKED = 1000
BUSY = busy.wanted(sys.argv)
SHOWN: list[float] = []
"""Each loaded-phase click's outcome on its message, from the click's scheduled time."""


def ms(values: list[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` (seconds) in milliseconds."""
    return pct(values, p) * 1000


def one_click_set() -> QuestionSet:
    return one_question_set(
        "Ship the release to production now?",
        "Deploy",
        ("Yes", "Deploy now"),
        ("No", "Hold the release"),
    )


async def new_ask(store: RedisStore, poster: SlackPoster) -> AskRecord:
    record = AskRecord(
        questions=one_click_set(),
        destination=Destination(platform="slack", channel="C0BENCH"),
        expires_at=time.time() + 3600,
    )
    await store.create(record)
    posted = await store.set_message(record.id, await poster.post(record))
    assert posted is not None
    return posted


async def engine(a: RedisStore, b: RedisStore, poster: SlackPoster, n: int) -> list[float]:
    out = []
    for _ in range(n):
        record = await new_ask(a, poster)
        waiting = asyncio.create_task(b.wait(record.id, 30))
        await asyncio.sleep(0)
        answer = Answer(question=record.questions.questions[0].question, selected=("Yes",))
        start = time.perf_counter()
        await a.submit(record.id, Responder(user_id="U0BENCH"), [answer])
        assert await waiting is not None
        out.append(time.perf_counter() - start)
    return out


def click_for(fake: FakeSlack, record: AskRecord) -> str:
    assert record.message is not None
    ref = record.message
    action = routing.pick_id(record.id, 0, 0)
    payload = block_actions(fake, ref.channel, ref.message_id, "U0BENCH", action)
    return form_body(payload)


async def clicks(
    store: RedisStore, poster: SlackPoster, fake: FakeSlack, serve: Serve, n: int
) -> list[float]:
    out = []
    async with aiohttp.ClientSession() as http:
        for _ in range(n):
            record = await new_ask(store, poster)
            body = click_for(fake, record)
            waiting = asyncio.create_task(store.wait(record.id, 30))
            await asyncio.sleep(0)
            start = time.perf_counter()
            async with http.post(serve.url, data=body, headers=signed(body)) as resp:
                assert resp.status == 200
            assert await waiting is not None
            out.append(time.perf_counter() - start)
    return out


async def acks(
    store: RedisStore, poster: SlackPoster, fake: FakeSlack, serve: Serve, redis_url: str
) -> tuple[list[float], list[float]]:
    """Clicks fired open-loop at ``RATE`` per second while ``PARKED`` other calls wait (on asks
    nobody answers) and each clicked ask has its own waiting call: the ack latency and the
    click-to-resume latency of each click, both from the time the click was *due*."""
    parked_asks = [await new_ask(store, poster) for _ in range(PARKED)]
    parked = [asyncio.create_task(store.wait(r.id, 600)) for r in parked_asks]
    records = [await new_ask(store, poster) for _ in range(RATE * SECONDS)]
    bodies = [click_for(fake, r) for r in records]
    resumed_at: dict[str, float] = {}

    async def waiting(ask_id: str) -> None:
        assert await store.wait(ask_id, 600) is not None
        resumed_at[ask_id] = time.perf_counter()

    waits = [asyncio.create_task(waiting(r.id)) for r in records]
    await asyncio.sleep(1.0)  # every wait registered and checked
    acked: list[float] = []

    async def fire(http: aiohttp.ClientSession, body: str, due: float) -> None:
        async with http.post(serve.url, data=body, headers=signed(body)) as resp:
            assert resp.status == 200
        acked.append(time.perf_counter() - due)

    connector = aiohttp.TCPConnector(limit=0)
    scheduled: list[float] = []
    assert serve.proc is not None
    serve_cpu, own_cpu = cpu_seconds(serve.proc.pid), time.process_time()
    async with aiohttp.ClientSession(connector=connector) as http:
        began = time.perf_counter() + 0.1
        tasks = []
        for i, body in enumerate(bodies):
            due = began + i / RATE
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            scheduled.append(due)
            tasks.append(asyncio.create_task(fire(http, body, due)))
        await asyncio.gather(*tasks)
    await asyncio.gather(*waits)
    CPU_PER_CLICK["resumed"] = (cpu_seconds(serve.proc.pid) - serve_cpu) / len(bodies)
    CPU_PER_CLICK["bench"] = (time.process_time() - own_cpu) / len(bodies)
    due_of = {
        r.message.message_id: due for r, due in zip(records, scheduled, strict=True) if r.message
    }
    shown: dict[str, float] = {}
    give_up = time.perf_counter() + 30
    read = 0  # the fake's calls looked at so far (it only appends)
    while len(shown) < len(due_of) and time.perf_counter() < give_up:
        calls, read = fake.calls[read:], len(fake.calls)
        for call in calls:
            ts = call.args.get("ts", "")
            if call.method == "chat.update" and call.ok and ts in due_of and ts not in shown:
                shown[ts] = call.at - due_of[ts]
        if len(shown) < len(due_of):
            await asyncio.sleep(0.01)
    CPU_PER_CLICK["serve"] = (cpu_seconds(serve.proc.pid) - serve_cpu) / len(bodies)
    assert len(shown) == len(due_of), f"{len(due_of) - len(shown)} outcomes never shown"
    SHOWN.extend(shown.values())
    for task in parked:
        task.cancel()
    await asyncio.gather(*parked, return_exceptions=True)
    resumed = [resumed_at[r.id] - due for r, due in zip(records, scheduled, strict=True)]
    edit = next(c for c in fake.calls if c.method == "chat.update" and c.args.get("ts") in shown)
    CPU_PER_CLICK["floor"] = await floor.cpu_per_click(
        "slack", bodies[: floor.WARM_UP] + bodies, edit.args, edit.response, redis_url, RATE
    )
    return acked, resumed


async def run(n: int) -> None:
    with server_url() as url:
        fake = await FakeSlack().start()
        prefix = f"bench{uuid.uuid4().hex[:6]}"
        env = cli_env(
            SLACK_BOT_TOKEN=BOT_TOKEN,
            SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=fake.url,
            REDIS_URL=url,
            ASK_BRIDGE_KEY_PREFIX=prefix,
        )
        serve = await Serve(env).start()
        a = RedisStore.from_url(url, prefix=prefix)
        b = RedisStore.from_url(url, prefix=prefix)
        poster = SlackPoster(make_client(BOT_TOKEN, fake.url))
        try:
            await clicks(b, poster, fake, serve, 20)  # warm up both paths
            await engine(a, b, poster, 20)
            with busy.neighbour(BUSY):
                raw = await engine(a, b, poster, n)
                resumed = await clicks(b, poster, fake, serve, n)
                acked, loaded = await acks(b, poster, fake, serve, url)
        finally:
            await serve.stop()
            await a.aclose()
            await b.aclose()
            await fake.stop()
    cores = os.cpu_count()
    beside = ", a busy neighbour beside it" if BUSY else ""
    print(
        f"slack clicks ({n} sequential; {RATE}/s for {SECONDS}s{beside}; {cores} cores; "
        "loopback fake)"
    )
    print(f"  engine answer-to-resume   p50 {ms(raw, 50):7.2f} ms   p99 {ms(raw, 99):7.2f} ms")
    print(
        f"  slack click-to-resume     p50 {ms(resumed, 50):7.2f} ms   "
        f"p99 {ms(resumed, 99):7.2f} ms   ({ms(resumed, 50) / ms(raw, 50):.1f}x engine p50)"
    )
    print(f"  at {RATE}/s with {PARKED:,} more waits parked, from each click's scheduled time:")
    print(
        f"  ack                       p50 {ms(acked, 50):7.2f} ms   "
        f"p99 {ms(acked, 99):7.2f} ms   (target p99 < 100 ms)"
    )
    print(
        f"  click-to-resume           p50 {ms(loaded, 50):7.2f} ms   p99 {ms(loaded, 99):7.2f} ms"
    )
    print(f"  outcome on the message    p50 {ms(SHOWN, 50):7.2f} ms   p99 {ms(SHOWN, 99):7.2f} ms")
    print(
        f"  CPU per click: serve {CPU_PER_CLICK['serve'] * 1000:.2f} ms to the last outcome shown "
        f"({CPU_PER_CLICK['serve'] * RATE:.0%} of a core at {RATE}/s; "
        f"{CPU_PER_CLICK['resumed'] * 1000:.2f} ms to the last resume), this process "
        f"{CPU_PER_CLICK['bench'] * 1000:.2f} ms"
    )
    print(
        f"  CPU per click, the bare libraries (bench/floor.py: aiohttp in and out, two redis-py "
        f"script calls) {CPU_PER_CLICK['floor'] * 1000:.2f} ms: serve is "
        f"{CPU_PER_CLICK['serve'] / CPU_PER_CLICK['floor']:.1f}x"
    )


if __name__ == "__main__":
    asyncio.run(run(busy.count(sys.argv, 300)))
