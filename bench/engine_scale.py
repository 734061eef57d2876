"""100,000 pending asks: ``ask-bridge list`` over them, then all of them expiring at once.

Run: ``.venv/bin/python bench/engine_scale.py [N [N_RENDER]]`` (default 100,000 both). Creates N
posted 4-question asks that expire together, then

* runs ``ask-bridge list`` (a fresh process, as an operator would) over them: wall and CPU time,
  the whole listing and its first page (``--limit 50``, when the command pages);
* expires them with one sweep: the store part (``Store.sweep``);
* then N_RENDER other asks expiring together as the sweeper handles them (``Sweeper.sweep_once``:
  store part and re-rendering each as expired through a poster whose every update takes 20 ms, a
  platform's API round trip).

Baseline in the same run: creating the N asks (concurrently, 500 at a time).
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import time

from engine_common import NullPoster, four_questions, record, server_url

from bridge.record import AskRecord, MessageRef
from bridge.store.redis import RedisStore
from bridge.sweeper import Sweeper

PREFIX = "scale"


class SlowPoster(NullPoster):
    """Every update takes as long as a platform's API round trip."""

    updates = 0

    async def update(self, record: AskRecord) -> None:
        await asyncio.sleep(0.02)
        self.updates += 1


def cli(url: str, *args: str) -> tuple[float, float, int]:
    """Wall and CPU seconds of one ``ask-bridge`` command, and its lines of output."""
    env = {**os.environ, "REDIS_URL": url, "ASK_BRIDGE_KEY_PREFIX": PREFIX}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "bridge.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        return wall, cpu, -1
    return wall, cpu, len(out.stdout.splitlines())


async def create(store: RedisStore, n: int, expires: float) -> float:
    qs = four_questions()
    message = MessageRef(platform="slack", channel="C0123456789", message_id="1700000000.0001")
    t0 = time.perf_counter()
    for start in range(0, n, 500):
        recs = [record(qs) for _ in range(min(500, n - start))]
        for r in recs:
            r.expires_at = expires
        await asyncio.gather(*(store.create(r) for r in recs))
        await asyncio.gather(*(store.set_message(r.id, message) for r in recs))
    return time.perf_counter() - t0


async def run(url: str, n: int, n_render: int) -> None:
    store = RedisStore.from_url(url, prefix=PREFIX)
    expires = time.time() + 3600
    made = await create(store, n, expires)
    print(f"{n:,} pending 4-question asks (baseline: created and posted in {made:.1f} s)")
    wall, cpu, lines = cli(url, "list")
    print(f"  ask-bridge list             {wall:6.1f} s wall  {cpu:6.1f} s CPU  {lines:,} lines")
    wall, cpu, lines = cli(url, "list", "--limit", "50")
    if lines < 0:
        print("  ask-bridge list --limit 50  (no paging)")
    else:
        print(f"  ask-bridge list --limit 50  {wall:6.1f} s wall  {cpu:6.1f} s CPU  {lines} lines")
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    expired = await store.sweep(now=expires + 1)
    swept, swept_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(
        f"  expiry, store part          {swept:6.1f} s wall  {swept_cpu:6.1f} s CPU  "
        f"{len(expired):,} expired (target < 10 s)"
    )
    await store.aclose()

    # the same storm again, as the sweeper runs it: store part and re-renders
    store = RedisStore.from_url(url, prefix=PREFIX + "2")
    expires = time.time() + 3600
    await create(store, n_render, expires)
    poster = SlowPoster()
    sweeper = Sweeper(store, {"slack": poster})
    t0 = time.perf_counter()
    shown = await sweeper.sweep_once(now=expires + 1)
    took = time.perf_counter() - t0
    print(
        f"  {n_render:,} expiring + re-render (20 ms per update)  {took:6.1f} s wall  "
        f"{len(shown):,} shown, {poster.updates:,} updates"
    )
    await store.aclose()


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rendered = int(sys.argv[2]) if len(sys.argv) > 2 else count
    with server_url() as url:
        asyncio.run(run(url, count, rendered))
