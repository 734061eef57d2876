"""What an answer costs the replicas that do not wait for it.

Run: ``.venv/bin/python bench/engine_wakeups.py [N] [REPLICAS]`` (default 2,000 answers, 3
replicas). Each replica is a separate process with a ``RedisStore`` whose wake-up subscription is
live (``listening()``), as every ``serve`` replica's is, but which waits for none of these asks.
This process then runs N answers: create, a waiting ``store.wait``, submit from a second store,
the wait returning. Each replica's CPU time over the run (from ``/proc``) divided by N is what one
answer costs a process that does not wait for it: zero when a wake-up reaches only the process
that waits.

Baseline in the same run: this process's own CPU per answer (the waiter and the answerer).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

from engine_common import four_questions, record, server_url

from bridge.models import Answer
from bridge.record import Responder
from bridge.store.redis import RedisStore

PREFIX = "wakeups"


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def replica(url: str) -> None:
    store = RedisStore.from_url(url, prefix=PREFIX)
    await store.listening()
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.read)  # until the bench closes stdin
    await store.aclose()


async def run(url: str, n: int, replicas: int) -> None:
    procs = [
        subprocess.Popen(  # noqa: ASYNC220 (set-up, outside the timed part)
            [sys.executable, __file__, "--replica", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(replicas)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    waiting = RedisStore.from_url(url, prefix=PREFIX)
    clicks = RedisStore.from_url(url, prefix=PREFIX)
    qs = four_questions()
    answers = [Answer(question=q.question, selected=("Option 1",)) for q in qs.questions]
    who = Responder(user_id="U1")
    await waiting.listening()
    await asyncio.sleep(0.5)
    before = [cpu_of(p.pid) for p in procs]
    own0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        rec = record(qs)
        await waiting.create(rec)
        wait = asyncio.create_task(waiting.wait(rec.id, 10))
        await asyncio.sleep(0)
        await clicks.submit(rec.id, who, answers)
        assert await wait is not None
        await waiting.confirm(rec.id)
    own, wall = time.process_time() - own0, time.perf_counter() - t0
    await asyncio.sleep(0.5)  # let the replicas drain what they were sent
    spent = [cpu_of(p.pid) - b for p, b in zip(procs, before, strict=True)]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    await clicks.aclose()
    await waiting.aclose()
    per = [s / n * 1e6 for s in spent]
    print(f"{n:,} answers in {wall:.1f} s; {replicas} other replicas listening, waiting for none")
    print(
        f"CPU per answer in each other replica: {', '.join(f'{p:.0f}' for p in per)} us "
        f"(baseline: the waiting process itself, waiter and answerer, {own / n * 1e6:.0f} us)"
    )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--replica":
        asyncio.run(replica(sys.argv[2]))
    else:
        count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
        others = int(sys.argv[2]) if len(sys.argv) > 2 else 3
        with server_url() as url:
            asyncio.run(run(url, count, others))
