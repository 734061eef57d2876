"""An expiry storm's store part in one fresh process, for whichever ``bridge`` is first on
``sys.path``.

Run by ``engine_scale.py --before REV`` (``python expiry_child.py URL PREFIX N``) over an
earlier revision extracted beside this checkout, so the code issue 11 found is measured on the
same machine in the same run as this checkout's store part. Creates N posted 4-question asks
that expire together (500 at a time), then expires them all as that revision's sweeper takes
them: ``Store.sweep_batches`` drained where it exists, else ``Store.sweep`` (which returns every
expired record). Uses only what every revision since issue 11 has. Prints one JSON line: the
seconds creating them took, the store part's wall and CPU seconds, the server's own CPU seconds
over it (:func:`server_cpu`), and how many it expired.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import redis.asyncio as aredis


async def server_cpu(client: aredis.Redis) -> float:
    """The server's CPU seconds so far (``INFO cpu``: user and system, all its threads): read
    before and after a store part, the difference is what Redis spent on it, whichever client
    code drove it (this bench runs nothing else against the server meanwhile)."""
    info = await client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def storm(url: str, prefix: str, n: int) -> dict[str, object]:
    # imported here, not at the top: engine_scale.py imports this module (for server_cpu), and
    # there bench/ is not on sys.path
    from question_texts import four_question_dicts

    from bridge.models import QuestionSet
    from bridge.record import AskRecord, Destination, MessageRef
    from bridge.store.redis import RedisStore

    store = RedisStore.from_url(url, prefix=prefix)
    record_message = getattr(store, "message_posted", None) or store.set_message
    questions = QuestionSet.model_validate({"questions": four_question_dicts()})
    message = MessageRef(platform="slack", channel="C0123456789", message_id="1700000000.0001")
    expires = time.time() + 3600
    t0 = time.perf_counter()
    for start in range(0, n, 500):
        recs = [
            AskRecord(
                questions=questions,
                destination=Destination(platform="slack", channel="C0123456789"),
                context={"session": "bench"},
                expires_at=expires,
            )
            for _ in range(min(500, n - start))
        ]
        await asyncio.gather(*(store.create(r) for r in recs))
        await asyncio.gather(*(record_message(r.id, message) for r in recs))
    made = time.perf_counter() - t0
    expired = 0
    server = aredis.from_url(url)
    served0 = await server_cpu(server)
    cpu0, t0 = time.process_time(), time.perf_counter()
    if hasattr(store, "sweep_batches"):
        async for batch in store.sweep_batches(now=expires + 1):
            expired += len(batch)
    else:
        expired = len(await store.sweep(expires + 1))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    served = await server_cpu(server) - served0
    await server.aclose()
    import bridge

    out = {"created": made, "wall": wall, "cpu": cpu, "server_cpu": served, "expired": expired}
    return {**out, "bridge": bridge.__file__}


def main() -> None:
    url, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # not asyncio.run: the code issue 11 found never returns from closing a store whose
    # subscription runs, so the process ends without closing it
    result = asyncio.new_event_loop().run_until_complete(storm(url, prefix, n))
    print(json.dumps(result), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
