"""Reminders and escalation on Discord, through the fake's REST API and gateway with real
discord.py and a real Redis: a reminder is one reply to the message, notifying exactly the
answerers, however many sweepers run; an escalation to a person's DM is posted once, and a click
on it answers the ask and shows both messages ended."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bridge.models import Answer, QuestionSet
from bridge.record import AskRecord, AskStatus, Destination, FollowUps, Responder
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore
from bridge.sweeper import Sweeper
from tests.support.discord.discord_harness import ALICE, BOB, REVIEWERS, Bot
from tests.support.discord.fake_discord import CHANNEL, FakeDiscord, dm_channel
from tests.support.redis_server import RedisServer
from tests.support.samples import q

DEPLOY = q("Deploy?", "Deploy", ["Go", "Stop"])


async def ask(bot: Bot, follow: FollowUps, **fields: Any) -> AskRecord:
    """Create, post and remember an ask with follow-ups, as the chat handler does."""
    now = time.time()
    record = AskRecord(
        questions=QuestionSet.model_validate(
            {"questions": [q("Deploy?", "Deploy", ["Go", "Stop"])]}
        ),
        destination=Destination(platform="discord", channel=CHANNEL),
        created_at=now,
        expires_at=now + 3600,
        follow_ups=follow,
        **{"context": {"asker": "Build bot"}, **fields},
    )
    await bot.store.create(record)
    ref = await bot.platform.poster().post(record)
    posted = await bot.store.set_message(record.id, ref)
    assert posted is not None
    return posted


async def sweep_twice(bot: Bot, store: RedisStore, url: str, at: float) -> None:
    """Two replicas' sweepers, twice each, at once."""
    other = RedisStore.from_url(url, prefix=store.keys.prefix)
    try:
        posters = {"discord": bot.platform.poster()}
        sweepers = [Sweeper(store, posters), Sweeper(other, posters)]
        await asyncio.gather(*(s.sweep_once(now=at) for s in sweepers for _ in range(2)))
    finally:
        await other.aclose()


def replies_to(fake: FakeDiscord, record: AskRecord) -> list[dict[str, Any]]:
    """The creation bodies of the messages that reply to the ask's message."""
    assert record.message is not None
    bodies = [fake.history(m)[0] for m in list(fake.messages)]
    return [
        b
        for b in bodies
        if str((b.get("message_reference") or {}).get("message_id")) == record.message.message_id
    ]


def allowed(body: dict[str, Any]) -> dict[str, list[str]]:
    found = body["allowed_mentions"]
    return {k: [str(v) for v in vs] for k, vs in found.items() if vs or k == "parse"}


async def test_a_reminder_replies_once_and_notifies_exactly_the_answerers(
    bot: Bot, fake: FakeDiscord, store: RedisStore, redis_srv: RedisServer
) -> None:
    record = await ask(
        bot, FollowUps(remind_after=60), answerers=(ALICE, f"role:{REVIEWERS}", "not-an-id")
    )
    await sweep_twice(bot, store, redis_srv.url, record.created_at + 61)
    (reply,) = replies_to(fake, record)
    assert record.message is not None
    assert str(reply["message_reference"]["channel_id"]) == CHANNEL
    assert reply["message_reference"]["fail_if_not_exists"] is False
    at = int(record.created_at)
    assert reply["content"] == (
        f"⏰ <@{ALICE}>, <@&{REVIEWERS}>, not\\-an\\-id: the question from Build bot still waits "
        f"for an answer, since <t:{at}:f> (<t:{at}:R>). (reminder 1 of 3)"
    )
    assert allowed(reply) == {"parse": [], "users": [ALICE], "roles": [REVIEWERS]}
    assert not fake.errors()
    trail = [e.detail for e in await store.history(record.id) if e.kind == "reminded"]
    assert trail == [{"n": 1}]


async def test_a_reminder_of_an_approval_notifies_only_who_has_not_submitted(
    bot: Bot, fake: FakeDiscord, store: RedisStore, redis_srv: RedisServer
) -> None:
    """Two of them must agree and Alice has submitted: her part is done, so the reminder
    notifies Bob and the reviewers' role (whose members may not have), and not her."""
    record = await ask(
        bot,
        FollowUps(remind_after=60),
        answerers=(ALICE, BOB, f"role:{REVIEWERS}"),
        required=2,
    )
    go = (Answer(question="Deploy?", selected=("Go",)),)
    submitted = await store.submit(record.id, Responder(user_id=ALICE, name="alice"), go)
    assert submitted.outcome is SubmitOutcome.RECORDED
    await sweep_twice(bot, store, redis_srv.url, record.created_at + 61)
    (reply,) = replies_to(fake, record)
    assert reply["content"].startswith(
        f"⏰ <@{BOB}>, <@&{REVIEWERS}>: the question from Build bot still waits for an answer"
    )
    assert allowed(reply) == {"parse": [], "users": [BOB], "roles": [REVIEWERS]}
    assert not fake.errors()


async def test_a_reminder_when_anyone_may_answer_notifies_nobody(
    bot: Bot, fake: FakeDiscord, store: RedisStore, redis_srv: RedisServer
) -> None:
    follow = FollowUps(remind_after=60, remind_times=1)
    record = await ask(bot, follow, context={"asker": "@everyone **boss** <@123>"})
    await sweep_twice(bot, store, redis_srv.url, record.created_at + 61)
    (reply,) = replies_to(fake, record)
    assert reply["content"].startswith(
        "⏰ The question from \\@everyone \\*\\*boss\\*\\* \\<\\@123\\> still waits for an answer"
    )
    assert allowed(reply) == {"parse": []}  # no @here, no @everyone: the reply is the nudge


async def test_an_escalation_to_a_dm_posts_once_and_a_click_there_shows_both_ended(
    bot: Bot, fake: FakeDiscord, store: RedisStore, redis_srv: RedisServer
) -> None:
    boss = Destination(platform="discord", user=BOB)
    record = await ask(bot, FollowUps(escalate_after=30, escalate_to=boss))
    await sweep_twice(bot, store, redis_srv.url, record.created_at + 31)
    (escalated,) = [m for m in fake.messages.values() if m["channel_id"] == dm_channel(BOB)]
    assert escalated["components"]  # the same live question set
    done = await store.get(record.id)
    assert done is not None and [m.message_id for m in done.escalations] == [escalated["id"]]
    click = await fake.click(BOB, escalated, f"askb:pick:{record.id}:0:1")
    assert (await fake.responded(click))["type"] == 6
    assert record.message is not None
    first = fake.messages[record.message.message_id]
    await fake.changed(lambda: not first["components"] and not escalated["components"])
    for message in (first, escalated):
        assert message["content"] == f"Answered by <@{BOB}>"
        assert "✅ **Stop**" in message["embeds"][0]["description"]
    answered = await store.get(record.id)
    assert answered is not None and answered.status is AskStatus.ANSWERED
    assert not fake.errors()
