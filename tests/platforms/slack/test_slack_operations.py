"""Operating ``serve``: readiness follows Redis (503 with the reason while it is down, ready again
without a restart), metrics count what happened, JSON log lines say what happened to which ask
(never the question text), a Redis outage is logged once, and SIGTERM stops it within 10 s."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import signal
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bridge.asking import ChatHandler
from bridge.models import Answer, QuestionSet
from bridge.record import AskRecord, AskStatus, Destination, MessageRef, Responder
from bridge.runtime import serving
from bridge.store.memory import MemoryStore
from bridge.store.redis import RedisStore
from platforms.slack import SlackPlatform
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from platforms.slack.settings import SlackSettings
from tests.support.procs import Serve, cli_env
from tests.support.redis_server import RedisServer
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, block_actions, form_body, signed

CHANNEL = "C0GENERAL"
SECRET_QUESTION = "Ship the confidential merger memo?"
YES = (Answer(question="Link?", selected=("y",)),)


@pytest.fixture
def redis_down_and_up(tmp_path: Path) -> AsyncIterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", extra=["--appendonly", "yes"])
    server.start()
    yield server  # type: ignore[misc]
    server.stop()


async def status_of(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as resp:
        return resp.status, await resp.text()


async def until_status(
    session: aiohttp.ClientSession, url: str, wanted: int, within: float = 15.0
) -> str:
    deadline = time.monotonic() + within
    while True:
        status, text = await status_of(session, url)
        if status == wanted:
            return text
        assert time.monotonic() < deadline, f"{url} stayed {status}: {text}"
        await asyncio.sleep(0.2)


def lines(serve: Serve) -> list[dict[str, Any]]:
    return [json.loads(line) for line in serve.log if line.startswith("{")]


async def post_ask(store: RedisStore, fake: FakeSlack) -> AskRecord:
    record = AskRecord(
        questions=QuestionSet.model_validate(
            {"questions": [q(SECRET_QUESTION, "Memo", ["y", "n"])]}
        ),
        destination=Destination(platform="slack", channel=CHANNEL),
        expires_at=time.time() + 300,
    )
    await store.create(record)
    ref = await SlackPoster(make_client(BOT_TOKEN, fake.url)).post(record)
    posted = await store.set_message(record.id, ref)
    assert posted is not None and posted.message is not None
    return posted


async def test_serve_is_ready_counts_logs_and_rides_out_a_redis_outage(
    fake: FakeSlack, redis_down_and_up: RedisServer
) -> None:
    redis = redis_down_and_up
    prefix = f"ops{uuid.uuid4().hex[:6]}"
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url,
        REDIS_URL=redis.url, ASK_BRIDGE_KEY_PREFIX=prefix,
    )  # fmt: skip
    serve = await Serve(env).start()
    base = f"http://127.0.0.1:{serve.port}"
    store = RedisStore.from_url(redis.url, prefix=prefix)
    try:
        async with aiohttp.ClientSession() as http:
            assert await status_of(http, base + "/healthz") == (200, "ok")
            assert await until_status(http, base + "/readyz", 200) == "ready"

            record = await post_ask(store, fake)
            assert record.message is not None
            click = block_actions(
                fake, record.message.channel, record.message.message_id, "U0ALICE",
                f"askb:pick:{record.id}:0:0",
            )  # fmt: skip
            body = form_body(click)
            async with http.post(serve.url, data=body, headers=signed(body)) as resp:
                assert resp.status == 200
            metrics = (await status_of(http, base + "/metrics"))[1]
            assert 'ask_bridge_clicks_total{outcome="accepted",platform="slack"} 1.0' in metrics
            assert 'ask_bridge_asks_ended_total{platform="slack",status="answered"} 1.0' in metrics
            assert 'ask_bridge_interaction_ack_seconds_count{platform="slack"} 1.0' in metrics
            assert "ask_bridge_time_to_answer_seconds_bucket" in metrics

            redis.stop()
            reason = await until_status(http, base + "/readyz", 503)
            assert f"cannot reach Redis at REDIS_URL={redis.url}: " in reason
            await asyncio.sleep(2.0)  # four sweeps and a health round with Redis down
            assert (await status_of(http, base + "/healthz"))[0] == 200  # alive all along
            redis.start()
            assert await until_status(http, base + "/readyz", 200) == "ready"
            waiting = await post_ask(store, fake)
        started = time.monotonic()
        await serve.stop(signal.SIGTERM)
        assert time.monotonic() - started < 10 and serve.returncode == 0
        untouched = await store.get(waiting.id)  # SIGTERM leaves pending asks alone
        assert untouched is not None and untouched.status is AskStatus.PENDING
    finally:
        await serve.stop()
        await store.aclose()
    logged = lines(serve)
    assert "".join(serve.log).count("Traceback") == 0
    steps = {(e.get("step"), e.get("outcome")) for e in logged if e.get("ask_id") == record.id}
    assert {("click", "accepted"), ("answered", "answered")} <= steps
    click_line = next(e for e in logged if e.get("step") == "click")
    assert click_line["user_id"] == "U0ALICE" and click_line["platform"] == "slack"
    assert click_line["channel"] == CHANNEL
    assert SECRET_QUESTION not in "".join(serve.log) and BOT_TOKEN not in "".join(serve.log)
    down = [
        e
        for e in logged
        if "cannot reach Redis" in e["message"] or "store unavailable" in e["message"]
    ]
    assert 1 <= len(down) <= 2, down  # the health watch and the sweeper: once each, not per round
    assert [e for e in logged if "reachable again" in e["message"]]


async def test_a_rate_limited_call_is_counted(fake: FakeSlack) -> None:
    from bridge.metrics import exposition

    def counted() -> float:
        for line in exposition()[0].decode().splitlines():
            if line.startswith(
                'ask_bridge_platform_errors_total{kind="ratelimited",platform="slack"}'
            ):
                return float(line.split()[-1])
        return 0.0

    before = counted()
    fake.rate_limit("auth.test")
    await make_client(BOT_TOKEN, fake.url).auth_test()  # retried after the 429
    assert counted() == before + 1


async def test_serve_stops_when_its_bot_token_is_revoked_while_serving(
    fake: FakeSlack, redis_srv: RedisServer
) -> None:
    prefix = f"rv{uuid.uuid4().hex[:6]}"
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=fake.url,
        REDIS_URL=redis_srv.url, ASK_BRIDGE_KEY_PREFIX=prefix,
    )  # fmt: skip
    serve = await Serve(env).start()
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)

    async def click(http: aiohttp.ClientSession, record: AskRecord) -> None:
        assert record.message is not None
        payload = block_actions(
            fake, record.message.channel, record.message.message_id, "U0ALICE",
            f"askb:pick:{record.id}:0:0",
        )  # fmt: skip
        body = form_body(payload)
        async with http.post(serve.url, data=body, headers=signed(body)) as resp:
            assert resp.status == 200

    try:
        first, second = await post_ask(store, fake), await post_ask(store, fake)
        async with aiohttp.ClientSession() as http:
            await click(http, first)  # served with the token still valid
            await fake.wait_for("chat.update")
            fake.revoke(BOT_TOKEN)
            await click(http, second)  # judged and stored; its re-render is refused
        assert serve.proc is not None
        await asyncio.wait_for(serve.proc.wait(), 20)
        answered = await store.get(second.id)
    finally:
        await serve.stop()
        await store.aclose()
    assert serve.returncode == 1
    assert answered is not None and answered.status is AskStatus.ANSWERED
    (line,) = [x for x in serve.log if x.startswith("ask-bridge serve: Slack refused")]
    assert "SLACK_BOT_TOKEN (token_revoked) while running" in line
    assert serve.log[-1] == line  # the process's last word


class Terminal(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.wrote = asyncio.Event()

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.wrote.set()
        return super().write(text)

    async def shows(self, text: str) -> None:
        while text not in self.getvalue():
            self.wrote.clear()
            await self.wrote.wait()


async def test_ask_on_a_terminal_shows_the_link_to_the_slack_message(
    fake: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bridge.cli import progress

    monkeypatch.setattr(progress, "TICK", 0.01)
    platform = SlackPlatform(SlackSettings(bot_token=BOT_TOKEN, api_url=fake.url))
    store = MemoryStore()
    handler = ChatHandler(platform.poster(), store, Destination(platform="slack", channel=CHANNEL))
    term = Terminal()
    async with progress.shown(term, links=platform):
        call = asyncio.create_task(handler([q("Link?", "Link", ["y", "n"])], {}))
        (asked,) = await fake.wait_for("chat.getPermalink")  # after the post, for the terminal
        ts = asked["message_ts"].replace(".", "")
        link = f"https://fake.slack.com/archives/{asked['channel']}/p{ts}"
        await asyncio.wait_for(term.shows(link), 10)
        (pending,) = await store.list_pending()
        await store.submit(pending.id, Responder(user_id="U0ALICE"), YES)
        await call
    assert f"waiting for an answer in slack {CHANNEL} (ask {pending.id}), 0:00 {link}" in (
        term.getvalue()
    )


async def test_a_link_slack_will_not_give_is_left_out(fake: FakeSlack) -> None:
    platform = SlackPlatform(SlackSettings(bot_token=BOT_TOKEN, api_url=fake.url))
    record = AskRecord(
        questions=QuestionSet.model_validate({"questions": [q("No link?", "Link", ["y", "n"])]}),
        destination=Destination(platform="slack", channel=CHANNEL),
        expires_at=time.time() + 300,
    )
    ref = await platform.poster().post(record)
    assert [c.method for c in fake.calls] == ["chat.postMessage"]  # a post is one call
    fake.fail_next("chat.getPermalink", "internal_error")
    assert await platform.message_link(ref) is None
    assert await platform.message_link(ref.model_copy(update={"message_id": "1.2"})) is None
    found = await platform.message_link(ref)
    assert (
        found == f"https://fake.slack.com/archives/{ref.channel}/p{ref.message_id.replace('.', '')}"
    )


class SlowReply:
    """A TCP proxy on loopback in front of Redis that holds back the reply to the next command
    containing ``marker`` for ``seconds`` (a slow store), and says when that command went by."""

    def __init__(self, upstream: int, marker: bytes, seconds: float) -> None:
        self.upstream, self.marker, self.seconds = upstream, marker, seconds
        self.sent = asyncio.Event()
        self.armed = False
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> SlowReply:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        slow = asyncio.Event()

        async def to_server() -> None:
            while data := await reader.read(65536):
                if self.armed and self.marker in data:
                    self.armed = False
                    slow.set()  # before the command leaves: its reply is the next data
                    self.sent.set()
                up_writer.write(data)
                await up_writer.drain()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                if slow.is_set():
                    slow.clear()
                    await asyncio.sleep(self.seconds)
                writer.write(data)
                await writer.drain()

        pumps = [asyncio.create_task(to_server()), asyncio.create_task(to_client())]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        for w in (writer, up_writer):
            w.close()


async def test_sigterm_finishes_a_click_in_flight_and_leaves_pending_asks_alone(
    fake: FakeSlack, redis_srv: RedisServer
) -> None:
    """SIGTERM lands while a click is being judged (the store answers it 1 s late): the click's
    verdict is stored and acknowledged, the process exits within 10 s, other asks stay pending."""
    prefix = f"st{uuid.uuid4().hex[:6]}"
    store = RedisStore.from_url(redis_srv.url, prefix=prefix)
    async with SlowReply(redis_srv.port, b"$6\r\nsubmit\r\n", 1.0) as slow:
        env = cli_env(
            SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
            SLACK_API_URL=fake.url, REDIS_URL=slow.url, ASK_BRIDGE_KEY_PREFIX=prefix,
        )  # fmt: skip
        serve = await Serve(env).start()
        try:
            clicked, waiting = await post_ask(store, fake), await post_ask(store, fake)
            assert clicked.message is not None
            payload = block_actions(
                fake, clicked.message.channel, clicked.message.message_id, "U0ALICE",
                f"askb:pick:{clicked.id}:0:1",
            )  # fmt: skip
            body = form_body(payload)
            slow.armed = True
            async with aiohttp.ClientSession() as http:
                sending = asyncio.create_task(http.post(serve.url, data=body, headers=signed(body)))
                await asyncio.wait_for(slow.sent.wait(), 10)  # the click is being judged now
                started = time.monotonic()
                await serve.stop(signal.SIGTERM)
                took = time.monotonic() - started
                async with await sending as resp:
                    acked = resp.status
            answered, untouched = await store.get(clicked.id), await store.get(waiting.id)
        finally:
            await serve.stop()
            await store.aclose()
    assert serve.returncode == 0 and took < 10
    assert acked == 200  # acknowledged after its verdict was stored
    assert answered is not None and answered.status is AskStatus.ANSWERED
    assert answered.answers is not None and answered.answers[0].selected == ("n",)
    assert untouched is not None and untouched.status is AskStatus.PENDING
    assert "Traceback" not in "".join(serve.log)


class Counted(str):
    """A text that counts how often its ``repr`` was built (slack_sdk's debug lines build it)."""

    built = 0

    def __repr__(self) -> str:
        Counted.built += 1
        return super().__repr__()


async def test_slack_sdk_builds_its_debug_lines_only_when_debug_is_logged(
    fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    """slack_sdk formats every call's request (a click's ``chat.update``: the whole message) and
    response for its debug lines whenever its logger's *own* level is at most DEBUG -- as a
    logger nobody set always is -- and then drops them. Our clients' logger reads as the level it
    logs at: with DEBUG off nothing is built; on, the lines are logged as slack_sdk writes them."""
    client = make_client(BOT_TOKEN, fake.url)
    caplog.set_level(logging.INFO, logger="slack_sdk")
    Counted.built = 0
    await client.chat_postMessage(channel=CHANNEL, text=Counted("quiet"))
    assert Counted.built == 0
    assert not [r for r in caplog.records if r.name.startswith("slack_sdk")]
    caplog.set_level(logging.DEBUG, logger="slack_sdk")
    await client.chat_postMessage(channel=CHANNEL, text=Counted("told"))
    assert Counted.built > 0
    assert any(r.getMessage().startswith("Sending a request") for r in caplog.records)


async def test_serving_makes_every_call_over_one_kept_connection(fake: FakeSlack) -> None:
    """slack_sdk alone opens a new connection (against Slack a TCP and TLS handshake) for every
    call; while a process serves Slack, the calls made through its client -- the receiver's, a
    poster's -- share one, closed once serving ended."""
    client = make_client(BOT_TOKEN, fake.url)
    for _ in range(3):
        await client.auth_test()
    assert len(set(fake.peers)) == 3  # slack_sdk's own way: one connection per call
    platform = SlackPlatform(
        SlackSettings(bot_token=BOT_TOKEN, api_url=fake.url, signing_secret=SIGNING_SECRET)
    )
    async with serving([platform], MemoryStore(), port=0):
        session = platform.client.session
        assert session is not None and not session.closed
        del fake.peers[:]
        poster = platform.poster()  # the poster shares the receiver's client
        for _ in range(3):
            await platform.client.auth_test()
            await poster.permalink(MessageRef(platform="slack", channel=CHANNEL, message_id="1"))
    assert len(fake.peers) == 6 and len(set(fake.peers)) == 1
    assert session.closed and platform.client.session is None
    async with platform.client.kept_session():  # a session is opened afresh, then closed
        kept = platform.client.session
        await platform.client.auth_test()
    assert kept is not None and kept.closed and platform.client.session is None
