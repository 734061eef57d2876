"""Live pages on one replica: 1,000 open Server-Sent Event streams (``GET /a/<token>/events``)
and the memory and CPU of the ``serve`` process holding them.

Run: ``.venv/bin/python -m bench.web_streams [N]`` (default 1,000 streams).

One ``ask-bridge serve`` process (Slack over HTTP and the web platform, as
``bench/web_pages.py`` starts it) over one Redis; this process opens the streams as that many
browsers' ``EventSource`` would, each counted open once the server's first line (``: live``)
arrived. Six rounds, each read from ``/proc`` of the serving process:

1. N streams spread over N asks (a page each: N watchers, each reading its ask every 2 s);
2. N streams on one ask (one watcher), ended by an answer: the time until every one of the N
   pages was told;
3. to 6. each twice again, to see that what the first rounds left behind is reused, not grown.

Per round: RSS before, with N open and after they closed, the KB per stream, the CPU the
process spends holding them idle (10 s), and the Redis connections it opened for them. Pages
of the spread rounds close from the browser's side (the person leaves): "after" is read once
the process holds none of their connections (``/proc/net/tcp``; how long that took is printed)
and :data:`~platforms.web.live.POLL` seconds more, since it drops their streams and watchers at
its next read of their asks. Target (issue 30):
1,000 open live pages per replica with flat memory -- every one served (none refused), and no
later round taking the RSS past the peak of the first two (one of each kind) by more than a tenth
of what those took, give or take :data:`NOISE`: the streams' memory is reused, not kept. The
peak, not each kind's own growth: streams of either kind reuse what the other freed (a first
"one ask" round after a spread one grows the RSS by almost nothing).

Flat means no memory is kept per ask or per page: measured with ``tracemalloc`` in ``serve``
(seven spread rounds of 1,000: 7,000 asks), the Python memory after each round stayed within
0.9 MB of the first round's (at most about 100 bytes an ask, bounded caches filling; over rounds
of 500 it fell), and the asks' structures (watchers, the store's observers) were empty. What
RSS still moves between rounds is the allocator's (arenas and malloc's free lists reused, not
returned, in steps of about an arena), which is why the check allows :data:`NOISE` rather than
asking for no growth at all.
``--idle SECONDS`` shortens the idle measurement (the test suite runs a small bench so).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import aiohttp

from bench.slack_clicks import cpu_seconds, one_click_set
from bench.web_pages import Bed, bed
from bridge.models import Answer
from bridge.record import Responder
from platforms.web.live import POLL

IDLE = 10.0
"""Seconds the CPU of holding the streams is measured over."""
KEPT = 0.1
"""The share of the first two rounds' RSS growth later rounds may add to it: flat."""
NOISE = 2 * 2**20
"""Bytes the RSS moves by between rounds whatever their size: two of the allocator's 1 MB arenas
(Python's, and malloc's heap grows by such steps), as measured from round to round."""
OPENING = 100
"""Streams being opened at once (pages open over time, not in one instant)."""


def rss(pid: int) -> int:
    """Resident set size of process ``pid``, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def connections(pid: int, port: int) -> tuple[int, int]:
    """Process ``pid``'s TCP connections (established, or closed by the peer and not yet by it)
    on its ``port`` -- pages it still holds -- and to other ports (its Redis connections)."""
    owned = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed while listed: a stream that just ended
            continue
        if target.startswith("socket:["):
            owned.add(target[8:-1])
    held = other = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if inode in owned and state in ("01", "08"):  # ESTABLISHED, CLOSE_WAIT
            if int(local.split(":")[1], 16) == port:
                held += 1
            else:
                other += 1
    return held, other


async def let_go(pid: int, port: int, within: float) -> float:
    """Seconds until process ``pid`` holds no page on ``port`` (or ``within`` passed)."""
    start = time.perf_counter()
    # another process's sockets: nothing to wait on but /proc
    while connections(pid, port)[0] and time.perf_counter() - start < within:  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    took = time.perf_counter() - start
    await asyncio.sleep(POLL + 1.0)  # their streams let go at their asks' next read, and freed
    return took


class Streams:
    """N open event streams, each a task reading until the ask ends or it is cancelled."""

    def __init__(self, http: aiohttp.ClientSession) -> None:
        self.http = http
        self.tasks: list[asyncio.Task[None]] = []
        self.ended: list[float] = []
        self.refused: list[int] = []

    async def open(self, urls: list[str]) -> float:
        """Open a stream on each of ``urls``; seconds until every one was live."""
        gate = asyncio.Semaphore(OPENING)
        lives = [asyncio.get_running_loop().create_future() for _ in urls]
        start = time.perf_counter()

        async def one(url: str, live: asyncio.Future[None]) -> None:
            async with gate:
                response = await self.http.get(url)
                if response.status != 200:
                    self.refused.append(response.status)
                    response.release()
                    live.set_result(None)
                    return
                first = await response.content.readuntil(b"\n\n")
                assert first == b": live\n\n", first
                live.set_result(None)
            try:
                while line := await response.content.readuntil(b"\n\n"):
                    if line.startswith(b"event: ended"):
                        self.ended.append(time.perf_counter())
                        break
            finally:
                response.close()

        self.tasks = [asyncio.create_task(one(u, f)) for u, f in zip(urls, lives, strict=True)]
        await asyncio.gather(*lives)
        return time.perf_counter() - start

    async def leave(self) -> None:
        """Every page left (the browser closes its connection)."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def told(self, within: float) -> None:
        """Every stream has seen its ask end (or ``within`` seconds passed)."""
        async with asyncio.timeout(within):
            await asyncio.gather(*self.tasks)


