"""Full ask cycles per client CPU-second, one Python process, 64 calls in flight.

Run: ``.venv/bin/python bench/engine_throughput.py [SECONDS]``. One cycle is what a user's tool
call costs end to end: a ``ChatHandler`` call creates a 4-question ask, posts it (a poster that
shows nothing), records the message and waits; the answering side (its own store, so its own
connections, as a click handler in another process would have) submits 4 answers as soon as the
message is recorded (a person clicks once it is on screen); the wake-up reaches the waiting call
with the record, which confirms the answer and returns. Both sides run in this process, so its
CPU time is the whole client cost of a cycle.

Baseline in the same run: create + submit only (no waiting call, no wake-up, no confirm), the figure
an earlier version of this bench reported.

The server's CPU over each phase (INFO cpu) is printed per cycle too, and what it implies: how many
cycles per second one Redis core carries, so how many such client processes one Redis serves.
"""

from __future__ import annotations

import asyncio
import sys
import time

from engine_common import NullPoster, four_questions, record, server_cpu, server_url
from redis.asyncio import Redis

from bridge.asking import AskPolicy, ChatHandler
from bridge.models import Answer
from bridge.record import AskRecord, Destination, MessageRef, Responder
from bridge.result import AskUserAnswered
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore
from bridge.store.redis_connect import DEFAULT_MAX_CONNECTIONS, connect

IN_FLIGHT = 64


class ShownStore(RedisStore):
    """The agent's store, telling the bench when an ask's message is on screen (recorded by
    ``message_posted``): a person clicks after seeing it, not while it is being posted."""

    shown: asyncio.Queue[str]

    async def message_posted(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        record = await super().message_posted(ask_id, message)
        self.shown.put_nowait(ask_id)
        return record


async def full_cycles(url: str, seconds: float) -> tuple[int, float, float, float]:
    """Cycles done, wall seconds, client CPU seconds, server CPU seconds."""
    client, subscriber = connect(url, max_connections=DEFAULT_MAX_CONNECTIONS)
    agent = ShownStore(client, subscriber, prefix="tp")
    agent.shown = asyncio.Queue()
    clicks = RedisStore.from_url(url, prefix="tp")
    poster = NullPoster()
    handler = ChatHandler(
        poster, agent, Destination(platform="slack", channel="C0123456789"), AskPolicy(wait=60)
    )
    qs = four_questions()
    who = Responder(user_id="U1", name="Una")
    answers = tuple(Answer(question=q.question, selected=("Option 2",)) for q in qs.questions)
    await agent.listening()

    async def answerer() -> None:
        while True:
            ask_id = await agent.shown.get()
            result = await clicks.submit(ask_id, who, answers)
            assert result.outcome is SubmitOutcome.ACCEPTED

    done = 0
    stop_at = 0.0

    async def caller() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            got = await handler(qs.questions, {"session": "bench"})
            assert isinstance(got, AskUserAnswered) and len(got.answers) == 4
            done += 1

    answering = [asyncio.create_task(answerer()) for _ in range(IN_FLIGHT)]
    stop_at = time.perf_counter() + 1.0  # warm up
    await asyncio.gather(*(caller() for _ in range(IN_FLIGHT)))
    done = 0
    raw = Redis.from_url(url)
    server0 = await server_cpu(raw)
    cpu0, t0 = time.process_time(), time.perf_counter()
    stop_at = t0 + seconds
    await asyncio.gather(*(caller() for _ in range(IN_FLIGHT)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server = await server_cpu(raw) - server0
    await raw.aclose()
    for task in answering:
        task.cancel()
    await asyncio.gather(*answering, return_exceptions=True)
    await clicks.aclose()
    await agent.aclose()
    return done, wall, cpu, server


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

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server = await server_cpu(raw) - server0
    await raw.aclose()
    await store.aclose()
    return done, wall, cpu, server


async def run(url: str, seconds: float) -> None:
    n, wall, cpu, server = await full_cycles(url, seconds)
    b, bwall, bcpu, bserver = await create_submit(url, seconds)
    print(f"one process, {IN_FLIGHT} in flight, 4-question asks, {seconds:g} s each")
    print(
        f"full cycle (ChatHandler call -> submit -> wake-up -> return -> confirm): "
        f"{n / cpu:,.0f} per client CPU-second ({n / wall:,.0f}/s wall, {n} cycles, "
        f"CPU {cpu / wall:.0%} of one core; target >= 2,000 per CPU-second)"
    )
    print(
        f"baseline create + submit only:   {b / bcpu:,.0f} per client CPU-second "
        f"({b / bwall:,.0f}/s wall, CPU {bcpu / bwall:.0%})"
    )
    print(
        f"server CPU per full cycle: {server / n * 1e6:,.0f} us (create + submit only: "
        f"{bserver / b * 1e6:,.0f} us): one Redis core carries about {n / server:,.0f} full "
        f"cycles per second, {n / server / (n / cpu):.1f} client processes like this one"
    )


if __name__ == "__main__":
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    with server_url() as url:
        asyncio.run(run(url, secs))
