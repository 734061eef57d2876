"""Discord click latency through the bot, next to the engine's raw answer-to-resume.

Run: ``.venv/bin/python -m bench.discord_clicks [N] [--busy]`` (default 300 sequential clicks;
``--busy``: a process spinning on a core beside every measured phase, :mod:`bench.busy`).

* engine: ``store.submit`` on one connection -> ``store.wait`` returns on another (same Redis).
* click-to-resume: the fake Discord sends ``INTERACTION_CREATE`` over its gateway to an
  ``ask-bridge serve`` bot (separate OS process, real discord.py) -> the waiting ``store.wait``
  in this process returns.
* response: clicks fired open-loop at 200 per second for 5 seconds; each one's latency runs from
  its *scheduled* time to the moment the fake receives its interaction response (target: p99
  under 100 ms; Discord's hard limit is 3 s). Beside it, the CPU time ``serve`` spent per click
  in that phase (and this process's: it hosts the fake Discord and its gateway), read as in
  ``bench/slack_clicks.py``.

Discord itself is the loopback fake from the test suite, so the figures exclude Discord's network.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
import uuid

from bench import busy, floor
from bench.engine_common import pct, server_url
from bridge import routing
from bridge.models import Answer
from bridge.record import AskRecord, Destination, Responder
from bridge.store.redis import RedisStore
from platforms.discord.client import RestClient
from platforms.discord.poster import DiscordPoster
from platforms.discord.settings import DiscordSettings
from tests.support.discord.discord_procs import discord_bot, discord_env
from tests.support.discord.fake_discord import CHANNEL, TOKEN, FakeDiscord, Interaction
from tests.support.samples import one_question_set

RATE = 200
SECONDS = 5
USER = "100000000000000001"
BUSY = busy.wanted(sys.argv)
CPU_PER_CLICK: dict[str, float] = {}
"""CPU seconds per click in the loaded phase: ``serve``'s, this process's, and the bare
libraries' doing the same wire work at the same rate (``floor``, :mod:`bench.floor`)."""


