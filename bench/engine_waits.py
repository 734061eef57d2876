"""10,000 concurrent waits in one process: all resolve; Redis connections used; RSS per wait.

Run: ``.venv/bin/python bench/engine_waits.py [N]``. Connections are counted with CLIENT LIST
while every wait is parked (the counting connection excluded); RSS is read from /proc before and
after the waits start (the asks' records already created, so only the waits are measured).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time

from engine_common import four_questions, record, server_url
from redis.asyncio import Redis

from bridge.models import Answer
from bridge.record import Responder
from bridge.store.redis import RedisStore


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


async def run(url: str, n: int) -> None:
    store = RedisStore.from_url(url, prefix="waits")
    qs = four_questions()
    recs = [record(qs, 1) for _ in range(n)]
    for i in range(0, n, 500):
        await asyncio.gather(*(store.create(r) for r in recs[i : i + 500]))
    gc.collect()
    before = rss()
    waits = [asyncio.create_task(store.wait(r.id, 120)) for r in recs]
    while len(store._wakeups._waiters) < n or store._wakeups._checks:  # noqa: ASYNC110 (bench: poll internals)
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    gc.collect()
    during = rss()
    raw = Redis.from_url(url, decode_responses=True)
    conns = len(await raw.client_list()) - 1
    answering = RedisStore.from_url(url, prefix="waits")
    t0 = time.perf_counter()
    for i in range(0, n, 500):
        await asyncio.gather(
            *(
                answering.submit(
                    r.id,
                    Responder(user_id="U1"),
                    (
                        Answer(
                            question=r.questions.questions[0].question,
                            selected=(r.id[:0] or "Option 0",),
                        ),
                    ),
                )
                for r in recs[i : i + 500]
            )
        )
    done = await asyncio.gather(*waits)
    elapsed = time.perf_counter() - t0
    ok = sum(
        1 for r, d in zip(recs, done, strict=True) if d is not None and d.id == r.id and d.answers
    )
    print(
        f"waits: {n} in one process; resolved correctly: {ok}/{n} ({elapsed:.2f} s to answer all)"
    )
    print(f"Redis connections held by the waiting store: {conns} (target <= 4)")
    print(f"RSS per wait: {(during - before) / n:.0f} bytes (target <= 10 KB)")
    await raw.aclose()
    await answering.aclose()
    await store.aclose()


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with server_url() as url:
        asyncio.run(run(url, count))
