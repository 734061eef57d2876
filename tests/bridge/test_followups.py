"""Reminders and escalation end to end over every store backend, through the chat handler, the
sweeper and in-memory posters: each step posted once across sweepers, the escalation answered
like the first message, and every message of the ask shown ended."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from bridge.asking import AskPolicy, ChatHandler
from bridge.cli import main
from bridge.deferred import AskUserDeferred
from bridge.followups import parse_destination
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import (
    AskRecord,
    AskStatus,
    Destination,
    FollowUps,
    MessageRef,
    Responder,
    Submission,
)
from bridge.showing import Showing, show_final
from bridge.store.base import TIMER_TRIES, Store
from bridge.sweeper import Sweeper
from tests.support.engine_fixtures import StoreFactory, questions

ALICE = Responder(user_id="U_ALICE", name="Alice")
YES = (Answer(question="Question number 0?", selected=("Yes",)),)
HERE = Destination(platform="memory", channel="C1")


async def ask(handler: ChatHandler) -> str:
    deferred = await handler(questions().questions, {"asker": "Deploy bot"})
    assert isinstance(deferred, AskUserDeferred)
    return str(deferred.extra["ask_id"])


async def test_reminders_and_escalation_fire_once_across_sweepers(
    make_store: StoreFactory,
) -> None:
    first, second = await make_store(), await make_store()
    mine, theirs = MemoryPoster("memory"), MemoryPoster("other")
    posters = {"memory": mine, "other": theirs}
    policy = AskPolicy(
        mode="defer",
        answerers=("U_ALICE",),
        remind_after=60,
        remind_times=2,
        escalate_after=90,
        escalate_to="other:user:U_BOSS",
    )
    ask_id = await ask(ChatHandler(mine, first, HERE, policy))
    created = (await first.get(ask_id)).created_at  # type: ignore[union-attr]
    sweepers = [Sweeper(first, posters), Sweeper(second, posters)]

    async def sweep(at: float) -> None:
        await asyncio.gather(*(s.sweep_once(now=at) for s in sweepers for _ in range(2)))

    await sweep(created + 59)
    assert mine.reminders == [] and theirs.posts == []
    await sweep(created + 61)
    assert [(r.id, n) for r, n in mine.reminders] == [(ask_id, 1)]
    await sweep(created + 91)
    (escalated,) = theirs.posts
    assert escalated.id == ask_id
    assert escalated.destination == Destination(platform="other", user="U_BOSS")
    assert len(mine.reminders) == 1  # the next reminder is due 60 s after the first was posted
    await sweep(created + 120)
    assert len(mine.reminders) == 1
    await sweep(created + 122)
    await sweep(created + 500)
    assert [n for _, n in mine.reminders] == [1, 2]  # remind_times: no third
    record = await first.get(ask_id)
    assert record is not None and record.reminded == 2 and len(record.messages) == 2
    kinds = [e.kind for e in await first.history(ask_id)]
    assert kinds.count("reminded") == 2 and kinds.count("escalated") == 1


async def test_an_answer_shows_ended_on_both_messages(make_store: StoreFactory) -> None:
    store = await make_store(render_interval=0.2)
    mine, theirs = MemoryPoster("memory"), MemoryPoster("other")
    policy = AskPolicy(mode="defer", escalate_after=30, escalate_to="other:C_MANAGERS")
    ask_id = await ask(ChatHandler(mine, store, HERE, policy))
    created = (await store.get(ask_id)).created_at  # type: ignore[union-attr]
    sweeper = Sweeper(store, {"memory": mine, "other": theirs})
    await sweeper.sweep_once(now=created + 31)
    (escalation,) = (await store.get(ask_id)).escalations  # type: ignore[union-attr]
    answered = await store.submit(ask_id, ALICE, YES)  # clicked on either: routed by ask id
    assert answered.record is not None
    # a click handler holds one platform's poster: it shows its own message, not the other's
    assert not await show_final(store, mine, answered.record)
    assert [u.message for u in mine.updated(ask_id)] == [answered.record.message]
    assert theirs.updated(ask_id) == []
    # so the sweeper, holding every platform's poster, shows it on both (once the claim lapsed)
    await asyncio.sleep(0.3)
    await sweeper.sweep_once(now=time.time() + 31)  # past the answer's lease: nobody took it
    (shown,) = theirs.updated(ask_id)
    assert shown.message == escalation and shown.status is AskStatus.ANSWERED
    assert mine.updated(ask_id)[-1].status is AskStatus.ANSWERED
    await asyncio.sleep(0.3)
    assert await sweeper.sweep_once(now=time.time() + 62) == []  # marked shown
    assert len(theirs.updated(ask_id)) == 1


async def test_an_escalation_whose_post_fails_is_tried_again(make_store: StoreFactory) -> None:
    store = await make_store(timer_retry=5)
    mine = MemoryPoster("memory")
    broken = MemoryPoster("other", fail_post=RuntimeError("channel_not_found"))
    policy = AskPolicy(mode="defer", escalate_after=30, escalate_to="other:C_GONE")
    ask_id = await ask(ChatHandler(mine, store, HERE, policy))
    created = (await store.get(ask_id)).created_at  # type: ignore[union-attr]
    sweeper = Sweeper(store, {"memory": mine, "other": broken})
    assert await sweeper.follow_up(created + 31) == 0
    broken.fail_post = None
    assert await sweeper.follow_up(created + 33) == 0  # claimed: not before the retry interval
    assert await sweeper.follow_up(created + 37) == 1
    assert len(broken.posts) == 1


async def test_infinite_follow_ups_are_refused_not_stored_unreadable(store: Store) -> None:
    """JSON has no infinity: an infinite delay would be stored as ``null`` (a networked store's
    record then reads back as an escalation without its delay, which nobody can read)."""
    for bad in ({"remind_after": float("inf")}, {"escalate_after": float("inf")}):
        with pytest.raises(ValidationError, match="finite number"):
            FollowUps(**bad, escalate_to=HERE)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="finite number"):
            AskPolicy(**bad, escalate_to="C1")  # type: ignore[arg-type]
    huge = FollowUps(remind_after=1e308, escalate_after=1e308, escalate_to=HERE)
    record = AskRecord(
        questions=questions(), destination=HERE, expires_at=time.time() + 60, follow_ups=huge
    )
    await store.create(record)
    assert await store.get(record.id) == record  # huge but finite: never due, read back whole
    assert await store.claim_timers(time.time() + 30) == []


async def test_an_escalation_that_can_never_be_posted_fails_in_words_then_gives_up(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A destination the bot cannot post to: each claim's failure is one log line (no
    traceback) and one ``follow_up_failed`` event; after TIMER_TRIES claims the step is given
    up, never claimed again, and the ask stays answerable from its first message."""
    store = await make_store(timer_retry=5)
    mine = MemoryPoster("memory")
    broken = MemoryPoster("other", fail_post=RuntimeError("not_in_channel\n(the bot is not)"))
    policy = AskPolicy(mode="defer", escalate_after=30, escalate_to="other:C_GONE")
    ask_id = await ask(ChatHandler(mine, store, HERE, policy))
    created = (await store.get(ask_id)).created_at  # type: ignore[union-attr]
    sweeper = Sweeper(store, {"memory": mine, "other": broken})
    caplog.set_level(logging.WARNING, logger="bridge.sweeper")
    for i in range(TIMER_TRIES + 3):
        assert await sweeper.follow_up(created + 31 + 6 * i) == 0
    failures = [r for r in caplog.records if r.name == "bridge.sweeper"]
    assert len(failures) == TIMER_TRIES
    assert all(r.exc_info is None for r in failures)
    assert failures[0].getMessage() == (
        f"ask {ask_id}: could not post the escalation to other:C_GONE (RuntimeError: "
        f"not_in_channel (the bot is not)); claimed again later, {TIMER_TRIES} claims at most"
    )
    events = await store.history(ask_id)
    failed = [e for e in events if e.kind == "follow_up_failed"]
    assert len(failed) == TIMER_TRIES
    assert failed[0].detail == {
        "step": "escalate",
        "error": "RuntimeError: not_in_channel (the bot is not)",
    }
    (gave_up,) = [e for e in events if e.kind == "escalated"]
    assert gave_up.detail == {"gave_up": True}
    answered = await store.submit(ask_id, ALICE, YES)
    assert answered.record is not None and answered.record.status is AskStatus.ANSWERED
    assert answered.record.escalations == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("C0MANAGERS", Destination(platform="slack", channel="C0MANAGERS")),
        ("user:U0BOSS", Destination(platform="slack", user="U0BOSS")),
        ("discord:123456", Destination(platform="discord", channel="123456")),
        ("discord:user:42", Destination(platform="discord", user="42")),
        ("slack:U0BOSS", Destination(platform="slack", channel="U0BOSS")),
    ],
)
def test_escalation_destinations(text: str, expected: Destination) -> None:
    assert parse_destination(text, "slack") == expected


