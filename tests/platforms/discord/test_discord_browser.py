"""``Open in browser`` on Discord: the button, and the person's own link as an ephemeral response.

The bot over the fake Discord's gateway and REST API, with real discord.py and a real Redis: the
message offers the button (on a row of its own) only when the web platform is on; a click by
someone who may answer a pending ask is answered, privately, with a link that verifies as theirs
(their Discord identity); anyone else, or a click on an ended ask, gets the refusal and no link;
a slow store answers "thinking" and follows the link up privately.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from bridge.clicks import BROWSER_GROUPS
from bridge.record import AskRecord, AskStatus
from bridge.store.redis import RedisStore
from bridge.web_links import ASK_PATH, Links, Person
from tests.support.discord.discord_harness import ALICE, BOB, CAROL, REVIEWERS, Bot, start_bot
from tests.support.discord.fake_discord import FakeDiscord
from tests.support.samples import q

SECRET = "d" * 40
BASE = "https://asks.example.com"
ONE_CLICK = [q("Ship it?", "Deploy", ["Ship", "Hold", "Later", "Never"])]
FORM = [
    q("Which region?", "Region", ["eu", "us"]),
    q("Which checks?", "Checks", ["lint", "tests"], multi=True),
]
URL = re.compile(r"https://asks\.example\.com/a/\S+")


@pytest.fixture
def web_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASK_BRIDGE_WEB_SECRET", SECRET)
    monkeypatch.setenv("ASK_BRIDGE_WEB_URL", BASE)


@pytest.fixture
async def web_bot(web_on: None, fake: FakeDiscord, store: RedisStore) -> AsyncIterator[Bot]:
    b = await start_bot(fake, store)
    yield b
    await b.stop()


def verified(text: str, record: AskRecord) -> Person:
    """The person the one link in ``text`` was made for, once it verified for ``record``."""
    (url,) = URL.findall(text)
    link = Links([SECRET], BASE).verify(url.removeprefix(BASE + ASK_PATH))
    assert link.ask_id == record.id
    return link.person


def buttons(message: dict[str, object]) -> list[list[str]]:
    rows = message["components"]
    assert isinstance(rows, list)
    return [[c["custom_id"] for c in row["components"]] for row in rows]


@pytest.mark.parametrize("questions", [ONE_CLICK, FORM], ids=["one-click", "form"])
async def test_the_button_gives_the_person_their_own_link_privately(
    web_bot: Bot, fake: FakeDiscord, questions: list[dict[str, object]]
) -> None:
    record = await web_bot.ask(questions, answerers=(ALICE,))
    posted = web_bot.message(record)
    assert buttons(posted)[-1] == [f"askb:web:{record.id}"]  # a row of its own
    click = await fake.click(ALICE, posted, f"askb:web:{record.id}")
    text = await fake.told(click)
    assert "15 minutes" in text
    assert verified(text, record) == Person("discord", ALICE, "alice")
    assert (await web_bot.store.get(record.id)).status is AskStatus.PENDING  # type: ignore[union-attr]


async def test_someone_who_may_not_answer_gets_the_refusal_and_no_link(
    web_bot: Bot, fake: FakeDiscord
) -> None:
    record = await web_bot.ask(FORM, answerers=(BOB,))
    click = await fake.click(ALICE, web_bot.message(record), f"askb:web:{record.id}")
    told = await fake.told(click)
    assert told == f"Sorry, you can't answer this one: it is for <@{BOB}>. {BROWSER_GROUPS}"


async def test_someone_allowed_through_a_role_is_told_to_answer_in_the_message(
    web_bot: Bot, fake: FakeDiscord
) -> None:
    """The browser looks no roles up: a link would refuse them, so none is given."""
    record = await web_bot.ask(FORM, answerers=(f"role:{REVIEWERS}",))
    click = await fake.click(CAROL, web_bot.message(record), f"askb:web:{record.id}")
    text = await fake.told(click)
    assert text.endswith(BROWSER_GROUPS) and not URL.search(text)


async def test_an_ended_ask_gives_no_link(web_bot: Bot, fake: FakeDiscord) -> None:
    record = await web_bot.ask(FORM)
    posted = web_bot.message(record)
    await web_bot.store.close(record.id, AskStatus.EXPIRED)
    click = await fake.forge_click(ALICE, posted, f"askb:web:{record.id}")
    text = await fake.told(click)
    assert not URL.search(text) and "expired" in text


async def test_a_slow_store_follows_the_link_up_privately(
    web_on: None, fake: FakeDiscord, store: RedisStore
) -> None:
    slow = await start_bot(fake, store, ack_budget=0.0)  # every judgement outlasts its budget
    try:
        record = await slow.ask(FORM)
        click = await fake.click(BOB, slow.message(record), f"askb:web:{record.id}")
        assert (await fake.responded(click))["type"] == 5  # thinking, privately
        assert verified(await fake.told(click), record) == Person("discord", BOB, "bob")
    finally:
        await slow.stop()


async def test_without_the_web_platform_there_is_no_button(bot: Bot) -> None:
    record = await bot.ask(FORM)
    assert buttons(bot.message(record)) == [[f"askb:answer:{record.id}"]]
