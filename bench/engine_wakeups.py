"""What an answer costs the replicas that do not wait for it, and on a Cluster its nodes.

Run: ``.venv/bin/python -m bench.engine_wakeups [N] [REPLICAS] [--cluster]`` (default 2,000
answers, 3 replicas). Each replica is a separate process with a ``RedisStore`` whose wake-up
subscription is live (``listening()``), as every ``serve`` replica's is, but which waits for none
of these asks. This process then runs N answers: create, a waiting ``store.wait``, submit from a
second store, the wait returning. Each replica's CPU time over the run (from ``/proc``) divided by
N is what one answer costs a process that does not wait for it: zero when a wake-up reaches only
the process that waits. Baseline in the same run: this process's own CPU per answer (the waiter
and the answerer).

``--cluster``: against a fresh local 3-node Cluster, twice in the same run, the waiting process
first with plain PUBLISH wake-ups (sharded pub/sub switched off: how every wake-up went before
per-slot channels, the cluster bus carrying it to every node), then with sharded pub/sub; each
node's CPU per answer is printed beside the processes' (the asks are spread over the slots, so
over the nodes).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from bench.engine_common import four_questions, record, server_url
from bridge.models import Answer
from bridge.record import Responder
from bridge.store.redis import RedisStore
from tests.support.redis_server import redis_cluster

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


async def _never(self: RedisStore) -> bool:
    return False


async def answers(
    url: str, n: int, replicas: list[int], nodes: list[int], *, sharded: bool = True
) -> None:
    """N answers waited for in this process: the CPU per answer of each replica, of this process
    and of each Cluster node."""
    switch = (
        contextlib.nullcontext()
        if sharded
        else mock.patch.object(RedisStore, "_sharded_pubsub", _never)
    )
    with switch:
        waiting = RedisStore.from_url(url, prefix=PREFIX)
        await waiting.listening()
    clicks = RedisStore.from_url(url, prefix=PREFIX)
    qs = four_questions()
    chosen = [Answer(question=q.question, selected=("Option 1",)) for q in qs.questions]
    who = Responder(user_id="U1")
    warm = [record(qs) for _ in range(200)]  # every node's shard connection, before the clock
    for rec in warm:
        await waiting.create(rec)
    await asyncio.gather(*(waiting.wait(r.id, 0.2) for r in warm))
    await asyncio.sleep(0.5)
    pids = [*replicas, *nodes]
    before = [cpu_of(pid) for pid in pids]
    own0, t0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        rec = record(qs)
        await waiting.create(rec)
        wait = asyncio.create_task(waiting.wait(rec.id, 10))
        await asyncio.sleep(0)
        await clicks.submit(rec.id, who, chosen)
        assert await wait is not None
        await waiting.confirm(rec.id)
    own, wall = time.process_time() - own0, time.perf_counter() - t0
    await asyncio.sleep(0.5)  # let the replicas drain what they were sent
    spent = [(cpu_of(pid) - b) / n * 1e6 for pid, b in zip(pids, before, strict=True)]
    await clicks.aclose()
    await waiting.aclose()
    per_replica, per_node = spent[: len(replicas)], spent[len(replicas) :]
    mode = "" if not nodes else " (sharded pub/sub)" if sharded else " (plain PUBLISH)"
    print(
        f"{n:,} answers{mode} in {wall:.1f} s ({wall / n * 1e3:.2f} ms each, one at a time); "
        f"{len(replicas)} other replicas listening"
    )
    print(
        f"  CPU per answer in each other replica: {', '.join(f'{p:.0f}' for p in per_replica)} us "
        f"(baseline: the waiting process itself, waiter and answerer, {own / n * 1e6:.0f} us)"
    )
    if nodes:
        print(
            f"  CPU per answer in each Cluster node: {', '.join(f'{p:.0f}' for p in per_node)} us"
            f" (sum {sum(per_node):.0f} us)"
        )


@contextlib.contextmanager
def started(url: str, count: int) -> Iterator[list[int]]:
    """``count`` listening replica processes; their pids."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.engine_wakeups", "--replica", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(10)


def main(n: int, replicas: int, cluster: bool) -> None:
    if not cluster:
        with server_url() as url, started(url, replicas) as pids:
            asyncio.run(answers(url, n, pids, []))
        return
    with tempfile.TemporaryDirectory() as tmp, redis_cluster(Path(tmp)) as servers:
        url = f"redis+cluster://127.0.0.1:{servers[0].port}"
        nodes = [s.proc.pid for s in servers if s.proc is not None]
        with started(url, replicas) as pids:
            asyncio.run(answers(url, n, pids, nodes, sharded=False))
            asyncio.run(answers(url, n, pids, nodes, sharded=True))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--replica":
        asyncio.run(replica(sys.argv[2]))
    else:
        args = [a for a in sys.argv[1:] if a != "--cluster"]
        main(
            int(args[0]) if args else 2000,
            int(args[1]) if len(args) > 1 else 3,
            "--cluster" in sys.argv,
        )
