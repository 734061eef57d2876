"""A modal Discord refuses as the click's response: the person is told privately to click again
where Discord still allows it, and the log has one line.

Through real discord.py and the fake Discord, whose interaction callback answers as Discord's
does: 400 40060 once another process of the bot has responded, 404 10062 once the 3 s are over,
or any error :meth:`FakeDiscord.fail_next` is given.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from bridge.record import AskRecord, AskStatus
from bridge.replies import NOT_OPENED
from tests.support.discord.discord_harness import ALICE, Bot
from tests.support.discord.fake_discord import FakeDiscord, Interaction
from tests.support.samples import q

CHECKS = [q("Which checks?", "Checks", ["lint", "types", "tests"], multi=True)]


def ours(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("platforms")]


async def logged_once(caplog: pytest.LogCaptureFixture, record: AskRecord, outcome: str) -> None:
    """One WARNING line naming the ask and Discord's error (once the bot got to it), and no
    traceback or error anywhere -- discord.py's "Ignoring exception" included."""
    for _ in range(200):
        if ours(caplog):
            break
        await asyncio.sleep(0.05)
    ((level, line),) = ours(caplog)
    assert level == "WARNING"
    assert line.startswith(f"could not open the form of ask {record.id} (Discord answered ")
    assert line.endswith(f"): {outcome}")
    loud = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in loud] == []


def callbacks(fake: FakeDiscord, click: Interaction) -> list[tuple[int, object]]:
    return [
        (c.status, c.response)
        for c in fake.calls
        if c.path.startswith(f"/interactions/{click.id}/")
    ]


async def test_answered_by_another_process_is_followed_up_privately(
    bot: Bot, fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    """40060: the interaction has a response (another process's), so its token still carries
    an ephemeral follow-up."""
    record = await bot.ask(CHECKS)
    with caplog.at_level(logging.INFO):
        click = await fake.click(
            ALICE, bot.message(record), f"askb:answer:{record.id}", answered_elsewhere=True
        )
        assert await fake.told(click, within=10) == NOT_OPENED
        await logged_once(caplog, record, "told the person privately to click again")
    assert callbacks(fake, click) == [
        (400, {"code": 40060, "message": "Interaction has already been acknowledged."})
    ]
    (followup,) = click.followups
    assert followup["flags"] == 64 and followup["allowed_mentions"] == {"parse": []}
    assert "40060" in ours(caplog)[0][1]


async def test_an_expired_click_reaches_nobody_and_says_so_in_one_line(
    bot: Bot, fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    """10062: Discord invalidated the token with the 3 s, and a follow-up needs a response
    first: nothing is sent after the refusal."""
    record = await bot.ask(CHECKS)
    fake.interaction_ttl = 0.0  # every click expires before the bot can answer it
    with caplog.at_level(logging.INFO):
        click = await fake.click(ALICE, bot.message(record), f"askb:answer:{record.id}")
        await logged_once(caplog, record, "the click expired, so nothing can reach the person")
    assert callbacks(fake, click) == [(404, {"code": 10062, "message": "Unknown interaction"})]
    assert not [c for c in fake.calls if c.path.startswith("/webhooks/")]
    assert "10062" in ours(caplog)[0][1]


async def test_any_other_refusal_is_answered_privately_instead(
    bot: Bot, fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    """Discord refused the modal itself (400 50035): the interaction is still unanswered, so
    the explanation is its response."""
    record = await bot.ask(CHECKS)
    fake.fail_next("/callback", 400, 50035, "Invalid Form Body")
    with caplog.at_level(logging.INFO):
        click = await fake.click(ALICE, bot.message(record), f"askb:answer:{record.id}")
        assert await fake.told(click, within=10) == NOT_OPENED
        await logged_once(caplog, record, "told the person privately to click again")
    (response,) = click.responses
    assert response["type"] == 4 and response["data"]["flags"] == 64
    assert "50035" in ours(caplog)[0][1]
    still = await bot.store.get(record.id)
    assert still is not None and still.status is AskStatus.PENDING


async def test_a_refused_follow_up_is_logged_in_the_same_line(
    bot: Bot, fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever answered first, Discord may refuse the follow-up too: still one line, saying
    the person could not be told and why."""
    record = await bot.ask(CHECKS)
    fake.fail_next("/webhooks/", 404, 10015, "Unknown Webhook")
    with caplog.at_level(logging.INFO):
        await fake.click(
            ALICE, bot.message(record), f"askb:answer:{record.id}", answered_elsewhere=True
        )
        await logged_once(
            caplog,
            record,
            "nor could the person be told (404 Not Found (error code: 10015): Unknown Webhook)",
        )
