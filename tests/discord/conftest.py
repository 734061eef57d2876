"""Fixtures for the Discord suite: the fake Discord, a real Redis, and the bot (the platform's
receiver, with real discord.py) connected to the fake's gateway in the test's own process."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from discord_harness import ALICE, BOB, CAROL, REVIEWERS, Bot, start_bot
from fake_discord import FakeDiscord
from redis_server import RedisServer

from bridge.store.redis import RedisStore


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    discord_ = await FakeDiscord(
        users={ALICE: "alice", BOB: "bob", CAROL: "carol"}, roles={CAROL: [REVIEWERS]}
    ).start()
    yield discord_
    await discord_.stop()


@pytest.fixture
async def store(redis_srv: RedisServer) -> AsyncIterator[RedisStore]:
    s = RedisStore.from_url(redis_srv.url, prefix=f"d{uuid.uuid4().hex[:8]}")
    yield s
    await s.aclose()


@pytest.fixture
async def bot(fake: FakeDiscord, store: RedisStore) -> AsyncIterator[Bot]:
    b = await start_bot(fake, store)
    yield b
    await b.stop()
