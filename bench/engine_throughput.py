"""Asks created and answered per second, one Python process (one core), 64 in flight.

Run: ``.venv/bin/python bench/engine_throughput.py [SECONDS]``. Each unit is create + submit
(ACCEPTED) of a 4-question ask with 4 answers, against a local server.
"""

from __future__ import annotations

import asyncio
import sys
import time

from engine_common import four_questions, record, server_url

from bridge.models import Answer
from bridge.record import Responder
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore


async def run(url: str, seconds: float) -> None:
    store = RedisStore.from_url(url, prefix="tp")
    qs = four_questions()
    answers = tuple(Answer(question=q.question, selected=("Option 2",)) for q in qs.questions)
    who = Responder(user_id="U1", name="Una")
    done = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    stop = t0 + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            rec = record(qs)
            await store.create(rec)
            result = await store.submit(rec.id, who, answers)
            assert result.outcome is SubmitOutcome.ACCEPTED
            done += 1

    await asyncio.gather(*(worker() for _ in range(64)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(
        f"asks created+answered: {done} in {wall:.1f} s = {done / wall:.0f}/s "
        f"(client CPU {cpu / wall:.0%} of one core; target >= 1000/s)"
    )
    await store.aclose()


if __name__ == "__main__":
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    with server_url() as url:
        asyncio.run(run(url, secs))