def ms(values: list[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` (seconds) in milliseconds."""
    return pct(values, p) * 1000


async def new_ask(store: RedisStore, poster: DiscordPoster) -> AskRecord:
    record = AskRecord(
        questions=one_question_set(
            "Ship the release to production now?",
            "Deploy",
            ("Yes", "Deploy now"),
            ("No", "Hold the release"),
        ),
        destination=Destination(platform="discord", channel=CHANNEL),
        expires_at=time.time() + 3600,
    )
    await store.create(record)
    posted = await store.set_message(record.id, await poster.post(record))
    assert posted is not None
    return posted


async def engine(a: RedisStore, b: RedisStore, poster: DiscordPoster, n: int) -> list[float]:
    out = []
    for _ in range(n):
        record = await new_ask(a, poster)
        waiting = asyncio.create_task(b.wait(record.id, 30))
        await asyncio.sleep(0)
        answer = Answer(question=record.questions.questions[0].question, selected=("Yes",))
        start = time.perf_counter()
        await a.submit(record.id, Responder(user_id=USER), [answer])
        assert await waiting is not None
        out.append(time.perf_counter() - start)
    return out


async def click(fake: FakeDiscord, record: AskRecord) -> Interaction:
    assert record.message is not None
    message = fake.messages[record.message.message_id]
    return await fake.click(USER, message, routing.pick_id(record.id, 0, 0))


async def clicks(
    store: RedisStore, poster: DiscordPoster, fake: FakeDiscord, n: int
) -> list[float]:
    out = []
    for _ in range(n):
        record = await new_ask(store, poster)
        waiting = asyncio.create_task(store.wait(record.id, 30))
        await asyncio.sleep(0)
        start = time.perf_counter()
        await click(fake, record)
        assert await waiting is not None
        out.append(time.perf_counter() - start)
    return out


async def shown(fake: FakeDiscord, records: list[AskRecord]) -> None:
    """Return once every record's message shows its outcome -- no controls left -- (within
    30 s), whether an edit or the click's own response put it there."""
    due = {r.message.message_id for r in records if r.message is not None}
    give_up = time.perf_counter() + 30
    while due and time.perf_counter() < give_up:
        due = {m for m in due if fake.messages[m]["components"]}
        await asyncio.sleep(0.1)
    assert not due, f"{len(due)} outcomes never shown"


async def responses(
    store: RedisStore, poster: DiscordPoster, fake: FakeDiscord, bot: int, redis_url: str
) -> list[float]:
    """Clicks fired open-loop at ``RATE`` per second: each one's interaction response from its
    scheduled time; ``bot``'s CPU time (the ``serve`` process) per click into
    :data:`CPU_PER_CLICK`."""
    records = [await new_ask(store, poster) for _ in range(RATE * SECONDS)]
    gc.collect()
    gc.freeze()  # the fake's own bookkeeping must not pause the measurement with collections
    serve_cpu, own_cpu = busy.cpu_seconds(bot), time.process_time()
    scheduled: list[float] = []
    sent: list[Interaction] = []
    began = time.perf_counter() + 0.1
    for i, record in enumerate(records):
        at = began + i / RATE
        delay = at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        scheduled.append(at)
        sent.append(await click(fake, record))
    for interaction in sent:
        await fake.responded(interaction, within=60)
    await shown(fake, records)  # the updates showing the outcomes are part of a click's cost
    CPU_PER_CLICK["serve"] = (busy.cpu_seconds(bot) - serve_cpu) / len(records)
    CPU_PER_CLICK["bench"] = (time.process_time() - own_cpu) / len(records)
    frames = [
        json.dumps({"op": 0, "s": i, "t": "INTERACTION_CREATE", "d": interaction.payload})
        for i, interaction in enumerate(sent[: floor.WARM_UP] + sent)
    ]
    response = next(c for c in fake.calls if c.path.endswith("/callback") and c.status < 300)
    CPU_PER_CLICK["floor"] = await floor.cpu_per_click(
        "discord", frames, response.body, response.response or {}, redis_url, RATE
    )
    return [i.responded_at - at for i, at in zip(sent, scheduled, strict=True) if i.responded_at]


async def run(n: int) -> None:
    with server_url() as url:
        fake = await FakeDiscord(users={USER: "bench"}).start()
        prefix = f"bench{uuid.uuid4().hex[:6]}"
        bot = await discord_bot(
            discord_env(fake, REDIS_URL=url, ASK_BRIDGE_KEY_PREFIX=prefix)
        ).start()
        a = RedisStore.from_url(url, prefix=prefix)
        b = RedisStore.from_url(url, prefix=prefix)
        settings = DiscordSettings(token=TOKEN, api_url=fake.url, gateway_url=fake.gateway_url)
        poster = DiscordPoster(RestClient(settings))
        try:
            await clicks(b, poster, fake, 20)  # warm up both paths
            await engine(a, b, poster, 20)
            assert bot.proc is not None
            with busy.neighbour(BUSY):
                raw = await engine(a, b, poster, n)
                resumed = await clicks(b, poster, fake, n)
                answered = await responses(b, poster, fake, bot.proc.pid, url)
        finally:
            await bot.stop()
            await poster.aclose()
            await a.aclose()
            await b.aclose()
            await fake.stop()
    cores = os.cpu_count()
    also = ", a busy neighbour beside it" if BUSY else ""
    print(
        f"discord clicks ({n} sequential; {RATE}/s for {SECONDS}s{also}; {cores} cores; "
        "loopback fake)"
    )
    print(f"  engine answer-to-resume   p50 {ms(raw, 50):7.2f} ms   p99 {ms(raw, 99):7.2f} ms")
    print(
        f"  discord click-to-resume   p50 {ms(resumed, 50):7.2f} ms   "
        f"p99 {ms(resumed, 99):7.2f} ms   ({ms(resumed, 50) / ms(raw, 50):.1f}x engine p50)"
    )
    print(
        f"  response at {RATE}/s         p50 {ms(answered, 50):7.2f} ms   "
        f"p99 {ms(answered, 99):7.2f} ms   (from each click's scheduled time; target p99 < 100 ms)"
    )
    print(
        f"  CPU per click: serve {CPU_PER_CLICK['serve'] * 1000:.2f} ms "
        f"({CPU_PER_CLICK['serve'] * RATE:.0%} of a core at {RATE}/s), this process "
        f"{CPU_PER_CLICK['bench'] * 1000:.2f} ms"
    )
    print(
        f"  CPU per click, the bare libraries (bench/floor.py: a websocket frame in, aiohttp out, "
        f"two redis-py script calls) {CPU_PER_CLICK['floor'] * 1000:.2f} ms: serve is "
        f"{CPU_PER_CLICK['serve'] / CPU_PER_CLICK['floor']:.1f}x"
    )


if __name__ == "__main__":
    asyncio.run(run(busy.count(sys.argv, 300)))
