"""``Open in browser`` on Slack: the button, and the person's own link told privately.

Through the Bolt app over real HTTP, the fake Slack and a real Redis: the message offers the
button only when the web platform is on; a click by someone who may answer a pending ask gets an
ephemeral message with a link that verifies as theirs (their Slack identity, so approvals and
"who may answer" count them as a click would); anyone else, or a click on an ended ask, gets the
refusal and no link.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import aiohttp
import pytest

from bridge import clicks
from bridge.http_server import HttpServer
from bridge.record import AskRecord, AskStatus
from bridge.store.redis import RedisStore
from bridge.web_links import ASK_PATH, Links, Person
from platforms.slack.poster import SlackPoster
from tests.support.samples import q
from tests.support.slack.fake_slack import FakeSlack
from tests.support.slack.payloads import block_actions, find_action
from tests.support.slack.slack_harness import Bolt, http_receiver

SECRET = "s" * 40
BASE = "https://asks.example.com"
FORM = [
    q("Which region?", "Region", ["eu", "us"]),
    q("Which checks?", "Checks", ["lint", "tests"], multi=True),
]
ONE_CLICK = [q("Ship it?", "Deploy", ["Ship", "Hold", "Later", "Never"])]
URL = re.compile(r"https://asks\.example\.com/a/\S+")


@pytest.fixture
async def web_bolt(
    fake: FakeSlack, store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Bolt]:
    """The Bolt app of a ``serve`` whose web platform is on."""
    monkeypatch.setenv("ASK_BRIDGE_WEB_SECRET", SECRET)
    monkeypatch.setenv("ASK_BRIDGE_WEB_URL", BASE)
    receiver = http_receiver(fake, store)
    server = HttpServer(receiver.routes(), "127.0.0.1", 0)
    await server.start()
    async with aiohttp.ClientSession() as session:
        yield Bolt(
            server, session, fake, store, SlackPoster(receiver.client), receiver.interactions
        )
    await server.stop()
    await receiver.drain()


def posted(bolt: Bolt, record: AskRecord) -> dict[str, object]:
    assert record.message is not None
    return bolt.fake.messages[(record.message.channel, record.message.message_id)]


async def click_link(bolt: Bolt, record: AskRecord, user: str) -> str:
    """Click ``Open in browser`` as ``user``; the ephemeral text they were sent."""
    assert record.message is not None and bolt.interactions is not None
    ref = record.message
    status, body = await bolt.send(
        block_actions(bolt.fake, ref.channel, ref.message_id, user, f"askb:web:{record.id}")
    )
    assert (status, body) == (200, "")
    (note,) = await bolt.fake.wait_for("chat.postEphemeral", lambda c: c["user"] == user)
    await bolt.interactions.drain()
    return str(note["text"])


@pytest.mark.parametrize("questions", [FORM, ONE_CLICK], ids=["form", "one-click"])
async def test_the_button_gives_the_person_their_own_link_privately(
    web_bolt: Bolt, questions: list[dict[str, object]]
) -> None:
    record = await web_bolt.ask(questions, answerers=("U0ALICE",))
    _, button = find_action(posted(web_bolt, record), "askb:web:")
    assert button["text"]["text"] == "Open in browser" and "url" not in button
    text = await click_link(web_bolt, record, "U0ALICE")
    (url,) = URL.findall(text)
    assert "15 minutes" in text
    link = Links([SECRET], BASE).verify(url.removeprefix(BASE + ASK_PATH))
    assert link.ask_id == record.id
    assert link.person == Person("slack", "U0ALICE", "u0alice")
    still = await web_bolt.store.get(record.id)
    assert still is not None and still.status is AskStatus.PENDING  # a link answers nothing


async def test_someone_who_may_not_answer_gets_the_refusal_and_no_link(web_bolt: Bolt) -> None:
    record = await web_bolt.ask(FORM, answerers=("U0BOSS",))
    text = await click_link(web_bolt, record, "U0MALLORY")
    assert text == f"Sorry, you can't answer this one: it is for <@U0BOSS>. {clicks.BROWSER_GROUPS}"
    assert not URL.search(text)


async def test_someone_allowed_through_a_group_is_told_to_answer_in_the_message(
    web_bolt: Bolt,
) -> None:
    """The browser looks no membership up: a link would refuse them, so none is given."""
    record = await web_bolt.ask(FORM, answerers=("S0REVIEW",))
    text = await click_link(web_bolt, record, "U0GROUPIE")
    assert text.endswith(clicks.BROWSER_GROUPS) and not URL.search(text)


async def test_an_ended_ask_gives_no_link(web_bolt: Bolt) -> None:
    record = await web_bolt.ask(FORM)
    await web_bolt.store.close(record.id, AskStatus.CANCELLED)
    text = await click_link(web_bolt, record, "U0ALICE")
    assert text == "This question was cancelled."
    assert not URL.search(text)


async def test_without_the_web_platform_there_is_no_button(bolt: Bolt) -> None:
    record = await bolt.ask(FORM)
    with pytest.raises(AssertionError, match="no action"):
        find_action(posted(bolt, record), "askb:web:")


async def test_a_serve_without_the_web_platform_says_so(
    bolt: Bolt, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message was posted by a process with the web platform on, the click reached one
    without it: the person is told to answer in the message, with no link."""
    monkeypatch.setenv("ASK_BRIDGE_WEB_SECRET", SECRET)
    monkeypatch.setenv("ASK_BRIDGE_WEB_URL", BASE)
    bolt.poster = SlackPoster(bolt.poster.client)
    record = await bolt.ask(FORM)
    assert await click_link(bolt, record, "U0ALICE") == clicks.NO_BROWSER
