"""429s are counted once each, while logging in and after it."""

from __future__ import annotations

import time

from bridge.record import AskRecord, Destination
from platforms.discord.client import RestClient
from platforms.discord.poster import DiscordPoster
from tests.platforms.discord.test_discord_bot import ratelimited
from tests.support.discord.discord_harness import settings_for
from tests.support.discord.fake_discord import CHANNEL, FakeDiscord
from tests.support.samples import one_question_set


async def test_429s_are_counted_once_while_logging_in_and_after(fake: FakeDiscord) -> None:
    before = ratelimited()
    fake.rate_limit("/users/@me")
    rest = RestClient(settings_for(fake))
    try:
        await rest.get()  # logs in, through one 429
        assert ratelimited() == before + 1
        fake.rate_limit("/messages")
        record = AskRecord(
            questions=one_question_set("Ship it?", "Ship", ("Yes", "now"), ("No", "later")),
            destination=Destination(platform="discord", channel=CHANNEL),
            expires_at=time.time() + 60,
        )
        await DiscordPoster(rest, browser=False).post(record)  # posted after a 429
        assert ratelimited() == before + 2
        assert [c.status for c in fake.calls].count(429) == 2
    finally:
        await rest.aclose()
