"""Full ask cycles per client CPU-second, one Python process, 64 calls in flight, beside the code
issue 11 measured, in the same run.

Run: ``.venv/bin/python -m bench.engine_throughput [SECONDS] [--before REV|none]``. One cycle is
what a user's tool call costs end to end (``cycle_child.py`` says exactly what): a
``ChatHandler`` call creates a 4-question ask, posts it, records the message and waits; a second
store submits 4 answers once the message is recorded; the wake-up reaches the waiting call,
which returns. Both sides run in one fresh process, so its CPU time is the whole client cost of
a cycle, and the server's CPU over the phase (INFO cpu) is its cost.

Baselines in the same run, each in its own fresh process, alternating with this checkout's:

* ``--before REV`` (default ``1a9ff19``, the code as issue 11 found it, run as it was installed
  then: without hiredis; any other revision with it): extracted from git beside this checkout.
  Machines differ several times over in speed, so the issue's figures (640 cycles per client
  CPU-second, target 2,000) are met here as a ratio: at least 2,000 / 640 = 3.1 times the
  cycles per CPU-second of that code.
* this checkout packing commands with redis-py's Python code instead of hiredis's.
* create + submit only (no waiting call, no wake-up, no confirm), in this process: the figure an
  earlier version of this bench reported.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from redis.asyncio import Redis

from bench.engine_common import (
    ISSUE_REV,
    before_argument,
    extract_revision,
    four_questions,
    record,
    run_child,
    server_cpu,
    server_url,
)
from bridge.models import Answer
from bridge.record import Responder
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore

CHILD = Path(__file__).resolve().parent / "cycle_child.py"
ISSUE_RATIO = 2000 / 640
"""The issue's target over its measurement of the code it found: 2,000 cycles per client
CPU-second, from about 640."""
ROUNDS = 3


async def create_submit(url: str, seconds: float) -> tuple[int, float, float, float]:
    """The baseline: create + submit only, the answer left for a later hand-off."""
    store = RedisStore.from_url(url, prefix="tp0")
    qs = four_questions()
    answers = tuple(Answer(question=q.question, selected=("Option 2",)) for q in qs.questions)
    who = Responder(user_id="U1", name="Una")
    done = 0
    raw = Redis.from_url(url)
    server0 = await server_cpu(raw)
    cpu0, t0 = time.process_time(), time.perf_counter()
    stop_at = t0 + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            rec = record(qs)
            await store.create(rec)
            result = await store.submit(rec.id, who, answers)
            assert result.outcome is SubmitOutcome.ACCEPTED
            done += 1

    await asyncio.gather(*(worker() for _ in range(64)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server = await server_cpu(raw) - server0
    await raw.aclose()
    await store.aclose()
    return done, wall, cpu, server


def rate(runs: list[dict[str, float]]) -> float:
    """Median cycles per client CPU-second over ``runs``."""
    return statistics.median(r["cycles"] / r["cpu"] for r in runs)


def main() -> None:
    args = sys.argv[1:]
    before = before_argument(args, ISSUE_REV)
    seconds = float(args[0]) if args else 5.0
    with tempfile.TemporaryDirectory() as tmp, server_url() as url:
        old = extract_revision(before, Path(tmp)) if before else None
        # issue 11's code ran without hiredis, as it was installed then; any later one with it
        as_installed = ("--no-hiredis",) if before == ISSUE_REV else ()
        named = (
            f"the code issue 11 found ({before}, without hiredis)"
            if before == ISSUE_REV
            else f"{before}'s code"
        )
        now: list[dict[str, float]] = []
        python: list[dict[str, float]] = []
        then: list[dict[str, float]] = []
        for _ in range(ROUNDS):  # alternating, so a machine that slows down slows all alike
            now.append(run_child(CHILD, url, str(seconds)))
            python.append(run_child(CHILD, url, str(seconds), "--python-packing"))
            if old is not None:
                then.append(run_child(CHILD, url, str(seconds), *as_installed, code=old))
        b, bwall, bcpu, bserver = asyncio.run(create_submit(url, seconds))
    last = now[-1]
    runs = ", ".join(f"{r['cycles'] / r['cpu']:,.0f}" for r in now)
    print(f"one process, 64 in flight, 4-question asks, {seconds:g} s a run, {ROUNDS} runs each")
    print(
        f"full cycle (ChatHandler call -> submit -> wake-up -> return -> confirm): "
        f"{rate(now):,.0f} per client CPU-second (median; runs: "
        f"{runs}; "
        f"{last['cycles'] / last['wall']:,.0f}/s wall, CPU {last['cpu'] / last['wall']:.0%} "
        "of one core)"
    )
    if then:
        ratio = rate(now) / rate(then)
        judged = (
            f" (target >= {ISSUE_RATIO:.2f}x: the issue's 2,000 from 640) -> "
            f"{'met' if ratio >= ISSUE_RATIO else 'NOT met'}"
            if before == ISSUE_REV
            else ""
        )
        print(
            f"{named}, same run: {rate(then):,.0f} per client CPU-second: now {ratio:.2f}x{judged}"
        )
    print(
        f"commands packed by redis-py's Python code instead of hiredis: {rate(python):,.0f} "
        f"per client CPU-second ({rate(now) / rate(python) - 1:+.0%} with hiredis)"
    )
    print(
        f"baseline create + submit only: {b / bcpu:,.0f} per client CPU-second "
        f"({b / bwall:,.0f}/s wall, CPU {bcpu / bwall:.0%})"
    )
    server = statistics.median(r["server"] / r["cycles"] for r in now)
    print(
        f"server CPU per full cycle: {server * 1e6:,.0f} us"
        + (
            f" ({named}: "
            f"{statistics.median(r['server'] / r['cycles'] for r in then) * 1e6:,.0f} us)"
            if then
            else ""
        )
        + f"; create + submit only: {bserver / b * 1e6:,.0f} us: one Redis core carries about "
        f"{1 / server:,.0f} full cycles per second, {1 / (server * rate(now)):.1f} client "
        "processes like this one"
    )


if __name__ == "__main__":
    main()
