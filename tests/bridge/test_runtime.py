"""The runtime shared by ``ask``, ``serve`` and ``mcp``, in-process with fake platforms.

A fake platform is a real :class:`~bridge.platform.Platform`: a memory poster and a receiver that
either serves an HTTP route (on the runtime's one server) or holds a "connection" (a task).
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from collections.abc import Sequence

import aiohttp
import pytest
from aiohttp import web

from bridge.asking import AskPolicy, ChatHandler
from bridge.errors import NotAnswered
from bridge.http_server import CannotListen
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.platform import (
    HttpRoute,
    Platform,
    PlatformUnavailable,
    Receiver,
    configured_platforms,
)
from bridge.record import AskRecord, AskStatus, Destination, MessageRef, Responder
from bridge.runtime import Runtime, chat_policy, serving, settle_heap, stop_on_signals
from bridge.settings import EngineSettings
from bridge.store.base import Store
from bridge.store.memory import MemoryStore
from bridge.tool import tools_interactive
from tests.support.engine_fixtures import new_record


class WatchedPoster(MemoryPoster):
    """A memory poster whose message updates can be awaited."""

    def __init__(self, platform: str) -> None:
        super().__init__(platform)
        self.shown = asyncio.Event()

    async def update(self, record: AskRecord) -> None:
        await super().update(record)
        self.shown.set()


class FakeReceiver:
    def __init__(self, name: str, path: str | None, fail: Exception | None) -> None:
        self.name, self.path, self.fail = name, path, fail
        self.receiving = False
        self.drained_after_stop: bool | None = None

    def routes(self) -> Sequence[HttpRoute]:
        if self.path is None:
            return ()

        async def handler(request: web.Request) -> web.StreamResponse:
            return web.Response(text=f"{self.name} got {await request.text()}")

        return (HttpRoute("POST", self.path, handler),)

    async def run(self, ready: asyncio.Event) -> None:
        if self.fail is not None:
            raise self.fail
        self.receiving = True
        try:
            ready.set()
            await asyncio.Event().wait()
        finally:
            self.receiving = False

    async def drain(self) -> None:
        self.drained_after_stop = not self.receiving


class FakePlatform:
    def __init__(
        self, name: str, path: str | None = None, *, fail: Exception | None = None
    ) -> None:
        self.name = name
        self.path, self.fail = path, fail
        self.the_poster = WatchedPoster(name)
        self.receivers: list[FakeReceiver] = []

    def configured(self) -> bool:
        return True

    def poster(self) -> WatchedPoster:
        return self.the_poster

    def receiver(self, store: object) -> FakeReceiver:
        receiver = FakeReceiver(self.name, self.path, self.fail)
        self.receivers.append(receiver)
        return receiver


def test_the_fakes_are_platforms() -> None:
    fake = FakePlatform("a", "/a")
    assert isinstance(fake, Platform) and isinstance(fake.receiver(None), Receiver)


async def expired_ask(store: Store, platform: str) -> AskRecord:
    record = new_record()
    record = record.model_copy(
        update={"destination": Destination(platform=platform, channel="C1"), "expires_at": 1.0}
    )
    await store.create(record)
    ref = MessageRef(platform=platform, channel="C1", message_id="1")
    posted = await store.set_message(record.id, ref)
    assert posted is not None
    return posted


async def test_two_platforms_served_in_one_process_with_one_http_server() -> None:
    http_one, holder = FakePlatform("one", "/one/events"), FakePlatform("two")
    store = MemoryStore()
    asks = [await expired_ask(store, "one"), await expired_ask(store, "two")]
    async with serving([http_one, holder], store, port=0, sweep_interval=0.01) as receiving:
        assert [r.receiving for r in http_one.receivers + holder.receivers] == [True, True]
        assert receiving.server is not None
        async with aiohttp.ClientSession() as session:
            url = receiving.server.url("/one/events")
            async with session.post(url, data="click") as resp:
                assert resp.status == 200 and await resp.text() == "one got click"
            async with session.get(receiving.server.url("/healthz")) as resp:
                assert await resp.text() == "ok"
        # the sweeper runs here, re-rendering through each platform's own poster
        await asyncio.wait_for(http_one.the_poster.shown.wait(), 10)
        await asyncio.wait_for(holder.the_poster.shown.wait(), 10)
    for platform, ask in zip((http_one, holder), asks, strict=True):
        (update,) = platform.the_poster.updated(ask.id)
        assert update.status is AskStatus.EXPIRED
        (receiver,) = platform.receivers
        assert receiver.drained_after_stop is True


def test_settled_startup_objects_are_out_of_the_collectors_walks() -> None:
    built_at_startup = {"kept": ["for the whole process"]}
    try:
        settle_heap()
        assert gc.get_freeze_count() > 0
        assert not any(o is built_at_startup for o in gc.get_objects())
        made_later = {"per": ["click"]}
        assert any(o is made_later for o in gc.get_objects())  # collected as before
    finally:
        gc.unfreeze()


async def test_serve_settles_its_heap_before_it_says_ready(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bridge.cli import serve as serve_cli

    settled: list[str] = []
    monkeypatch.setattr(
        "bridge.runtime.settle_heap", lambda: settled.append(capsys.readouterr().err)
    )
    monkeypatch.delenv("REDIS_URL", raising=False)
    running = asyncio.create_task(
        serve_cli.serve([FakePlatform("two")], host="127.0.0.1", port=0, sweep=1.0)
    )
    try:
        for _ in range(200):
            if "ready" in capsys.readouterr().err:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("serve never said ready")
        assert len(settled) == 1 and "ready" not in settled[0]
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_connection_holders_alone_open_no_http_server() -> None:
    store = MemoryStore()
    async with serving([FakePlatform("two")], store, port=0) as receiving:
        assert receiving.server is None


async def test_a_receiver_failing_before_it_is_ready_stops_serving() -> None:
    broken = FakePlatform("broken", fail=PlatformUnavailable("broken: no token"))
    fine = FakePlatform("fine")
    with pytest.raises(PlatformUnavailable, match="no token"):
        async with serving([fine, broken], MemoryStore(), port=0):
            raise AssertionError("never ready")
    (receiver,) = fine.receivers
    assert not receiver.receiving and receiver.drained_after_stop is True


async def test_two_platforms_cannot_claim_one_route() -> None:
    with pytest.raises(ValueError, match="two handlers for POST /same"):
        async with serving([FakePlatform("a", "/same"), FakePlatform("b", "/same")], MemoryStore()):
            raise AssertionError("unreachable")


async def test_an_address_in_use_is_a_clear_error() -> None:
    store = MemoryStore()
    async with serving([FakePlatform("a", "/a")], store, port=0) as first:
        assert first.server is not None
        with pytest.raises(CannotListen, match=f"cannot listen on 127.0.0.1:{first.server.port}"):
            async with serving([FakePlatform("b", "/b")], store, port=first.server.port):
                raise AssertionError("unreachable")


class DiesOnCue(FakeReceiver):
    def __init__(self) -> None:
        super().__init__("dying", None, None)
        self.cue = asyncio.Event()

    async def run(self, ready: asyncio.Event) -> None:
        ready.set()
        await self.cue.wait()
        raise ConnectionError("connection lost for good")


async def test_guard_stops_the_work_when_a_receiver_dies() -> None:
    platform = FakePlatform("dying")
    dying = DiesOnCue()
    platform.receiver = lambda store: dying  # type: ignore[method-assign,assignment,return-value]
    work_cancelled = asyncio.Event()

    async def work() -> None:
        try:
            dying.cue.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            work_cancelled.set()
            raise

    with pytest.raises(ConnectionError, match="lost for good"):
        async with serving([platform], MemoryStore()) as receiving:
            await receiving.guard(work())
    assert work_cancelled.is_set()


# -- the standalone policy --------------------------------------------------------------------


def test_standalone_policy_never_defers() -> None:
    policy = chat_policy(True, wait=30)
    assert policy.mode == "block" and policy.on_timeout == "error" and policy.wait == 30
    with pytest.raises(ValueError, match="mode defer needs REDIS_URL"):
        chat_policy(True, mode="defer")
    shared = chat_policy(False, wait=30)
    assert shared.on_timeout == "defer"
    assert chat_policy(False, mode="defer").wait == 0
    capped = chat_policy(False, wait=600, expires=60)  # the ask would expire before the wait
    assert capped.wait == 60 and capped.on_timeout == "error"
    with pytest.raises(ValueError, match="zero or more"):
        chat_policy(False, wait=-1)
    with pytest.raises(ValueError, match="more than zero"):
        chat_policy(False, expires=0)
    for huge in (1e300, float("inf"), float("nan")):  # a store could not keep it: refused
        with pytest.raises(ValueError, match=r"at most 315360000 \(ten years\)"):
            chat_policy(False, expires=huge)
    with pytest.raises(ValueError, match="less than or equal to 315360000"):
        AskPolicy(expires=1e300)
    assert chat_policy(False, expires=315360000).expires == 315360000


async def test_standalone_process_receives_and_sweeps_its_own_asks() -> None:
    runtime = Runtime(EngineSettings(REDIS_URL=None))
    assert runtime.standalone
    platform = FakePlatform("fake")
    ask = await expired_ask(runtime.store, "fake")
    async with runtime.own_clicks(platform, sweep_interval=0.01):
        (receiver,) = platform.receivers
        assert receiver.receiving
        await asyncio.wait_for(platform.the_poster.shown.wait(), 10)
    (update,) = platform.the_poster.updated(ask.id)
    assert update.status is AskStatus.EXPIRED
    await runtime.aclose()


async def test_standalone_it_also_receives_and_posts_where_its_ask_escalates() -> None:
    runtime = Runtime(EngineSettings(REDIS_URL=None))
    here, there = FakePlatform("here"), FakePlatform("there")
    policy = runtime.policy(
        wait=5, follow_ups={"escalate_after": 0.05, "escalate_to": "there:C_MANAGERS"}
    )
    destination = Destination(platform="here")
    posters = {"there": there.poster()}
    handler = ChatHandler(here.poster(), runtime.store, destination, policy, posters=posters)
    (tool,) = tools_interactive(callback=handler)
    async with runtime.own_clicks(here, there, sweep_interval=0.01) as receiving:
        asking = asyncio.create_task(
            receiving.guard(tool.ainvoke([new_record().questions.questions[0]]))
        )
        escalated = await asyncio.wait_for(there.the_poster.next_post(), 10)
        assert [r.name for r in (*here.receivers, *there.receivers)] == ["here", "there"]
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking
    assert escalated.destination == Destination(platform="there", channel="C_MANAGERS")
    (ended,) = there.the_poster.updated(escalated.id)  # cancelled: shown on both messages
    assert ended.status is AskStatus.CANCELLED
    await runtime.aclose()


async def test_standalone_an_answer_shows_on_both_platforms_before_the_process_ends() -> None:
    runtime = Runtime(EngineSettings(REDIS_URL=None))
    here, there = FakePlatform("here"), FakePlatform("there")
    policy = runtime.policy(wait=5, follow_ups={"escalate_after": 0.05, "escalate_to": "there:C9"})
    destination = Destination(platform="here")
    posters = {"there": there.poster()}
    handler = ChatHandler(here.poster(), runtime.store, destination, policy, posters=posters)
    (tool,) = tools_interactive(callback=handler)
    question = new_record().questions.questions[0]
    async with runtime.own_clicks(here, there, sweep_interval=0.01) as receiving:
        asking = asyncio.create_task(receiving.guard(tool.ainvoke([question])))
        escalated = await asyncio.wait_for(there.the_poster.next_post(), 10)
        who = Responder(user_id="U1")
        answer = Answer(question=question.question, selected=(question.options[0].label,))
        await runtime.store.submit(escalated.id, who, [answer])  # nobody here re-renders it
        assert (await asking).answers is not None
    for poster in (here.the_poster, there.the_poster):
        (shown,) = poster.updated(escalated.id)
        assert shown.status is AskStatus.ANSWERED
    await runtime.aclose()


async def test_with_a_shared_store_the_process_leaves_clicks_to_serve() -> None:
    runtime = Runtime(EngineSettings(REDIS_URL="redis://127.0.0.1:1/0"))
    platform = FakePlatform("fake")
    async with runtime.own_clicks(platform) as receiving:
        assert platform.receivers == []
        assert await receiving.guard(asyncio.sleep(0, "done")) == "done"
    await runtime.aclose()  # never opened: nothing to close, nothing connected


class RefusesStandalone(FakePlatform):
    def check_standalone(self) -> None:
        raise PlatformUnavailable("needs a public URL")


async def test_a_platform_that_cannot_serve_standalone_is_refused_before_anything_runs() -> None:
    runtime = Runtime(EngineSettings(REDIS_URL=None))
    platform = RefusesStandalone("http-only", "/x")
    with pytest.raises(PlatformUnavailable, match="public URL"):
        runtime.check(platform)
    with pytest.raises(PlatformUnavailable, match="public URL"):
        async with runtime.own_clicks(platform):
            raise AssertionError("unreachable")
    assert platform.receivers == []


async def test_standalone_ask_that_runs_out_is_closed_not_deferred() -> None:
    runtime = Runtime(EngineSettings(REDIS_URL=None))
    platform = FakePlatform("fake")
    destination = Destination(platform="fake", channel="C1")
    handler = ChatHandler(platform.poster(), runtime.store, destination, runtime.policy(wait=0))
    (tool,) = tools_interactive(callback=handler)
    async with runtime.own_clicks(platform) as receiving:
        with pytest.raises(NotAnswered) as ended:
            await receiving.guard(tool.ainvoke([new_record().questions.questions[0]]))
    assert ended.value.record.status is AskStatus.EXPIRED
    await runtime.aclose()


# -- signals ----------------------------------------------------------------------------------


async def test_a_signal_cancels_the_main_task_and_cleanup_runs_to_the_end() -> None:
    cleaned_up = False
    started = asyncio.Event()

    async def signal_soon() -> None:
        await started.wait()
        os.kill(os.getpid(), signal.SIGTERM)

    sender = asyncio.create_task(signal_soon())
    async with stop_on_signals() as stopped:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            os.kill(os.getpid(), signal.SIGINT)  # a second signal during cleanup: ignored
            await asyncio.sleep(0.05)  # an await in cleanup that the second signal must not cut
            cleaned_up = True
    await sender
    assert stopped.signal is signal.SIGTERM and cleaned_up
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_without_a_signal_cancellation_passes_through() -> None:
    async def body() -> None:
        async with stop_on_signals():
            await asyncio.Event().wait()

    task = asyncio.create_task(body())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- choosing platforms -----------------------------------------------------------------------


def test_naming_a_platform_that_cannot_serve() -> None:
    with pytest.raises(PlatformUnavailable, match="unknown platform 'nope'"):
        configured_platforms(["nope"])
    with pytest.raises(PlatformUnavailable, match="cannot post and serve"):
        configured_platforms(["console"])


def test_no_platform_configured_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: os.PathLike[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    for name in [n for n in os.environ if n.startswith("SLACK_")]:
        monkeypatch.delenv(name)
    with pytest.raises(PlatformUnavailable, match="no chat platform is configured") as none:
        configured_platforms()
    assert "SLACK_BOT_TOKEN" in str(none.value)
    with pytest.raises(PlatformUnavailable, match=r"slack: .*SLACK_BOT_TOKEN"):
        configured_platforms(["slack"])
