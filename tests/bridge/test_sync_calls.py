"""Synchronous ``ask_user`` calls as synchronous programs make them, over a real Redis.

A sync call used to run its ask on a loop of its own (``asyncio.run``) that closed with the call,
taking the store's wake-up listener, lease renewals and connections along: the second call in a
process never heard its answer (or failed outright). These tests make the calls the way a
synchronous agent loop does -- one after another, from several threads, mixed with async calls on
loops of their own -- while a teammate answers from another store, as a ``serve`` replica would,
and check each call returns its own answer promptly. The last one runs such a program in a fresh
interpreter in development mode and reads what it printed on its way out.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge import AskUserTool, loops, tools_interactive
from bridge.asking import AskPolicy, ChatHandler
from bridge.memory_poster import MemoryPoster
from bridge.record import AskRecord, AskStatus, Destination, Responder
from bridge.store.redis import RedisStore
from tests.support.redis_server import RedisServer
from tests.support.samples import FORMAT_QUESTION

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = ["Summary", "Detailed"]
WITHIN = 1.0
"""Seconds from a click to the waiting call's return that the issue allows."""


def question(text: str) -> list[dict[str, Any]]:
    return [{**FORMAT_QUESTION, "question": text}]


def chosen(result: object) -> list[str]:
    assert isinstance(result, str), result  # answers JSON, not the deferred dict
    return list(json.loads(result)["answers"][0]["selected"])


