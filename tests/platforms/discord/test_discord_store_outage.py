"""On Discord too: a click told "nothing was saved" while Redis was down finds nothing saved later.

Where the defect was first seen: an ask waits (``ask`` in one process, the bot in ``serve`` in
another, Redis with AOF), Redis stops, a teammate clicks ``Wait`` and is told privately that
nothing was saved; Redis comes back while that click's store operation would still be retrying,
and the teammate clicks ``Ship it``. The ask resolves with ``Ship it``, the click that counted.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest

from bridge.replies import TRY_AGAIN
from tests.support.discord.discord_harness import ALICE
from tests.support.discord.discord_procs import discord_bot, discord_env
from tests.support.discord.fake_discord import CHANNEL, FakeDiscord
from tests.support.procs import Agent
from tests.support.redis_server import RedisServer


@pytest.fixture
def aof_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(
        tmp_path_factory.mktemp("aof"), extra=["--appendonly", "yes", "--appendfsync", "always"]
    )
    server.start()
    yield server
    server.stop()


def button(message: dict[str, object], label: str) -> str:
    rows = message["components"]
    assert isinstance(rows, list)
    return next(
        str(b["custom_id"]) for row in rows for b in row["components"] if b["label"] == label
    )


async def test_a_click_told_nothing_was_saved_never_lands_later(aof_redis: RedisServer) -> None:
    fake = await FakeDiscord(users={ALICE: "alice"}).start()
    env = discord_env(
        fake, REDIS_URL=aof_redis.url, ASK_BRIDGE_KEY_PREFIX=f"o{uuid.uuid4().hex[:6]}"
    )
    bot = await discord_bot(env).start()
    marker = uuid.uuid4().hex[:8]
    question = {
        "question": f"Ship release {marker}?",
        "header": "Ship",
        "options": [
            {"label": "Wait", "description": "Hold it"},
            {"label": "Ship it", "description": "Go"},
        ],
    }
    agent = await Agent.start(
        env, json.dumps([question]), "--platform", "discord", "--channel", CHANNEL, "--wait", "90"
    )
    try:
        message = await fake.posted(marker)
        await asyncio.to_thread(aof_redis.stop)
        waiting = await fake.click(ALICE, message, button(message, "Wait"))
        assert await fake.told(waiting) == TRY_AGAIN  # "... so nothing was saved: ..."
        await asyncio.to_thread(aof_redis.start)  # back while that click would still retry
        await asyncio.sleep(3)  # time for a withdrawn click to land, were it still queued
        shipping = await fake.click(ALICE, message, button(message, "Ship it"))
        assert (await fake.responded(shipping))["type"] == 7  # accepted, the outcome shown
        code, out, err = await agent.result(within=90)
    finally:
        await agent.kill()
        await bot.stop()
        await fake.stop()
    assert code == 0, err
    assert json.loads(out)["answers"][0]["selected"] == ["Ship it"]
