"""One-click answers to asks that need several people, per click, vs one-person asks.

Run: ``.venv/bin/python -m bench.engine_approvals [N]`` (default 2,000 asks per kind). Each kind
creates N one-click asks (one single-select question of four options), then clicks them, 32 in
flight, through ``Store.pick`` (what a platform's click costs the store):

* baseline, ``required=1``: one click answers each ask (``ACCEPTED``);
* ``required=2``: two people click the same option (``RECORDED``, then ``ACCEPTED``);
* ``required=10`` with 19 people: 9 disagree, then 10 agree (a record grows to 19 submissions:
  every click reads them all to count agreement).

Printed per kind: client CPU and wall time per click, and script calls (round trips) per click,
as ratios to the baseline measured in the same run.
"""

from __future__ import annotations

import asyncio
import sys
import time

from redis.asyncio import Redis

from bench.engine_common import command_calls, four_questions, record, server_url
from bridge.record import Responder
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore

IN_FLIGHT = 32


async def run_kind(
    url: str, n: int, required: int, people: list[tuple[str, int]]
) -> dict[str, float]:
    """``people``: (user id, option) clicking each ask in order; the last one makes it."""
    store = RedisStore.from_url(url, prefix=f"bench{required}{len(people)}")
    raw = Redis.from_url(url)
    qs = four_questions()
    asks = []
    for _ in range(n):
        rec = record(qs, 1).model_copy(update={"required": required})
        await store.create(rec)
        asks.append(rec.id)
    clicks = n * len(people)
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def answer(ask_id: str) -> None:
        async with sem:
            for i, (user, option) in enumerate(people):
                got = await store.pick(ask_id, Responder(user_id=user), 0, option)
                last = i == len(people) - 1
                want = SubmitOutcome.ACCEPTED if last else SubmitOutcome.RECORDED
                assert got.outcome is want, (got.outcome, want)

    before = await command_calls(raw, "evalsha")
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(answer(a) for a in asks))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    scripts = await command_calls(raw, "evalsha") - before
    await raw.aclose()
    await store.aclose()
    return {"cpu": cpu / clicks, "wall": wall / clicks, "scripts": scripts / clicks}


async def main(n: int) -> None:
    with server_url() as url:
        kinds = {
            "required=1 (baseline)": (1, [("U_A", 0)]),
            "required=2, 2 agree": (2, [("U_A", 0), ("U_B", 0)]),
            "required=10, 19 people": (
                10,
                [(f"U_{i:02}", 1 + i % 3) for i in range(9)] + [(f"U_Y{i}", 0) for i in range(10)],
            ),
        }
        results = {name: await run_kind(url, n, k, people) for name, (k, people) in kinds.items()}
    base = results["required=1 (baseline)"]
    print(f"{n} asks per kind, {IN_FLIGHT} in flight; per click:")
    for name, r in results.items():
        print(
            f"  {name:24} cpu {r['cpu'] * 1e6:7.1f} us ({r['cpu'] / base['cpu']:.2f}x)  "
            f"wall {r['wall'] * 1e6:7.1f} us ({r['wall'] / base['wall']:.2f}x)  "
            f"scripts {r['scripts']:.2f} ({r['scripts'] / base['scripts']:.2f}x)"
        )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
