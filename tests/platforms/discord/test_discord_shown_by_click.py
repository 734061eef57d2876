"""The poster's side of a click whose response shows the ask's final state (UPDATE_MESSAGE): the
update that follows sends nothing more -- unless an edit of the message was in flight meanwhile,
which may have landed after the response, or a pending state was shown since."""

from __future__ import annotations

import asyncio
import time

import pytest

from bridge.models import QuestionSet
from bridge.record import AskRecord, AskStatus, Destination
from platforms.discord import DiscordPoster
from tests.support.discord.fake_discord import CHANNEL, FakeDiscord
from tests.support.samples import q


async def posted(poster: DiscordPoster) -> tuple[AskRecord, AskRecord, str]:
    """An ask posted, as it is pending and once cancelled, and its message's id."""
    record = AskRecord(
        questions=QuestionSet.model_validate({"questions": [q("Ship it?", "Ship", ["Yes", "No"])]}),
        destination=Destination(platform="discord", channel=CHANNEL),
        expires_at=time.time() + 600,
    )
    ref = await poster.post(record)
    record = record.model_copy(update={"message": ref})
    return record, record.model_copy(update={"status": AskStatus.CANCELLED}), ref.message_id


def edits(fake: FakeDiscord) -> int:
    return sum(c.method == "PATCH" for c in fake.calls)


async def responding() -> None:
    """Stands for the click's response (the poster only awaits it)."""
    await asyncio.sleep(0.05)


async def test_the_update_after_the_response_sends_nothing_once(
    discord_poster: tuple[FakeDiscord, DiscordPoster],
) -> None:
    fake, poster = discord_poster
    _, ended, message_id = await posted(poster)
    await poster.showing_by_click(ended.id, message_id, responding)
    await poster.update(ended)
    assert edits(fake) == 0
    await poster.update(ended)  # a later showing (a late click's) is sent as ever
    assert edits(fake) == 1


@pytest.mark.parametrize("started", ["before", "during"])
async def test_an_edit_in_flight_during_the_response_has_the_final_state_sent_again(
    discord_poster: tuple[FakeDiscord, DiscordPoster], started: str
) -> None:
    fake, poster = discord_poster
    pending, ended, message_id = await posted(poster)
    fake.delay("/messages/", 0.02 if started == "during" else 0.2)

    async def respond() -> None:
        if started == "during":  # starts and lands within the response
            await poster.update(pending)
        await responding()

    earlier = asyncio.create_task(poster.update(pending)) if started == "before" else None
    await asyncio.sleep(0.01)
    await poster.showing_by_click(ended.id, message_id, respond)
    if earlier is not None:
        await earlier
    await poster.update(ended)
    assert edits(fake) == 2
    assert fake.history(message_id)[-1]["components"] == []


async def test_a_pending_state_shown_since_has_the_final_state_sent_again(
    discord_poster: tuple[FakeDiscord, DiscordPoster],
) -> None:
    fake, poster = discord_poster
    pending, ended, message_id = await posted(poster)
    await poster.showing_by_click(ended.id, message_id, responding)
    await poster.update(pending)
    await poster.update(ended)
    assert edits(fake) == 2