class Teammate:
    """Answers posted asks from a store of its own, on a loop in a thread of its own: another
    process as far as the asking store can tell (its own connections and subscription)."""

    def __init__(self, url: str, prefix: str, poster: MemoryPoster) -> None:
        self.poster = poster
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.store = RedisStore.from_url(url, prefix=prefix)
        self.clicks: dict[int, float] = {}
        """When each post was clicked (by its index), monotonic."""

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def posted(self, index: int) -> AskRecord:
        """The ``index``-th question set posted (waiting for it)."""
        record: AskRecord = self._run(asyncio.wait_for(self.poster.next_post(index), 60))
        return record

    def click(self, ask_id: str, option: int) -> float:
        """Pick ``option`` of the ask's first question; when the click was made (monotonic)."""
        clicked = time.monotonic()
        who = Responder(user_id="U0MATE", name="mate")
        result = self._run(self.store.pick(ask_id, who, 0, option))
        assert result.ok, result
        return clicked

    def answer(self, index: int, option: int, *, after: float = 0.0) -> threading.Thread:
        """In the background: wait for the ``index``-th post, then ``after`` seconds, then click
        ``option``; the click time lands in ``self.clicks[index]``."""

        def go() -> None:
            record = self.posted(index)
            time.sleep(after)
            self.clicks[index] = self.click(record.id, option)

        thread = threading.Thread(target=go, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self._run(self.store.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def rig(standalone: RedisServer) -> Iterator[tuple[AskUserTool, Teammate, RedisStore]]:
    """A sync agent's tool over a chat handler on a RedisStore (lease 1 s, so a call that
    outlives several depends on its renewals), and a teammate answering its posts."""
    prefix = f"t{secrets.token_hex(4)}"
    poster = MemoryPoster()
    store = RedisStore.from_url(standalone.url, prefix=prefix, lease_ttl=1.0)
    handler = ChatHandler(
        poster, store, Destination(platform="memory", channel="C1"), AskPolicy(wait=30)
    )
    [tool] = tools_interactive(callback=handler)
    mate = Teammate(standalone.url, prefix, poster)
    yield tool, mate, store
    mate.close()
    loops.run(store.aclose())


def test_ten_successive_sync_calls_each_resume_within_a_second_of_the_click(
    rig: tuple[AskUserTool, Teammate, RedisStore],
) -> None:
    tool, mate, _ = rig
    for n in range(10):
        answering = mate.answer(n, n % 2)
        result = tool(question(f"Call number {n}?"))
        resumed = time.monotonic()
        answering.join(10)
        assert chosen(result) == [OPTIONS[n % 2]], n
        assert resumed - mate.clicks[n] < WITHIN, (n, resumed - mate.clicks[n])


def test_a_sync_call_answered_after_the_lease_period_gets_the_answers(
    rig: tuple[AskUserTool, Teammate, RedisStore],
) -> None:
    tool, mate, store = rig
    mate.answer(0, 0).join(0)
    assert chosen(tool(question("First, quickly?"))) == ["Summary"]
    answering = mate.answer(1, 1, after=3 * store.lease_ttl)  # three leases after the post
    result = tool(question("Then after a while?"))
    answering.join(10)
    assert chosen(result) == ["Detailed"]  # not {"status": "deferred", ...}


def test_two_sync_calls_at_once_from_two_threads_each_get_their_own_answer(
    rig: tuple[AskUserTool, Teammate, RedisStore],
) -> None:
    tool, mate, _ = rig
    results: dict[str, object] = {}

    def call(text: str) -> None:
        results[text] = tool(question(text))

    threads = [threading.Thread(target=call, args=(text,)) for text in ("Left?", "Right?")]
    for thread in threads:
        thread.start()
    first, second = mate.posted(0), mate.posted(1)
    # answered in the reverse order of posting, each with another option
    mate.click(second.id, 1)
    mate.click(first.id, 0)
    for thread in threads:
        thread.join(30)
    by_text = {first.questions.questions[0].question: 0, second.questions.questions[0].question: 1}
    for text, result in results.items():
        assert chosen(result) == [OPTIONS[by_text[text]]], text
    assert len(results) == 2


def test_sync_then_async_on_another_loop_then_sync(
    rig: tuple[AskUserTool, Teammate, RedisStore],
) -> None:
    tool, mate, _ = rig
    mate.answer(0, 0)
    assert chosen(tool(question("Sync first?"))) == ["Summary"]
    mate.answer(1, 1)
    assert chosen(asyncio.run(tool.acall(question("Async on a loop of its own?")))) == ["Detailed"]
    mate.answer(2, 0)
    assert chosen(tool(question("Sync again?"))) == ["Summary"]
    mate.answer(3, 1)
    assert chosen(asyncio.run(tool.acall(question("And async on yet another?")))) == ["Detailed"]


def test_a_sync_call_while_an_async_one_waits_on_another_loop(
    rig: tuple[AskUserTool, Teammate, RedisStore],
) -> None:
    """Both at the same time: the store serves the caller's loop and the bridge loop at once,
    each through its own connections and subscription."""
    tool, mate, _ = rig
    async_result: dict[str, object] = {}
    waiting = threading.Thread(
        target=lambda: async_result.setdefault("r", asyncio.run(tool.acall(question("Async?"))))
    )
    waiting.start()
    first = mate.posted(0)
    answering = mate.answer(1, 1)
    assert chosen(tool(question("Sync meanwhile?"))) == ["Detailed"]
    answering.join(10)
    mate.click(first.id, 0)
    waiting.join(30)
    assert chosen(async_result["r"]) == ["Summary"]


def test_a_sync_call_from_a_coroutine_on_the_bridge_loop_is_refused_in_words() -> None:
    def sync_inside() -> None:
        async def nested() -> None:
            await asyncio.sleep(0)

        loops.run(nested())

    async def on_the_bridge_loop() -> None:
        sync_inside()

    with pytest.raises(RuntimeError, match=r"would wait for itself: await tool\.acall"):
        loops.run(on_the_bridge_loop())


PROGRAM = """
import asyncio, json, secrets, sys, threading, time
from bridge import tools_interactive
from bridge.asking import AskPolicy, ChatHandler
from bridge.memory_poster import MemoryPoster
from bridge.record import Destination, Responder
from bridge.store.redis import RedisStore

url, prefix = sys.argv[1], sys.argv[2]
poster = MemoryPoster()
store = RedisStore.from_url(url, prefix=prefix, lease_ttl=1.0)
[tool] = tools_interactive(
    callback=ChatHandler(poster, store, Destination(platform="memory", channel="C1"))
)
QUESTION = {"header": "Format", "options": [
    {"label": "Summary", "description": "Brief"}, {"label": "Detailed", "description": "Full"}]}


def teammate(count):
    async def go():
        other = RedisStore.from_url(url, prefix=prefix)
        for n in range(count):
            record = await poster.next_post(n)
            await other.pick(record.id, Responder(user_id="U1"), 0, n % 2)
        await other.aclose()
    asyncio.run(go())


mate = threading.Thread(target=teammate, args=(6,))
mate.start()
print(tool([{**QUESTION, "question": "One?"}]))
print(asyncio.run(tool.acall([{**QUESTION, "question": "Two?"}])))
both = [threading.Thread(target=lambda t=t: print(tool([{**QUESTION, "question": t}])))
        for t in ("Three?", "Four?")]
for t in both:
    t.start()
for t in both:
    t.join()
print(tool([{**QUESTION, "question": "Five?"}]))
print(tool([{**QUESTION, "question": "Six?"}]))
mate.join()
"""


def test_a_sync_program_leaves_no_task_pending_and_mixes_no_loops(
    standalone: RedisServer, tmp_path: Path
) -> None:
    """Development mode (asyncio debug, ResourceWarnings shown): at exit nothing is pending,
    nothing unclosed, nothing was used on a loop it does not belong to."""
    script = tmp_path / "agent.py"
    script.write_text(PROGRAM)
    done = subprocess.run(
        [sys.executable, "-X", "dev", str(script), standalone.url, f"t{secrets.token_hex(4)}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line)["answers"][0]["selected"] for line in done.stdout.splitlines()]
    assert len(answers) == 6 and all(len(a) == 1 for a in answers), done.stdout
    for trouble in (
        "Task was destroyed",
        "different loop",
        "attached to a different",
        "ResourceWarning",
        "unclosed",
        "Exception ignored",
        "Traceback",
        "was never awaited",
    ):
        assert trouble not in done.stderr, done.stderr


INTERRUPTED = """
import sys
from bridge import tools_interactive
from bridge.asking import AskPolicy, ChatHandler
from bridge.memory_poster import MemoryPoster
from bridge.record import Destination
from bridge.store.redis import RedisStore

store = RedisStore.from_url(sys.argv[1], prefix=sys.argv[2])
[tool] = tools_interactive(
    callback=ChatHandler(MemoryPoster(), store, Destination(platform="memory", channel="C1"))
)
QUESTION = {"question": "Wait for me?", "header": "Wait", "options": [
    {"label": "Yes", "description": "y"}, {"label": "No", "description": "n"}]}
print("asking", flush=True)
try:
    tool([QUESTION])
except KeyboardInterrupt:
    print("interrupted", flush=True)
    raise SystemExit(130)
"""


def test_ctrl_c_in_a_sync_call_closes_its_ask_as_cancelled(
    standalone: RedisServer, tmp_path: Path
) -> None:
    """As under ``asyncio.run``: the interrupt reaches the caller, and the ask it waited for is
    closed as cancelled first (its message re-rendered), not left pending with live buttons."""
    script = tmp_path / "agent.py"
    script.write_text(INTERRUPTED)
    prefix = f"t{secrets.token_hex(4)}"
    proc = subprocess.Popen(
        [sys.executable, str(script), standalone.url, prefix],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    store = RedisStore.from_url(standalone.url, prefix=prefix)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "asking"
        deadline = time.monotonic() + 60
        while not (pending := loops.run(store.list_pending())):
            assert time.monotonic() < deadline, "the ask was never created"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert out.strip() == "interrupted"
        ended = loops.run(store.get(pending[0].id))
        assert ended is not None and ended.status is AskStatus.CANCELLED
    finally:
        proc.kill()
        loops.run(store.aclose())


def test_a_loop_dropped_without_shutting_down_leaves_nothing_ignored(
    standalone: RedisServer,
) -> None:
    """pydantic-ai's ``run_sync`` keeps a loop per thread and never closes it; when such a loop
    is dropped, the garbage collector closes the store's listener on it: its cleanup must not
    await with no loop to await on ("Exception ignored in Wakeups._listen")."""
    store = RedisStore.from_url(standalone.url, prefix=f"t{secrets.token_hex(4)}")
    loop = asyncio.new_event_loop()
    loop.run_until_complete(store.wait("no-such-ask", 0.2))
    ignored: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, ignored.append
    try:
        del loop, store
        gc.collect()
    finally:
        sys.unraisablehook = hook
    ours = [u for u in ignored if _through_the_bridge(u.exc_traceback)]
    assert [f"{u.exc_type.__name__}: {u.exc_value}" for u in ours] == []


def _through_the_bridge(tb: Any) -> bool:
    """Whether a traceback passes through the bridge's own code (asyncio's complaints about a
    loop dropped unclosed are the dropper's, not the store's)."""
    bridge = str(ROOT / "bridge")
    return any(frame.filename.startswith(bridge) for frame, _ in traceback.walk_tb(tb))


def test_shutting_down_async_generators_while_the_store_listens_logs_nothing(
    standalone: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The OpenAI Agents SDK's ``run_sync`` calls ``shutdown_asyncgens()`` after every run on a
    loop it keeps: the store's listeners iterate no async generator it could close under them."""
    store = RedisStore.from_url(standalone.url, prefix=f"t{secrets.token_hex(4)}")
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        for _ in range(2):
            loop.run_until_complete(store.wait("no-such-ask", 0.2))
            loop.run_until_complete(loop.shutdown_asyncgens())
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        runner.run(store.aclose())
    assert errors == []