async def one_round(b: Bed, http: aiohttp.ClientSession, n: int, spread: bool) -> dict[str, float]:
    assert b.serve.proc is not None
    pid = b.serve.proc.pid
    if spread:
        asks = [await b.web_ask(one_click_set()) for _ in range(n)]
        urls = [f"{url}/events" for _, url in asks]
    else:
        record, _ = await b.web_ask(one_click_set())
        urls = [f"{b.links.ask_url(record.id, b.person())}/events" for _ in range(n)]
    await asyncio.sleep(1.0)
    before, (_, redis_before) = rss(pid), connections(pid, b.serve.port)
    streams = Streams(http)
    opened = await streams.open(urls)
    if streams.refused:
        sys.exit(
            f"web_streams: {len(streams.refused)} of {n} streams refused: {streams.refused[:3]}"
        )
    await asyncio.sleep(1.0)
    at, (held, redis_at) = rss(pid), connections(pid, b.serve.port)
    assert held >= n, f"serve holds {held} pages, not {n}"
    cpu = cpu_seconds(pid)
    await asyncio.sleep(IDLE)
    idle = (cpu_seconds(pid) - cpu) / IDLE
    told = 0.0
    if spread:
        await streams.leave()
    else:
        question = record.questions.questions[0].question
        answer = Answer(question=question, selected=("Yes",))
        start = time.perf_counter()
        await b.store.submit(record.id, Responder(user_id="U0BENCH"), [answer])
        await streams.told(30)
        assert len(streams.ended) == n, f"{n - len(streams.ended)} pages never told"
        told = max(streams.ended) - start
    closed = await let_go(pid, b.serve.port, 40)
    return {
        "before": before,
        "at": at,
        "after": rss(pid),
        "opened": opened,
        "idle": idle,
        "redis": redis_at - redis_before,
        "closed": closed,
        "told": told,
    }


async def run(n: int) -> int:
    async with bed() as b:
        # a connection per stream, closed with it (not kept for reuse, which would hold the
        # server's side open after the stream ended)
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
            rounds = [
                ("spread over as many asks", await one_round(b, http, n, spread=True)),
                ("all on one ask", await one_round(b, http, n, spread=False)),
                ("spread again", await one_round(b, http, n, spread=True)),
                ("one ask again", await one_round(b, http, n, spread=False)),
                ("spread a third time", await one_round(b, http, n, spread=True)),
                ("one ask a third time", await one_round(b, http, n, spread=False)),
            ]
    print(f"web live pages: {n:,} open event streams on one serve process ({os.cpu_count()} cores)")
    for name, r in rounds:
        per = (r["at"] - r["before"]) / n / 1024
        print(
            f"  {name:25} RSS {r['before'] / 2**20:6.1f} MB -> {r['at'] / 2**20:6.1f} MB open "
            f"({per:5.1f} KB a stream) -> {r['after'] / 2**20:6.1f} MB closed; "
            f"opened in {r['opened']:.1f} s; {int(r['redis']):+d} Redis connections"
        )
        ending = (
            f"all {n:,} told it ended {r['told'] * 1000:.0f} ms after the answer"
            if r["told"]
            else "the pages left"
        )
        print(
            f"  {'':25} held idle: {r['idle']:.1%} of a core; {ending}; the server let go "
            f"of them {r['closed']:.1f} s later"
        )
    first = max(max(r["at"], r["after"]) for _, r in rounds[:2])
    took = first - rounds[0][1]["before"]
    allowed = KEPT * took + NOISE
    flat = True
    for name, r in rounds[2:]:
        grown = max(r["at"], r["after"]) - first
        flat = flat and grown <= allowed
        print(f"  {name}: RSS {grown / 1024:+,.0f} KB over the first two rounds' peak")
    print(
        f"  the first two rounds took {took / 1024:,.0f} KB; flat: every later round within "
        f"{allowed / 1024:,.0f} KB of their peak"
    )
    print(f"  {'PASS' if flat else 'FAIL'}: {n:,} streams, flat memory")
    return 0 if flat else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--idle" in args:
        at = args.index("--idle")
        IDLE = float(args[at + 1])
        del args[at : at + 2]
    sys.exit(asyncio.run(run(int(args[0]) if args else 1000)))