@pytest.mark.parametrize(
    "text",
    [
        *("", "user:", "discord:", "C0 MANAGERS", "<!channel>", "#ops", "user:user:U1"),
        *("slack:discord:C1", "C\u0661", "C1\u200b", "<@U1>", "C" * 65, "user:" + "9" * 65),
    ],
)
def test_a_bad_escalation_destination_is_refused_clearly(text: str) -> None:
    with pytest.raises(ValueError, match="give a channel id or user:ID"):
        parse_destination(text, "slack")


def test_policy_follow_ups_are_checked() -> None:
    with pytest.raises(ValidationError, match="go together"):
        AskPolicy(escalate_after=60)
    with pytest.raises(ValidationError, match="go together"):
        AskPolicy(escalate_to="C1")
    with pytest.raises(ValidationError, match="greater than 0"):
        AskPolicy(remind_after=0)
    with pytest.raises(ValidationError, match="give a channel id"):
        AskPolicy(escalate_after=60, escalate_to="#ops")
    assert AskPolicy().follow_ups("slack") is None
    follow = AskPolicy(remind_after=900, escalate_after=3600, escalate_to="C0MGR").follow_ups("x")
    assert follow is not None and follow.escalate_to == Destination(platform="x", channel="C0MGR")
    assert follow.remind_times == 3


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--escalate-after", "60"], "escalate_after and escalate_to go together"),
        (["--escalate-to", "C0MGR"], "escalate_after and escalate_to go together"),
        (["--remind-after", "0"], "--remind-after: Input should be greater than 0"),
        (["--remind-after", "9", "--remind-times", "0"], "--remind-times: Input should be"),
        (["--remind-times", "5"], "--remind-times needs --remind-after"),
        (["--escalate-after", "9", "--escalate-to", "#ops"], "escalate to '#ops': give a"),
        (["--remind-after", "nan"], "--remind-after: Input should be a finite number"),
        (["--remind-after", "inf"], "--remind-after: Input should be a finite number"),
        (["--remind-after", "-5"], "--remind-after: Input should be greater than 0"),
        (["--escalate-after", "inf", "--escalate-to", "C0MGR"], "--escalate-after: Input should"),
        (["--expires", "inf"], "the expiry must be more than zero seconds and at most"),
        (["--expires", "1e300"], "the expiry must be more than zero seconds and at most"),
    ],
)
def test_ask_refuses_bad_follow_ups_in_one_line_before_anything_is_reached(
    extra: list[str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1")  # never reached
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-unused")
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:1/api/")  # never reached
    path = tmp_path / "q.json"
    path.write_text(json.dumps([q.model_dump(mode="json") for q in questions().questions]))
    assert main(["ask", "--channel", "C1", *extra, str(path)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ask-bridge ask: ") and said in line


def test_a_slack_reminder_pings_the_channel_only_where_there_is_one() -> None:
    from platforms.slack.markup import reminder_text

    now = time.time()
    record = AskRecord(
        questions=questions(),
        destination=Destination(platform="slack", user="U0BOSS"),
        context={"asker": "<!channel> & <@U0X>"},
        created_at=now,
        expires_at=now + 60,
        follow_ups=FollowUps(remind_after=10, remind_times=1),
        message=MessageRef(platform="slack", channel="D0BOSS", message_id="1.2"),
    )
    text = reminder_text(record, 1)
    assert text.startswith("⏰ The question from &lt;!channel&gt; &amp; &lt;@U0X&gt; still waits")
    assert f"since <!date^{int(now)}^{{date_short_pretty}} at {{time}}|" in text
    in_channel = record.model_copy(
        update={
            "destination": Destination(platform="slack", channel="C0TEAM"),
            "message": MessageRef(platform="slack", channel="C0TEAM", message_id="1.2"),
        }
    )
    assert reminder_text(in_channel, 1).startswith("⏰ <!here>: the question from &lt;!channel&gt;")


async def test_reminders_of_an_approval_mention_only_who_has_not_submitted(
    make_store: StoreFactory,
) -> None:
    """Through the sweeper, on every store: the reminder of an ask two people must agree on
    mentions the people named who have not submitted, and the group still (some of its members
    may not have); once every person named has submitted it mentions nobody, not the channel."""
    from platforms.slack.markup import reminder_text

    store = await make_store()
    poster = MemoryPoster("memory")
    policy = AskPolicy(
        mode="defer",
        required=2,
        answerers=("U0ALICE", "U0BOB", "S0OPS"),
        remind_after=60,
        remind_times=3,
    )
    ask_id = await ask(ChatHandler(poster, store, HERE, policy))
    created = (await store.get(ask_id)).created_at  # type: ignore[union-attr]
    alice = Responder(user_id="U0ALICE", name="Alice")
    assert (await store.submit(ask_id, alice, YES)).ok
    sweeper = Sweeper(store, {"memory": poster})
    await sweeper.sweep_once(now=created + 61)
    ((first, _),) = poster.reminders
    assert reminder_text(first, 1).startswith("⏰ <@U0BOB>, <!subteam^S0OPS>: the question from")
    bob = Responder(user_id="U0BOB", name="Bob")
    no = (Answer(question="Question number 0?", selected=("No",)),)
    assert (await store.submit(ask_id, bob, no)).ok  # disagrees: still pending
    await sweeper.sweep_once(now=created + 122)
    assert reminder_text(poster.reminders[1][0], 2).startswith("⏰ <!subteam^S0OPS>: the question")
    # only people named, all of them submitted: nobody is nudged by name, nor the channel
    everyone = poster.reminders[1][0].model_copy(update={"answerers": ("U0ALICE", "U0BOB")})
    text = reminder_text(everyone, 2)
    assert text.startswith("⏰ The question from") and "<!here>" not in text


def test_a_discord_reminder_of_an_approval_notifies_only_who_has_not_submitted() -> None:
    from platforms.discord.markup import reminder_content

    now = time.time()
    alice, bob, role = "100000000000000001", "100000000000000002", "500000000000000001"
    record = AskRecord(
        questions=questions(),
        destination=Destination(platform="discord", channel="42"),
        answerers=(alice, bob, f"role:{role}"),
        required=2,
        created_at=now,
        expires_at=now + 600,
        follow_ups=FollowUps(remind_after=10, remind_times=1),
        message=MessageRef(platform="discord", channel="42", message_id="7"),
        submissions=(Submission(user_id=alice, at=now, answers=YES),),
    )
    content, allowed = reminder_content(record, 1)
    assert content.startswith(f"⏰ <@{bob}>, <@&{role}>: the question from An agent still waits")
    assert allowed.to_dict() == {"parse": [], "users": [int(bob)], "roles": [int(role)]}


async def test_submissions_show_on_every_message_of_the_platform(store: Store) -> None:
    mine = MemoryPoster("memory")
    policy = AskPolicy(mode="defer", required=2, escalate_after=30, escalate_to="memory:C_MANAGERS")
    ask_id = await ask(ChatHandler(mine, store, HERE, policy))
    created = (await store.get(ask_id)).created_at  # type: ignore[union-attr]
    await Sweeper(store, {"memory": mine}).sweep_once(now=created + 31)
    record = await store.get(ask_id)
    assert record is not None and len(record.messages) == 2
    await store.submit(ask_id, ALICE, YES)  # one of two: recorded, still pending
    await Showing(store, mine).show_progress(ask_id)
    shown = mine.updated(ask_id)
    assert [u.message for u in shown] == list(record.messages)
    assert all(u.status is AskStatus.PENDING and len(u.submissions) == 1 for u in shown)
