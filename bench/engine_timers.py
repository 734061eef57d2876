"""What reminders cost the store: creating an ask with follow-ups, and firing one reminder, vs
creating a plain ask and answering it with one click.

Run: ``.venv/bin/python -m bench.engine_timers [N]`` (default 2,000 asks). Over one real server:

* create, baseline: N plain one-question asks (``Store.create``);
* create, with follow-ups: N asks with a reminder due (the create also indexes it in
  ``<prefix>:timers``);
* click, baseline: each plain ask answered by one click (``Store.pick``, 32 in flight);
* reminder: each follow-up ask's reminder claimed by a sweep (``Store.claim_timers``: one index
  read, then the claims batched in one pipeline per 1,000 asks) and marked done
  (``Store.timer_done``, 32 in flight) -- what a sweeper adds to the platform post itself;
* idle sweep: ``claim_timers`` when nothing is due (every sweep round pays it).

Printed: client CPU and wall time per ask, and script calls per ask, as ratios to the baseline
measured in the same run (creates to the plain create, the reminder to the click).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

from redis.asyncio import Redis

from bench.engine_common import command_calls, four_questions, record, server_url
from bridge.record import AskRecord, FollowUps, MessageRef, Responder
from bridge.store.redis import RedisStore

IN_FLIGHT = 32
REF = MessageRef(platform="slack", channel="C0123456789", message_id="1700000000.000200")


async def measure(raw: Redis, n: int, work: Callable[[], Awaitable[object]]) -> dict[str, float]:
    before = await command_calls(raw, "evalsha")
    cpu, wall = time.process_time(), time.perf_counter()
    await work()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    scripts = await command_calls(raw, "evalsha") - before
    return {"cpu": cpu / n, "wall": wall / n, "scripts": scripts / n}


async def in_flight(items: list[AskRecord], each: Callable[[AskRecord], Awaitable[object]]) -> None:
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def one(item: AskRecord) -> None:
        async with sem:
            await each(item)

    await asyncio.gather(*(one(i) for i in items))


async def main(n: int) -> None:
    results: dict[str, dict[str, float]] = {}
    with server_url() as url:
        store = RedisStore.from_url(url, prefix="benchtimers")
        raw = Redis.from_url(url)
        qs = four_questions()
        plain = [record(qs, 1) for _ in range(n)]
        follow = FollowUps(remind_after=60, remind_times=1)
        timed = [record(qs, 1).model_copy(update={"follow_ups": follow}) for _ in range(n)]
        await store.sweep()  # connect and adopt the epoch before measuring

        async def create(asks: list[AskRecord]) -> None:
            await in_flight(asks, store.create)
            await in_flight(asks, lambda r: store.set_message(r.id, REF))

        results["create, baseline"] = await measure(raw, n, lambda: create(plain))
        results["create, with follow-ups"] = await measure(raw, n, lambda: create(timed))
        who = Responder(user_id="U_A")
        results["click, baseline"] = await measure(
            raw, n, lambda: in_flight(plain, lambda r: store.pick(r.id, who, 0, 0))
        )
        due = max(r.created_at for r in timed) + 61

        async def fire() -> None:
            claims = []
            while found := await store.claim_timers(due):
                claims += found
            assert len(claims) == n, len(claims)
            by_id = {c.ask_id: c for c in claims}
            await in_flight(timed, lambda r: store.timer_done(by_id[r.id], now=due))

        results["reminder"] = await measure(raw, n, fire)
        results["idle sweep (per round)"] = await measure(raw, 1, lambda: store.claim_timers())
        await raw.aclose()
        await store.aclose()
    print(f"{n} asks, {IN_FLIGHT} in flight; per ask:")
    for name, r in results.items():
        base = results[
            "click, baseline" if name.startswith(("click", "reminder")) else "create, baseline"
        ]
        ratio = "" if name.startswith("idle") else f" ({r['cpu'] / base['cpu']:.2f}x)"
        wall = "" if name.startswith("idle") else f" ({r['wall'] / base['wall']:.2f}x)"
        print(
            f"  {name:24} cpu {r['cpu'] * 1e6:8.1f} us{ratio}  wall {r['wall'] * 1e6:8.1f} us"
            f"{wall}  scripts {r['scripts']:.2f}"
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
