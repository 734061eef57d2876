"""Fixtures for the Discord suite: the fake Discord, a real Redis, and the bot (the platform's
receiver, with real discord.py) connected to the fake's gateway in the test's own process."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_discord import CHANNEL, TOKEN, FakeDiscord
from redis_server import RedisServer, redis_server

from bridge.aio import stop
from bridge.models import QuestionSet
from bridge.record import AskRecord, Destination
from bridge.store.base import Store
from bridge.store.redis import RedisStore
from platforms.discord import DiscordPlatform, DiscordReceiver
from platforms.discord.settings import DiscordSettings

ALICE = "100000000000000001"
BOB = "100000000000000002"
CAROL = "100000000000000003"
REVIEWERS = "500000000000000001"


@pytest.fixture(scope="module")
def redis_srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(Path(tmp_path_factory.mktemp("redis"))) as server:
        yield server


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


def settings_for(fake: FakeDiscord) -> DiscordSettings:
    return DiscordSettings(token=TOKEN, api_url=fake.url, gateway_url=fake.gateway_url)


@dataclass
class Bot:
    """One bot process's worth of Discord wiring, running in the test's event loop."""

    fake: FakeDiscord
    store: Store
    platform: DiscordPlatform
    receiver: DiscordReceiver | None = None
    """``None`` when something else (the runtime) receives this bot's clicks."""
    task: asyncio.Task[None] | None = None

    async def ask(
        self,
        questions: list[dict[str, Any]],
        *,
        answerers: tuple[str, ...] = (),
        context: dict[str, Any] | None = None,
        destination: Destination | None = None,
        expires_in: float = 300.0,
    ) -> AskRecord:
        """Create, post and remember an ask the way the chat handler does."""
        record = AskRecord(
            questions=QuestionSet.model_validate({"questions": questions}),
            destination=destination or Destination(platform="discord", channel=CHANNEL),
            answerers=answerers,
            context=context or {"asker": "Build bot"},
            expires_at=time.time() + expires_in,
        )
        await self.store.create(record)
        ref = await self.platform.poster().post(record)
        posted = await self.store.set_message(record.id, ref)
        assert posted is not None
        return posted

    def message(self, record: AskRecord) -> dict[str, Any]:
        assert record.message is not None
        return self.fake.messages[record.message.message_id]

    async def stop(self) -> None:
        if self.task is not None:
            await stop(self.task)
        if self.receiver is not None:
            await self.receiver.drain()
        await self.platform.rest.aclose()


async def start_bot(fake: FakeDiscord, store: Store, **options: Any) -> Bot:
    platform = DiscordPlatform(settings_for(fake))
    options.setdefault("guild_ready_timeout", 0.05)
    receiver = DiscordReceiver(platform.settings, platform.poster(), store, **options)
    ready = asyncio.Event()
    task = asyncio.create_task(receiver.run(ready))
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiting}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        await stop(waiting)
        if task.done():
            task.result()  # raises why it stopped
        raise AssertionError("the bot did not get ready")
    return Bot(fake, store, platform, receiver, task)


@pytest.fixture
async def bot(fake: FakeDiscord, store: RedisStore) -> AsyncIterator[Bot]:
    b = await start_bot(fake, store)
    yield b
    await b.stop()


def q(text: str, header: str, labels: list[str], *, multi: bool = False) -> dict[str, Any]:
    return {
        "question": text,
        "header": header,
        "multiSelect": multi,
        "options": [{"label": lab, "description": f"{lab} description"} for lab in labels],
    }
