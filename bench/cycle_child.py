"""Full ask cycles in one fresh process, for whichever ``bridge`` is first on ``sys.path``.

Run by ``engine_throughput.py`` (``python cycle_child.py URL SECONDS [--no-hiredis]
[--python-packing]``), once over
this checkout and once over an earlier revision extracted beside it, alternately, so both are
measured by the same code on the same machine in the same minutes. It therefore uses only what
every revision since issue 11 has: ``ChatHandler``, ``AskPolicy``, ``RedisStore.from_url``,
``listening`` and ``submit``, and the store hook that records where an ask was posted
(``message_posted`` now, ``set_message`` before), where the bench learns the message is on
screen: a person clicks after seeing it. ``--no-hiredis`` runs redis-py without hiredis, as the
project was installed when issue 11 measured it (hiredis was not a dependency then);
``--python-packing`` packs commands with redis-py's own Python code instead of hiredis's
(:mod:`bridge.store.redis.connect`), to show what that costs.

One cycle: a ``ChatHandler`` call creates a 4-question ask, posts it (a poster that shows
nothing), records the message and waits; a second store (its own connections, as a click
handler in another process has) submits 4 answers once the message is recorded; the wake-up
reaches the waiting call, which returns. 64 calls in flight. Prints one JSON line: cycles, wall
and client CPU seconds, the server's CPU seconds over the same phase, and where ``bridge`` was
imported from.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from question_texts import four_question_dicts


async def cycles(url: str, seconds: float) -> dict[str, Any]:
    from redis.asyncio import Redis

    from bridge.asking import AskPolicy, ChatHandler
    from bridge.deferred import AskUserDeferred
    from bridge.models import Answer, Question
    from bridge.poster import Poster
    from bridge.record import AskRecord, Destination, MessageRef, Responder
    from bridge.store.redis import RedisStore

    hook = "message_posted" if hasattr(RedisStore, "message_posted") else "set_message"

    class Shown(RedisStore):  # type: ignore[misc]
        shown: asyncio.Queue[str]

    async def recorded(self: Shown, ask_id: str, message: MessageRef) -> AskRecord | None:
        record: AskRecord | None = await getattr(RedisStore, hook)(self, ask_id, message)
        self.shown.put_nowait(ask_id)
        return record

    setattr(Shown, hook, recorded)

    class Quiet(Poster):  # type: ignore[misc]
        platform = "slack"

        def __init__(self) -> None:
            self.posted = 0

        async def post(self, record: AskRecord) -> MessageRef:
            self.posted += 1
            return MessageRef(platform="slack", channel="C0123456789", message_id=str(self.posted))

        async def update(self, record: AskRecord) -> None:
            return None

    questions = [Question.model_validate(q) for q in four_question_dicts()]
    answers = tuple(Answer(question=q.question, selected=("Option 2",)) for q in questions)
    who = Responder(user_id="U1", name="Una")
    agent = Shown.from_url(url, prefix="cycles")
    agent.shown = asyncio.Queue()
    clicks = RedisStore.from_url(url, prefix="cycles")
    handler = ChatHandler(
        Quiet(), agent, Destination(platform="slack", channel="C0123456789"), AskPolicy(wait=60)
    )
    await agent.listening()

    async def answerer() -> None:
        while True:
            await clicks.submit(await agent.shown.get(), who, answers)

    done = 0
    stop_at = 0.0

    async def caller() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            got: Any = await handler(questions, {"session": "bench"})
            assert not isinstance(got, AskUserDeferred), got  # answered (each version's shape)
            done += 1

    answering = [asyncio.create_task(answerer()) for _ in range(64)]  # held: running to the end
    stop_at = time.perf_counter() + 1.0  # warm up
    await asyncio.gather(*(caller() for _ in range(64)))
    raw = Redis.from_url(url)
    server0 = await _server_cpu(raw)
    done = 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    stop_at = t0 + seconds
    await asyncio.gather(*(caller() for _ in range(64)))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server = await _server_cpu(raw) - server0
    assert not any(task.done() for task in answering), "an answerer failed"
    # the stores are left open: the process ends next, and the code issue 11 found never
    # returns from closing a store while its subscription runs
    import bridge

    return {"cycles": done, "wall": wall, "cpu": cpu, "server": server, "bridge": bridge.__file__}


async def _server_cpu(raw: Any) -> float:
    info = await raw.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def main() -> None:
    url, seconds = sys.argv[1], float(sys.argv[2])
    if "--no-hiredis" in sys.argv:
        sys.modules["hiredis"] = None  # type: ignore[assignment]  # redis-py then parses in Python
    if "--python-packing" in sys.argv:
        import bridge.store.redis.connect as connecting

        connecting._hiredis_pack = None  # connections keep redis-py's own pack_command
    # not asyncio.run: it would cancel and await the open stores' tasks on the way out
    result = asyncio.new_event_loop().run_until_complete(cycles(url, seconds))
    print(json.dumps(result), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
