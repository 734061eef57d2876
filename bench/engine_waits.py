"""Concurrent waiting ``ask_user`` calls in one fresh process: RSS per call, Redis connections,
and that every call returns its own answer.

Run: ``.venv/bin/python -m bench.engine_waits [N ...] [--questions 1,4] [--texts realistic,repeated]
[--burst] [--elsewhere] [--entries ainvoke,acall] [--not-held]`` (default 10,000, both kinds of
text, through ``ainvoke``). For each N, for 1 and 4 questions
per ask, and for each kind of text, a fresh child process imports the bridge, opens a
``RedisStore``, makes one whole warm-up call (so lazy imports, the connections and the scripts are
in place), then starts N tool calls (:data:`WAVE` at a time, or all at once with ``--burst``)
through ``AskUserTool.ainvoke`` (or each entry point ``--entries`` names: ``acall``, the
documented async form, returns the result's content) with the model's arguments as decoded JSON --
exactly what a framework hands over, and held by the bench as a framework holds them (with
``--not-held`` handed over and kept by nobody else, as a host that decodes each call's JSON text
for the call: what the call itself keeps of them shows) -- each validated, created,
posted (a poster that shows nothing) and waiting. RSS is read once every call is waiting *and* the
server has run no command for a second (INFO commandstats), so every call's status check has run,
after a collection. Connections are counted with CLIENT LIST while every call waits. Then a second
store answers each ask (500 in flight), and each call must return its own answer: in the same
process, or with ``--elsewhere`` in another one, as a ``serve`` replica's clicks would, so the
waiting process only receives -- the wake-ups (an answer's carries its record) can then come faster
than it reads them, and the server drops a subscriber that overruns its output buffer limit (``INFO
stats`` counts those; the store subscribes anew and re-reads its waiting asks).

The texts: ``realistic`` (reported first) is distinct prose per call, as real asks are
(:func:`bench.engine_common.prose_questions`: about 2.9 KB of JSON for four questions, every
question and description different per call); ``repeated`` is the same realistic-size question set
for every call but a call number in its first question (:func:`bench.engine_common.four_questions`),
whose option texts repeat within the ask too -- it flatters whatever the call keeps compressed.

Baseline in the same run: RSS per bare asyncio task parked on a future, N of them in a fresh
process of their own (the floor).
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
from collections.abc import Awaitable
from typing import Any

from redis.asyncio import Redis

from bench.engine_common import NullPoster, four_questions, prose_questions, rss, server_url
from bridge.asking import AskPolicy, ChatHandler
from bridge.models import Answer
from bridge.record import AskRecord, Destination, Responder
from bridge.result import ToolOutcome
from bridge.store.redis import RedisStore
from bridge.tool import AskUserTool

WAVE = 1000
"""Calls started at once, each wave once the previous one is posted: calls arrive over time, so
RSS shows what waiting calls hold rather than the peak of validating 100,000 question sets in the
same instant (``--burst`` starts them all at once: that peak stays in RSS, freed but not returned
to the system)."""


TEXTS = ("realistic", "repeated")


def arguments(texts: str, n_questions: int, i: int) -> object:
    """The ``questions`` argument as a model sends it (fresh objects per call)."""
    if texts == "realistic":
        return json.loads(json.dumps(prose_questions(n_questions, i)))
    qs = four_questions().model_dump(mode="json")["questions"][:n_questions]
    qs[0]["question"] = f"{qs[0]['question']} (call {i})"
    return json.loads(json.dumps(qs))


async def quiet(raw: Redis) -> None:
    """Return once the server ran no command for a second (INFO aside): whatever the waiting
    calls send when they start waiting has been sent and run."""
    last = -1
    while True:
        stats = await raw.info("commandstats")
        total = sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")
        if total == last:
            return
        last = total
        await asyncio.sleep(1.0)


async def floor(n: int) -> None:
    """RSS per bare asyncio task parked on a future, in a fresh process of its own."""
    gc.collect()
    before = rss()
    loop = asyncio.get_running_loop()
    futs = [loop.create_future() for _ in range(n)]
    parked = [asyncio.create_task(asyncio.wait_for(f, 600)) for f in futs]
    await asyncio.sleep(0.1)
    gc.collect()
    print(json.dumps({"floor_per_task": (rss() - before) / n}))
    for f in futs:
        f.set_result(None)
    await asyncio.gather(*parked)


ENTRIES = ("ainvoke", "acall")


def own_answer(out: ToolOutcome | str | dict[str, Any]) -> tuple[str, str] | None:
    """The first answer of a returned call: its typed text (the answerer wrote the ask id) and
    its question; ``None`` if deferred to the feed. From the outcome, or from the JSON text
    ``acall`` returns."""
    if isinstance(out, ToolOutcome):
        if out.answers is None:
            return None
        return out.answers[0].other_text or "", out.answers[0].question
    if isinstance(out, dict):  # acall's deferred result
        return None
    first = json.loads(out)["answers"][0]
    return str(first["other_text"] or ""), str(first["question"])


async def child(
    url: str,
    n: int,
    n_questions: int,
    wave: int,
    texts: str,
    elsewhere: bool,
    entry: str = "ainvoke",
    held: bool = True,
) -> None:
    prefix = f"waits{n_questions}x{n}{texts}{entry}{int(held)}"
    store = RedisStore.from_url(url, prefix=prefix)
    poster = NullPoster()
    handler = ChatHandler(
        poster, store, Destination(platform="slack", channel="C0123456789"), AskPolicy(wait=600)
    )
    tool = AskUserTool(callback=handler)
    raw = Redis.from_url(url, decode_responses=True)

    poster.queue = asyncio.Queue()
    warm = asyncio.create_task(tool.ainvoke(arguments(texts, n_questions, -1)))
    posted = await poster.queue.get()
    await store.submit(
        posted.id,
        Responder(user_id="U1"),
        [
            Answer(question=q.question, selected=(q.options[0].label,))
            for q in posted.questions.questions
        ],
    )
    await warm
    poster.queue = None

    call = tool.acall if entry == "acall" else tool.ainvoke
    args = [arguments(texts, n_questions, i) for i in range(n)] if held else []
    gc.collect()
    before = rss()
    # ``args`` stays referenced, as a framework holds a tool call's arguments until it returns:
    # what the call itself keeps is measured, not the arguments the bench built; not held, each
    # call's are made as it starts and handed over
    calls: list[asyncio.Task[ToolOutcome | str | dict[str, Any]]] = []
    t0 = time.perf_counter()
    for start in range(0, n, wave):
        calls += [
            asyncio.create_task(call(args[i] if held else arguments(texts, n_questions, i)))
            for i in range(start, min(n, start + wave))
        ]
        while poster.posted < len(calls) + 1:  # noqa: ASYNC110 (polling a counter)
            await asyncio.sleep(0.01)
    await quiet(raw)  # every call's status check (and lease) has reached the server
    ready = time.perf_counter() - t0
    gc.collect()
    during = rss()
    clients = await raw.client_list()
    conns = len(clients) - 1  # minus the counting connection
    asks = await store.list_pending()
    mine = {r.id: r.questions.questions[0].question for r in asks}
    dropped = await buffer_drops(raw)
    t1 = time.perf_counter()
    answering: Awaitable[object]
    if elsewhere:  # as a serve replica's clicks would: the waiting process only receives
        answerer = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.engine_waits", "--answer", url, prefix
        )
        answering = answerer.wait()
    else:
        answering = asyncio.create_task(answer_all(url, prefix, asks))
    del asks
    # each result checked as it comes and then dropped, as a framework hands it on to its model
    waiting = set(calls)
    calls.clear()
    returned: asyncio.Queue[asyncio.Task[ToolOutcome | str | dict[str, Any]]] = asyncio.Queue()
    for task in waiting:
        task.add_done_callback(returned.put_nowait)
    ok = deferred = 0
    while waiting:
        done = await returned.get()
        waiting.discard(done)
        got = own_answer(done.result())
        if got is None:  # the answer went to the feed: the call's lease had lapsed
            deferred += 1
            continue
        ask_id, question = got
        ok += mine.get(ask_id) == question
    answered = time.perf_counter() - t1
    await answering
    dropped = await buffer_drops(raw) - dropped
    print(
        json.dumps(
            {
                "n": n,
                "entry": entry,
                "held": held,
                "questions": n_questions,
                "texts": texts,
                "wave": wave,
                "rss_per_call": (during - before) / n,
                "connections": conns,
                "ok": ok,
                "deferred": deferred,
                "ready_s": ready,
                "answer_all_s": answered,
                "buffer_drops": dropped,
                "resubscriptions": store.resubscriptions - 1,  # the first is no drop
            }
        )
    )
    await raw.aclose()
    await store.aclose()


async def answer_all(url: str, prefix: str, asks: list[AskRecord] | None = None) -> None:
    """Answer each pending ask (500 in flight) with an answer naming it, so each call can be
    checked to return its own."""
    answering = RedisStore.from_url(url, prefix=prefix)
    asks = await answering.list_pending() if asks is None else asks
    for start in range(0, len(asks), 500):
        await asyncio.gather(
            *(
                answering.submit(
                    r.id,
                    Responder(user_id="U1"),
                    [
                        Answer(question=q.question, selected=(q.options[1].label,), other_text=r.id)
                        for q in r.questions.questions
                    ],
                )
                for r in asks[start : start + 500]
            )
        )
    await answering.aclose()


async def buffer_drops(raw: Redis) -> int:
    """Subscribers the server has disconnected for overrunning their output buffer limit."""
    stats = await raw.info("stats")
    return int(stats.get("client_output_buffer_limit_disconnections", 0))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        url, n, n_questions, wave, texts, where, entry, kept = sys.argv[2:10]
        asyncio.run(
            child(url, int(n), int(n_questions), int(wave), texts, where == "1", entry, kept == "1")
        )
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--answer":
        asyncio.run(answer_all(sys.argv[2], sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--floor":
        asyncio.run(floor(int(sys.argv[2])))
        return
    args = sys.argv[1:]
    shapes = (1, 4)
    if "--questions" in args:
        at = args.index("--questions")
        shapes = tuple(int(q) for q in args[at + 1].split(","))
        del args[at : at + 2]
    kinds = TEXTS
    if "--texts" in args:
        at = args.index("--texts")
        kinds = tuple(args[at + 1].split(","))
        del args[at : at + 2]
        if not set(kinds) <= set(TEXTS):
            sys.exit(f"--texts: one or more of {', '.join(TEXTS)}")
    elsewhere = "--elsewhere" in args
    if elsewhere:
        args.remove("--elsewhere")
    held = "--not-held" not in args
    if not held:
        args.remove("--not-held")
    entries: tuple[str, ...] = ("ainvoke",)
    if "--entries" in args:
        at = args.index("--entries")
        entries = tuple(args[at + 1].split(","))
        del args[at : at + 2]
        if not set(entries) <= set(ENTRIES):
            sys.exit(f"--entries: one or more of {', '.join(ENTRIES)}")
    wave = WAVE
    if "--burst" in args:
        args.remove("--burst")
        wave = 0
    sizes = [int(a) for a in args] or [10_000]
    with server_url() as url:
        for n in sizes:
            out = subprocess.run(
                [sys.executable, "-m", "bench.engine_waits", "--floor", str(n)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            bare = json.loads(out.strip().splitlines()[-1])["floor_per_task"]
            for q in shapes:
                for texts in kinds:
                    for entry in entries:
                        run(url, n, q, wave, texts, bare, elsewhere, entry, held)


def run(
    url: str,
    n: int,
    q: int,
    wave: int,
    texts: str,
    bare: float,
    elsewhere: bool,
    entry: str = "ainvoke",
    held: bool = True,
) -> None:
    """One child process: ``n`` calls of ``q`` questions with ``texts`` through ``entry``; print
    its figures."""
    where = "1" if elsewhere else "0"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.engine_waits",
            "--child",
            url,
            str(n),
            str(q),
            str(wave or n),
            texts,
            where,
            entry,
            "1" if held else "0",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"{n:,} calls, {q} question(s), {texts} texts: the child failed\n{done.stderr}")
    r = json.loads(done.stdout.strip().splitlines()[-1])
    started = "all at once" if r["wave"] >= n else f"{r['wave']:,} at a time"
    print(
        f"{r['n']:,} waiting ask_user calls through {entry} (arguments "
        f"{'held by the bench' if held else 'handed over, kept by nobody else'}), "
        f"{r['questions']} question(s), {texts} texts, fresh process, started {started}: "
        f"{r['rss_per_call'] / 1024:.1f} KB RSS per call (floor: a "
        f"bare parked task in a fresh process {bare / 1024:.2f} KB); {r['connections']} Redis "
        f"connections; {r['ok']:,}/{r['n']:,} returned their own answer, {r['deferred']:,} "
        f"deferred to the feed (all waiting after {r['ready_s']:.1f} s, all answered "
        f"{'by another process' if elsewhere else 'by this one'} and returned in "
        f"{r['answer_all_s']:.1f} s; the wake-up subscription dropped by the server for "
        f"overrunning its output buffer {r['buffer_drops']} time(s), made anew "
        f"{r['resubscriptions']} time(s)); target <= 8 KB (4 questions), <= 4 connections"
    )


if __name__ == "__main__":
    main()
