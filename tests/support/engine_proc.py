"""A separate OS process for the engine tests: create an ask, announce its id, wait for it.

``python -m tests.support.engine_proc URL PREFIX LEASE_TTL`` (from the repository root) prints
``ready <ask id>`` once the ask exists and the wait has begun, then one line of JSON (the record
it was handed, or null on timeout).
"""

from __future__ import annotations

import asyncio
import sys

from bridge.store.redis import RedisStore
from tests.support.engine_fixtures import new_record


async def main(url: str, prefix: str, lease_ttl: float) -> None:
    store = RedisStore.from_url(url, prefix=prefix, lease_ttl=lease_ttl)
    record = new_record()
    await store.create(record)
    waiting = asyncio.create_task(store.wait(record.id, 30))
    await store.listening()
    print("ready", record.id, flush=True)
    got = await waiting
    print(got.model_dump_json() if got else "null", flush=True)
    await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
