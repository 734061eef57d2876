"""Redis memory per pending 4-question ask: MEMORY USAGE over its keys, plus its share of the index.

Run: ``.venv/bin/python bench/engine_memory.py [N]``.
"""

from __future__ import annotations

import asyncio
import sys

from engine_common import four_questions, record, server_url
from redis.asyncio import Redis

from bridge.store.redis import RedisStore


async def run(url: str, n: int) -> None:
    store = RedisStore.from_url(url, prefix="mem")
    raw = Redis.from_url(url, decode_responses=True)
    qs = four_questions()
    recs = [record(qs) for _ in range(n)]
    for r in recs:
        await store.create(r)
    total = 0
    for r in recs:
        for key in store.keys.ask_keys(r.id):
            total += await raw.memory_usage(key, samples=0) or 0
    index = await raw.memory_usage(store.keys.due, samples=0) or 0
    per = (total + index) / n
    body = len(recs[0].model_dump_json())
    print(f"pending 4-question asks: {n}; record JSON {body} bytes")
    print(
        f"Redis memory per pending ask: {per:.0f} bytes (keys {total / n:.0f} + index "
        f"{index / n:.0f}; target <= 4096)"
    )
    await raw.aclose()
    await store.aclose()


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with server_url() as url:
        asyncio.run(run(url, count))
