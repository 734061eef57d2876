"""A click while Redis is down, told "nothing was saved", finds nothing saved once Redis is back.

Through ``ask-bridge serve`` over a Redis with AOF: the ask waits, Redis stops, a teammate clicks
one option and is told privately that the store cannot be reached; Redis comes back (same address,
same data) while that click's store operation would still be retrying, and the teammate clicks the
other option. That second click is the answer. Before, the first click's script stayed in the
store's batch after the person was told nothing was saved, and landed once Redis was back: the ask
resolved with the option the person had been told was not saved.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
import pytest_asyncio

from bridge.record import AskStatus
from bridge.replies import TRY_AGAIN
from bridge.store.redis import RedisStore
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from tests.support.procs import Serve, cli_env
from tests.support.redis_server import RedisServer
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import SIGNING_SECRET, block_actions, form_body, signed
from tests.support.slack.slack_harness import CHANNEL, Bolt

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def aof_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(
        tmp_path_factory.mktemp("aof"), extra=["--appendonly", "yes", "--appendfsync", "always"]
    )
    server.start()
    yield server
    server.stop()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(aof_redis: RedisServer) -> AsyncIterator[tuple[FakeSlack, Serve, RedisStore]]:
    fake = await FakeSlack().start()
    prefix = f"out{uuid.uuid4().hex[:6]}"
    env = cli_env(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=fake.url,
        REDIS_URL=aof_redis.url,
        ASK_BRIDGE_KEY_PREFIX=prefix,
    )
    serve = await Serve(env).start()
    store = RedisStore.from_url(aof_redis.url, prefix=prefix)
    yield fake, serve, store
    await serve.stop()
    await store.aclose()
    await fake.stop()


async def test_a_click_told_nothing_was_saved_never_lands_later(
    world: tuple[FakeSlack, Serve, RedisStore], aof_redis: RedisServer
) -> None:
    fake, serve, store = world
    async with aiohttp.ClientSession() as session:
        poster = SlackPoster(make_client(BOT_TOKEN, fake.url))
        bolt = Bolt(serve, session, fake, store, poster)  # type: ignore[arg-type]
        marker = uuid.uuid4().hex[:8]
        question = {
            "question": f"Ship release {marker}?",
            "header": "Ship",
            "options": [
                {"label": "Wait", "description": "Hold it"},
                {"label": "Ship it", "description": "Go"},
            ],
        }
        record = await bolt.ask([question])
        ts, channel = record.message.message_id, CHANNEL  # type: ignore[union-attr]

        async def click(user: str, option: int) -> None:
            payload = block_actions(fake, channel, ts, user, f"askb:pick:{record.id}:0:{option}")
            body = form_body(payload)
            async with session.post(serve.url, data=body, headers=signed(body)) as resp:
                assert resp.status == 200

        await asyncio.to_thread(aof_redis.stop)
        await click("U0WAITER", 0)  # "Wait", while Redis is down
        (told,) = await fake.wait_for(
            "chat.postEphemeral", lambda a: a["user"] == "U0WAITER", within=30
        )
        assert told["text"] == TRY_AGAIN  # "... so nothing was saved: try again in a moment."
        await asyncio.to_thread(aof_redis.start)  # back while that click would still retry
        await asyncio.sleep(3)  # time for a withdrawn click to land, were it still queued
        await click("U0SHIPPER", 1)  # "Ship it"
        await fake.wait_for("chat.update", lambda a: a["ts"] == ts, within=30)
    ended = await store.get(record.id)
    assert ended is not None and ended.status is AskStatus.ANSWERED
    assert ended.answers is not None and ended.answers[0].selected == ("Ship it",)
    assert ended.answered_by is not None and ended.answered_by.user_id == "U0SHIPPER"
    shown = json.dumps(fake.messages[(channel, ts)]["blocks"])
    assert "Answered by <@U0SHIPPER>" in shown
