"""Answer-to-resume latency: waiter and answerer in separate processes, vs raw PUBLISH.

Run: ``.venv/bin/python -m bench.engine_latency [N] [--busy] [--gap MS]`` (default 2,000 asks;
``--busy``: a process spinning on a core beside the waiter and the answerer while they are
measured, :mod:`bench.busy`; ``--gap``: see below). The answerer stamps CLOCK_MONOTONIC
(system-wide on Linux) into the answer just before ``submit``; the waiter reads the clock when
``wait`` returns. The answerer judges as ``serve`` does: it learns each ask's terms from its
creation (``Store.learn_terms``), so its ``submit`` reads nothing first. The baseline is one raw
PUBLISH -> subscriber message, same clocks, in the same rounds (so the same neighbour).

Each answer is sent ``--gap`` ms (default 2) after its wait started, and each raw PUBLISH the
same pause after the previous round: a person answers seconds after the call began waiting, by
when the waiter has registered (a round trip of its own: the lease, its channel among the ask's
wakers) and the answerer has learned the ask's terms. With ``--gap 0`` (every row measured
before the option existed) the answer is sent on the waiter's next turn, so its registration
and the answerer's learning run beside the measured answer: with a hog beside them that alone
made the p50 5.5x raw instead of 3.3x.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time

from redis.asyncio import Redis

from bench import busy
from bench.engine_common import four_questions, pct, record, server_url
from bridge.models import Answer
from bridge.record import Responder
from bridge.store.redis import RedisStore


async def answerer(url: str) -> None:
    store = RedisStore.from_url(url, prefix="bench")
    if hasattr(store, "learn_terms"):  # as serve does (a tree from before it reads them)
        await store.learn_terms()
        await store.listening()
    raw = Redis.from_url(url)
    who = Responder(user_id="U_BENCH")
    while line := await asyncio.to_thread(sys.stdin.readline):
        kind, arg = line.rstrip("\n").split(" ", 1)
        if kind == "raw":
            await raw.publish("bench:raw", repr(time.monotonic()))
        else:
            t0 = time.monotonic()
            answer = Answer(
                question=arg.split("|", 1)[1], selected=("Option 1",), other_text=repr(t0)
            )
            await store.submit(arg.split("|", 1)[0], who, (answer,))
    await store.aclose()
    await raw.aclose()


GAP_FLAG = "--gap"


def gap_argument(argv: list[str]) -> float:
    """``--gap MS`` (removed from ``argv``) in seconds; 2 ms if not given."""
    if GAP_FLAG not in argv:
        return 0.002
    at = argv.index(GAP_FLAG)
    try:
        ms = float(argv[at + 1])
    except (IndexError, ValueError):
        ms = math.nan
    if not 0 <= ms <= 1000:
        sys.exit(f"{GAP_FLAG} takes milliseconds from 0 to 1000, e.g. {GAP_FLAG} 2")
    del argv[at : at + 2]
    return ms / 1000


async def waiter(url: str, n: int, hog: bool, gap: float) -> None:
    proc = subprocess.Popen(  # noqa: ASYNC220 (set-up, outside the timed part)
        [sys.executable, "-m", "bench.engine_latency", "--answerer", url],
        stdin=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    store = RedisStore.from_url(url, prefix="bench")
    raw = Redis.from_url(url, decode_responses=True)
    qs = four_questions()
    pubsub = raw.pubsub()
    await pubsub.subscribe("bench:raw")
    await pubsub.get_message(timeout=5)
    raw_lat: list[float] = []
    ask_lat: list[float] = []

    async def one_round() -> tuple[float, float]:
        """One raw PUBLISH and one answered ask: each one's latency, in seconds."""
        await asyncio.sleep(gap)
        proc.stdin.write("raw -\n")
        proc.stdin.flush()
        msg = None
        while msg is None:
            msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
        raw_latency = time.monotonic() - float(msg["data"])
        rec = record(qs, 1)
        await store.create(rec)
        waiting = asyncio.create_task(store.wait(rec.id, 10))
        await asyncio.sleep(gap)  # the wait registers before the answer can land
        proc.stdin.write(f"ask {rec.id}|{rec.questions.questions[0].question}\n")
        proc.stdin.flush()
        got = await waiting
        assert got is not None and got.answers is not None and not got.deferred
        return raw_latency, time.monotonic() - float(got.answers[0].other_text or "nan")

    try:
        for _ in range(100):  # warm up connections and scripts
            await one_round()
        with busy.neighbour(hog):
            for _ in range(n):
                raw_latency, ask_latency = await one_round()
                raw_lat.append(raw_latency)
                ask_lat.append(ask_latency)
    finally:
        proc.stdin.close()
        proc.wait(10)
        await pubsub.aclose()
        await raw.aclose()
        await store.aclose()
    r50, r99 = pct(raw_lat, 50) * 1e3, pct(raw_lat, 99) * 1e3
    a50, a99 = pct(ask_lat, 50) * 1e3, pct(ask_lat, 99) * 1e3
    beside = ", a busy neighbour beside them" if hog else ""
    print(f"asks: {n}, waiter and answerer in separate processes{beside}")
    print(f"each answer {gap * 1e3:g} ms after its wait began, each raw PUBLISH as long after")
    print(f"raw PUBLISH->message  p50 {r50:.3f} ms  p99 {r99:.3f} ms")
    print(f"answer->resume        p50 {a50:.3f} ms  p99 {a99:.3f} ms")
    print(f"ratio (p50)           {a50 / r50:.2f}x  (target <= 2.5x; p99 target < 5 ms)")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--answerer":
        asyncio.run(answerer(sys.argv[2]))
        return
    argv = list(sys.argv)
    gap = gap_argument(argv)
    with server_url() as url:
        asyncio.run(waiter(url, busy.count(argv, 2000), busy.wanted(argv), gap))


if __name__ == "__main__":
    main()
