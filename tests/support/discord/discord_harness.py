"""The Discord suite's harness: the bot (the platform's receiver, with real discord.py) connected
to the fake's gateway in the test's own process, and how a test asks through it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from bridge.aio import stop
from bridge.models import QuestionSet
from bridge.record import AskRecord, Destination
from bridge.store.base import Store
from platforms.discord import DiscordPlatform, DiscordReceiver
from platforms.discord.settings import DiscordSettings
from tests.support.discord.fake_discord import CHANNEL, TOKEN, FakeDiscord

ALICE = "100000000000000001"
BOB = "100000000000000002"
CAROL = "100000000000000003"
REVIEWERS = "500000000000000001"


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
    await asyncio.wait({task, waiting}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        await stop(waiting)
        if task.done():
            task.result()  # raises why it stopped
        raise AssertionError("the bot did not get ready")
    return Bot(fake, store, platform, receiver, task)
