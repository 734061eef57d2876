"""Fixtures for the Discord suite: the fake Discord, a real Redis, and the bot (the platform's
receiver, with real discord.py) connected to the fake's gateway in the test's own process.

Every test is held to Discord's rules: a request any fake of the test refused as invalid (400
50035, :mod:`tests.support.discord.discord_rules`) fails it, unless it is marked
``invalid_requests_expected`` -- a test that sends a bad payload on purpose."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from bridge.store.redis import RedisStore
from platforms.discord import DiscordPlatform, DiscordPoster
from tests.support.discord.discord_harness import (
    ALICE,
    BOB,
    CAROL,
    REVIEWERS,
    Bot,
    settings_for,
    start_bot,
)
from tests.support.discord.fake_discord import STARTED, FakeDiscord, assert_conforming
from tests.support.redis_server import RedisServer

EXPECTED = "invalid_requests_expected"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{EXPECTED}: the test sends requests Discord refuses as invalid, on purpose"
    )


@pytest.fixture(autouse=True)
def _conforming(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test if a fake it started refused a request as invalid (see the module)."""
    first = len(STARTED)
    yield
    fakes = STARTED[first:]
    del STARTED[first:]
    if request.node.get_closest_marker(EXPECTED) is None:
        assert_conforming(fakes)


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


@pytest.fixture
async def discord_poster() -> AsyncIterator[tuple[FakeDiscord, DiscordPoster]]:
    """The fake Discord and a poster of a platform set up for it (no bot, no store)."""
    fake = await FakeDiscord().start()
    platform = DiscordPlatform(settings_for(fake))
    yield fake, platform.poster()
    await platform.rest.aclose()
    await fake.stop()
