"""When Discord refuses a message the renderer believed fits (a 400 "Invalid Form Body" for a limit
nobody documents), the ask is not lost: one line in the log naming Discord's error, one more send
at the tightest level of cuts; any other error is not retried."""

from __future__ import annotations

import logging
import time
from typing import Any

import discord
import pytest

from bridge.models import MAX_DESCRIPTION, MAX_LABEL, MAX_QUESTION_TEXT, QuestionSet
from bridge.record import AskRecord, AskStatus, Destination
from platforms.discord import DiscordPoster, markup
from tests.support.discord.fake_discord import CHANNEL, FakeDiscord

DESCRIPTION = "d" * MAX_DESCRIPTION


def largest() -> AskRecord:
    """Four questions with every text at the contract's maximum."""
    questions = QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": "q" * (MAX_QUESTION_TEXT - 1) + str(i),
                    "header": f"Header {i}",
                    "options": [
                        {
                            "label": "l" * (MAX_LABEL - 1) + str(j),
                            "description": "d" * MAX_DESCRIPTION,
                        }
                        for j in range(4)
                    ],
                }
                for i in range(4)
            ]
        }
    )
    return AskRecord(
        questions=questions,
        destination=Destination(platform="discord", channel=str(CHANNEL)),
        expires_at=time.time() + 600,
    )


def described(body: dict[str, Any]) -> int:
    return sum(len(e.get("description") or "") for e in body["embeds"])


def sends(fake: FakeDiscord, method: str) -> list[Any]:
    """The channel-message requests of ``method`` (POST sends, PATCH edits), in order."""
    return [c for c in fake.calls if c.method == method and "/messages" in c.path]


async def test_a_message_discord_refuses_is_sent_again_at_the_tightest_cuts(
    discord_poster: tuple[FakeDiscord, DiscordPoster], caplog: pytest.LogCaptureFixture
) -> None:
    fake, poster = discord_poster
    fake.fail_next("/messages", 400, 50035, "Invalid Form Body")
    record = largest()
    with caplog.at_level(logging.WARNING, logger="bridge.poster"):
        ref = await poster.post(record)
    refused, posted = sends(fake, "POST")
    assert (refused.status, posted.status) == (400, 200)
    assert described(posted.body) < described(refused.body)
    tightest = markup.render_message(record, tightest=True)
    assert [e["description"] for e in posted.body["embeds"]] == [
        e.to_dict()["description"] for e in tightest.embeds
    ]
    assert ref.message_id == str(fake.calls[-1].response["id"])
    (line,) = [r.getMessage() for r in caplog.records if r.name == "bridge.poster"]
    assert line.startswith(f"ask {record.id}: discord refused its message (400 Invalid Form Body")
    assert line.endswith("); trying once more at the tightest cuts")


async def test_an_edit_discord_refuses_is_sent_again_at_the_tightest_cuts(
    discord_poster: tuple[FakeDiscord, DiscordPoster],
) -> None:
    fake, poster = discord_poster
    record = largest()
    record = record.model_copy(update={"message": await poster.post(record)})
    fake.fail_next("/messages/", 400, 50035, "Invalid Form Body")
    await poster.update(record.model_copy(update={"status": AskStatus.CANCELLED}))
    refused, edited = sends(fake, "PATCH")
    assert (refused.status, edited.status) == (400, 200)
    assert described(edited.body) < described(refused.body)


async def test_another_error_is_not_retried(
    discord_poster: tuple[FakeDiscord, DiscordPoster],
) -> None:
    fake, poster = discord_poster
    fake.fail_next("/messages", 403, 50013, "Missing Permissions")
    with pytest.raises(discord.Forbidden, match="Missing Permissions"):
        await poster.post(largest())
    assert len(sends(fake, "POST")) == 1
