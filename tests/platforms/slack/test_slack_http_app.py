"""The Bolt app over real HTTP: signed payloads in, calls to the fake Slack out, state in Redis."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError

from bridge import replies
from bridge.http_server import HttpServer
from bridge.models import Answer, QuestionSet
from bridge.record import AskRecord, AskStatus, Destination, FollowUps, Responder
from bridge.store.base import SubmitOutcome
from bridge.store.redis import RedisStore
from bridge.sweeper import Sweeper
from platforms.slack.client import make_client
from platforms.slack.groups import GroupResolver
from platforms.slack.poster import SlackPoster
from tests.support.redis_server import redis_server
from tests.support.samples import q
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.payloads import (
    block_actions,
    checks,
    find_action,
    form_body,
    form_values,
    radio,
    signed,
    typed,
    view_submission,
)
from tests.support.slack.slack_harness import CHANNEL, Bolt, http_receiver

DEPLOY = q("Ship the release now?", "Deploy", ["Yes", "No", "Wait"])


def click(bolt: Bolt, record: Any, user: str, prefix: str) -> dict[str, Any]:
    ref = record.message
    return block_actions(bolt.fake, ref.channel, ref.message_id, user, prefix)


def ephemerals_to(fake: FakeSlack, user: str) -> list[str]:
    return [c["text"] for c in fake.ok_calls("chat.postEphemeral") if c["user"] == user]


async def test_one_click_answers_and_shows_the_message_without_controls(bolt: Bolt) -> None:
    record = await bolt.ask([DEPLOY])
    status, _ = await bolt.send(click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:1"))
    assert status == 200
    (update,) = await bolt.fake.wait_for("chat.update")
    done = await bolt.store.get(record.id)
    assert done is not None and done.status is AskStatus.ANSWERED
    assert done.answers is not None and done.answers[0].selected == ("No",)
    assert done.answered_by is not None and done.answered_by.user_id == "U0ALICE"
    assert record.message is not None and update["ts"] == record.message.message_id
    assert all(b["type"] != "actions" for b in update["blocks"])
    assert "Answered by <@U0ALICE>" in json.dumps(update["blocks"])


async def test_double_click_answers_once(bolt: Bolt) -> None:
    record = await bolt.ask([DEPLOY])
    first = click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0")
    second = click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0")
    assert (await bolt.send(first))[0] == 200
    assert (await bolt.send(second))[0] == 200
    await bolt.fake.wait_for("chat.postEphemeral")
    # the repeat wants to re-render too, but the final state was just shown: one update
    updates = await bolt.fake.wait_for("chat.update", count=1)
    assert ephemerals_to(bolt.fake, "U0ALICE") == [replies.RECORDED]
    done = await bolt.store.get(record.id)
    assert done is not None and done.answers is not None
    assert done.answers[0].selected == ("Yes",)
    history = [e.kind for e in await bolt.store.history(record.id)]
    assert history.count("answered") == 1
    for update in updates:  # it shows the one final state, with no controls
        assert all(b["type"] != "actions" for b in update["blocks"])
        assert "Answered by <@U0ALICE>" in json.dumps(update["blocks"])


async def test_retry_after_a_timed_out_commit_shows_the_final_state(bolt: Bolt) -> None:
    """The store committed Alice's answer but her click timed out ("try again"), so nothing
    re-rendered it; her retry is REPEATED and must bring the message up to date."""
    record = await bolt.ask([DEPLOY])
    answer = [Answer(question=DEPLOY["question"], selected=("No",))]
    committed = await bolt.store.submit(record.id, Responder(user_id="U0ALICE"), answer)
    assert committed.outcome is SubmitOutcome.ACCEPTED  # ... and nobody re-rendered
    assert bolt.fake.ok_calls("chat.update") == []
    await bolt.send(click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:1"))
    (update,) = await bolt.fake.wait_for("chat.update")
    assert record.message is not None and update["ts"] == record.message.message_id
    assert all(b["type"] != "actions" for b in update["blocks"])
    assert "Answered by <@U0ALICE>" in json.dumps(update["blocks"])
    shown = bolt.fake.messages[(record.message.channel, record.message.message_id)]
    assert shown["blocks"] == update["blocks"]


async def test_retry_with_another_answer_after_a_timed_out_commit_shows_the_final_state(
    bolt: Bolt,
) -> None:
    """Alice's first answer committed but her click timed out ("try again"), so nothing
    re-rendered it; she retries with a different answer. Her retry is ALREADY_ANSWERED (her own
    first answer stands) and must still bring the message up to date: once, for one click."""
    assert bolt.interactions is not None
    record = await bolt.ask([DEPLOY])
    answer = [Answer(question=DEPLOY["question"], selected=("No",))]
    committed = await bolt.store.submit(record.id, Responder(user_id="U0ALICE"), answer)
    assert committed.outcome is SubmitOutcome.ACCEPTED  # ... and nobody re-rendered
    await bolt.send(click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0"))  # "Yes"
    await bolt.fake.wait_for("chat.postEphemeral")
    assert ephemerals_to(bolt.fake, "U0ALICE") == ["This was already answered by <@U0ALICE>."]
    (update,) = await bolt.fake.wait_for("chat.update")
    await bolt.interactions.drain()
    assert len(bolt.fake.ok_calls("chat.update")) == 1  # one re-render per click, no storm
    assert record.message is not None and update["ts"] == record.message.message_id
    assert all(b["type"] != "actions" for b in update["blocks"])
    assert "Answered by <@U0ALICE>" in json.dumps(update["blocks"])
    shown = bolt.fake.messages[(record.message.channel, record.message.message_id)]
    assert shown["blocks"] == update["blocks"]
    done = await bolt.store.get(record.id)
    assert done is not None and done.answers == tuple(answer)  # the first answer stands


async def test_a_failed_showing_is_logged_not_lost(
    bolt: Bolt, caplog: pytest.LogCaptureFixture
) -> None:
    assert bolt.interactions is not None
    record = await bolt.ask([DEPLOY])
    bolt.fake.fail_next("chat.update", "internal_error")
    with caplog.at_level(logging.ERROR, logger="bridge.rendering"):
        await bolt.send(click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0"))
        await bolt.interactions.drain()
    logged = [r for r in caplog.records if r.name == "bridge.rendering"]
    assert any(
        "could not be re-rendered" in r.getMessage()
        and r.exc_info is not None
        and isinstance(r.exc_info[1], SlackApiError)
        for r in logged
    ), logged
    done = await bolt.store.get(record.id)
    assert done is not None and done.status is AskStatus.ANSWERED  # the answer stands


async def test_a_cut_button_label_answers_with_the_full_label(bolt: Bolt) -> None:
    full = "Roll out to every region at once, starting with " + "eu-west-1, " * 9 + "then us"
    assert 75 < len(full) <= 200
    record = await bolt.ask([q("How to roll out?", "Rollout", [full, "Canary first"])])
    assert record.message is not None
    shown = bolt.fake.messages[(record.message.channel, record.message.message_id)]
    _, button = find_action(shown, f"askb:pick:{record.id}:0:0")
    assert button["text"]["text"].endswith("…") and len(button["text"]["text"]) <= 75
    await bolt.send(click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0"))
    await bolt.fake.wait_for("chat.update")
    done = await bolt.store.get(record.id)
    assert done is not None and done.answers is not None
    assert done.answers[0].selected == (full,)


@pytest.mark.parametrize(
    ("status", "explanation"),
    [
        (AskStatus.EXPIRED, "This question expired before anyone answered it."),
        (AskStatus.CANCELLED, "This question was cancelled."),
    ],
)
@pytest.mark.parametrize("control", ["pick", "answer"])
async def test_late_click_on_an_ended_ask_is_explained_and_changes_nothing(
    bolt: Bolt, status: AskStatus, explanation: str, control: str
) -> None:
    questions = [DEPLOY] if control == "pick" else FORM
    record = await bolt.ask(questions)
    prefix = f"askb:pick:{record.id}:0:1" if control == "pick" else f"askb:answer:{record.id}"
    stale = click(bolt, record, "U0BOB", prefix)  # the message still shows its controls
    closed = await bolt.store.close(record.id, status)
    assert closed is not None
    before = await bolt.store.get(record.id)
    await bolt.send(stale)
    (note,) = await bolt.fake.wait_for("chat.postEphemeral", lambda c: c["user"] == "U0BOB")
    assert note["text"] == explanation and note["channel"] == CHANNEL
    after = await bolt.store.get(record.id)
    assert after is not None and before is not None
    # unchanged, but for the descriptions, which go once the click's re-render showed it
    assert after.questions in (before.questions, before.questions.undescribed())
    assert after.model_copy(update={"questions": before.questions}) == before
    assert after.status is status and after.answers is None and after.answered_by is None
    assert bolt.fake.ok_calls("views.open") == []
    # a click that finds the ask ended shows its final state (in case whoever ended it could not)
    (update,) = await bolt.fake.wait_for("chat.update")
    assert not any(b["type"] == "actions" for b in update["blocks"])


async def test_late_click_is_told_who_answered(bolt: Bolt) -> None:
    record = await bolt.ask([DEPLOY])
    stale = click(bolt, record, "U0BOB", f"askb:pick:{record.id}:0:2")  # rendered before the answer
    await bolt.send(click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0"))
    await bolt.fake.wait_for("chat.update")
    await bolt.send(stale)
    await bolt.fake.wait_for("chat.postEphemeral", lambda c: c["user"] == "U0BOB")
    assert ephemerals_to(bolt.fake, "U0BOB") == ["This was already answered by <@U0ALICE>."]
    done = await bolt.store.get(record.id)
    assert done is not None and done.answers is not None
    assert done.answers[0].selected == ("Yes",)
    assert bolt.interactions is not None
    await bolt.interactions.drain()
    updates = bolt.fake.ok_calls("chat.update")
    assert len(updates) == 1  # the late click's re-render is throttled: shown just now
    for update in updates:  # it shows the one final state, with no controls
        assert all(b["type"] != "actions" for b in update["blocks"])
        assert "Answered by <@U0ALICE>" in json.dumps(update["blocks"])


async def test_unauthorised_user_gets_an_ephemeral_and_nothing_changes(bolt: Bolt) -> None:
    record = await bolt.ask([DEPLOY], answerers=("U0BOSS", "S0REVIEW"))
    await bolt.send(click(bolt, record, "U0MALLORY", f"askb:pick:{record.id}:0:0"))
    (msg,) = await bolt.fake.wait_for("chat.postEphemeral")
    assert msg["user"] == "U0MALLORY" and msg["channel"] == CHANNEL
    assert "you can't answer this one" in msg["text"]
    still = await bolt.store.get(record.id)
    assert still is not None and still.status is AskStatus.PENDING and still.answers is None
    assert bolt.fake.ok_calls("chat.update") == []


async def test_an_accepting_click_is_stored_before_its_200(bolt: Bolt) -> None:
    """The verdict is stored before Slack sees the ack: a process killed right after the 200
    cannot lose the click. A slow group lookup (300 ms) makes the order observable."""
    record = await bolt.ask([DEPLOY], answerers=("S0REVIEW",))
    bolt.fake.delay("usergroups.users.list", 0.3)
    status, _ = await bolt.send(click(bolt, record, "U0GROUPIE", f"askb:pick:{record.id}:0:2"))
    assert status == 200
    done = await bolt.store.get(record.id)  # read at once: no waiting for background work
    assert done is not None and done.status is AskStatus.ANSWERED


async def test_a_slow_store_acks_in_time_and_tells_the_verdict_later(bolt: Bolt) -> None:
    """Past the answering layer's budget the click is acked first (Slack's 3 s still hold) and
    the person learns the outcome from an ephemeral message."""
    assert bolt.interactions is not None
    bolt.interactions.clicks.ack_budget = 0.05
    record = await bolt.ask([DEPLOY], answerers=("S0REVIEW",))
    bolt.fake.delay("usergroups.users.list", 0.5)
    started = time.monotonic()
    status, _ = await bolt.send(click(bolt, record, "U0MALLORY", f"askb:pick:{record.id}:0:2"))
    assert status == 200 and time.monotonic() - started < 0.4
    (note,) = await bolt.fake.wait_for("chat.postEphemeral", lambda c: c["user"] == "U0MALLORY")
    assert "you can't answer this one" in note["text"]


@pytest.mark.parametrize(
    "action_id",
    [
        "askb:pick:{id}:0:-1",
        "askb:pick:{id}:0",
        "askb:pick:{id}:0:7",
        "askb:zap:{id}",
        "askb:next:{id}:1",
    ],
)
async def test_a_malformed_action_id_of_ours_is_explained(bolt: Bolt, action_id: str) -> None:
    record = await bolt.ask([DEPLOY])
    forged = click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0")
    forged["actions"][0]["action_id"] = action_id.format(id=record.id)
    status, _ = await bolt.send(forged)
    assert status == 200
    (note,) = await bolt.fake.wait_for("chat.postEphemeral", lambda c: c["user"] == "U0ALICE")
    assert note["text"] == replies.BAD_CONTROL
    await pending_still(bolt, record.id)


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"q7.pick": {"pick": {"type": "radio_buttons", "selected_option": {"value": "0"}}}},
        {"q0.pick": {"pick": {"type": "radio_buttons", "selected_option": {"value": "9"}}}},
        {"q0.pick": {"pick": {"type": "checkboxes", "selected_options": [{"value": "x"}]}}},
    ],
    ids=["empty", "no-such-question", "option-out-of-range", "not-an-index"],
)
async def test_a_malformed_form_is_refused_and_changes_nothing(
    bolt: Bolt, values: dict[str, Any]
) -> None:
    record = await bolt.ask(FORM)
    view_id = await open_modal(bolt, record, "U0ALICE", f"askb:answer:{record.id}")
    status, body = await bolt.send(view_submission(bolt.fake, view_id, "U0ALICE", values))
    assert status == 200
    answer = json.loads(body)
    assert answer["response_action"] == "errors" and answer["errors"]
    await pending_still(bolt, record.id)


async def pending_still(bolt: Bolt, ask_id: str) -> None:
    still = await bolt.store.get(ask_id)
    assert still is not None and still.status is AskStatus.PENDING and still.answers is None
    assert bolt.fake.ok_calls("chat.update") == []


async def test_user_group_member_may_answer(bolt: Bolt) -> None:
    record = await bolt.ask([DEPLOY], answerers=("U0BOSS", "S0REVIEW"))
    await bolt.send(click(bolt, record, "U0GROUPIE", f"askb:pick:{record.id}:0:2"))
    await bolt.fake.wait_for("chat.update")
    done = await bolt.store.get(record.id)
    assert done is not None and done.answered_by is not None
    assert done.answered_by.groups == ("S0REVIEW",)
    assert [c["usergroup"] for c in bolt.fake.ok_calls("usergroups.users.list")] == ["S0REVIEW"]


async def test_concurrent_clicks_share_one_group_lookup(fake: FakeSlack) -> None:
    groups = GroupResolver(make_client(BOT_TOKEN, fake.url))
    found = await asyncio.gather(
        *(groups.groups_of(user, ["U0BOSS", "S0REVIEW"]) for user in ["U0GROUPIE", "U0X"] * 5)
    )
    assert found == [("S0REVIEW",), ()] * 5
    assert len(fake.ok_calls("usergroups.users.list")) == 1


async def test_a_failed_group_lookup_is_not_cached(fake: FakeSlack) -> None:
    groups = GroupResolver(make_client(BOT_TOKEN, fake.url))
    with pytest.raises(SlackApiError):
        await groups.members("S0NOSUCH")
    fake.usergroups["S0NOSUCH"] = ["U0NEW"]
    assert await groups.members("S0NOSUCH") == frozenset({"U0NEW"})


@pytest.mark.parametrize("forgery", ["wrong-secret", "stale", "tampered"])
async def test_forged_or_stale_signature_is_refused(bolt: Bolt, forgery: str) -> None:
    record = await bolt.ask([DEPLOY])
    payload = click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0")
    body = form_body(payload)
    if forgery == "wrong-secret":
        headers = signed(body, secret="not-the-secret")
    elif forgery == "stale":
        headers = signed(body, at=time.time() - 6 * 60)
    else:
        headers = signed(body)
        body = body.replace("U0ALICE", "U0EVE")
    async with bolt.session.post(bolt.url, data=body, headers=headers) as resp:
        assert resp.status == 401
    # A good request afterwards is handled, proving the refused one left nothing behind.
    await bolt.send(click(bolt, record, "U0BOB", f"askb:pick:{record.id}:0:1"))
    await bolt.fake.wait_for("chat.update")
    done = await bolt.store.get(record.id)
    assert done is not None and done.answered_by is not None
    assert done.answered_by.user_id == "U0BOB"
    assert bolt.fake.ok_calls("chat.postEphemeral") == []


async def open_modal(bolt: Bolt, record: Any, user: str, prefix: str) -> str:
    status, _ = await bolt.send(click(bolt, record, user, prefix))
    assert status == 200
    (opened,) = await bolt.fake.wait_for("views.open")
    view_id = next(
        v for v, stored in bolt.fake.views.items() if stored["blocks"] == opened["view"]["blocks"]
    )
    return view_id


FORM = [
    q("Which region?", "Region", ["eu", "us", "ap"]),
    q("Which checks to run?", "Checks", ["lint", "types", "tests", "bench"], multi=True),
    q("Who reviews?", "Review", ["Ana", "Bo"]),
    q("Notify whom?", "Notify", ["team", "owner"], multi=True),
]


async def test_four_question_form_with_other_text_and_selections(bolt: Bolt) -> None:
    record = await bolt.ask(FORM)
    view_id = await open_modal(bolt, record, "U0ALICE", f"askb:answer:{record.id}")
    values = form_values(
        (radio(1), None),
        (checks(0, 2), "also fuzzing"),  # Other… with selections
        (radio(None), "Carla, she knows the code"),  # single-select answered by typed text
        (checks(), "<!channel> everyone"),  # Other… alone, with an injection attempt
    )
    status, body = await bolt.send(view_submission(bolt.fake, view_id, "U0ALICE", values))
    assert status == 200 and body == ""  # closes the modal
    (update,) = await bolt.fake.wait_for("chat.update")
    done = await bolt.store.get(record.id)
    assert done is not None and done.answers is not None
    got = [(a.selected, a.other_text) for a in done.answers]
    assert got == [
        (("us",), None),
        (("lint", "tests"), "also fuzzing"),
        ((), "Carla, she knows the code"),
        ((), "<!channel> everyone"),
    ]
    rendered = json.dumps(update["blocks"]) + update["text"]
    assert "<!channel>" not in rendered and "&lt;!channel&gt; everyone" in rendered


async def test_incomplete_form_gets_errors_and_keeps_the_ask_open(bolt: Bolt) -> None:
    record = await bolt.ask(FORM)
    view_id = await open_modal(bolt, record, "U0ALICE", f"askb:answer:{record.id}")
    values = form_values(
        (radio(0), None), (checks(), None), (radio(1), "and this"), (checks(1), None)
    )
    status, body = await bolt.send(view_submission(bolt.fake, view_id, "U0ALICE", values))
    assert status == 200
    assert json.loads(body) == {
        "response_action": "errors",
        "errors": {"q1.pick": replies.NEED_ANSWER, "q2.other": replies.NOT_BOTH},
    }
    still = await bolt.store.get(record.id)
    assert still is not None and still.status is AskStatus.PENDING


async def test_other_alone_on_the_one_click_shape(bolt: Bolt) -> None:
    record = await bolt.ask([DEPLOY])
    view_id = await open_modal(bolt, record, "U0ALICE", f"askb:other:{record.id}:0")
    assert bolt.fake.views[view_id]["callback_id"] == "askb:other"
    values = {"q0.other": {"text": {"type": "plain_text_input", "value": "  after the demo  "}}}
    status, _ = await bolt.send(view_submission(bolt.fake, view_id, "U0ALICE", values))
    assert status == 200
    await bolt.fake.wait_for("chat.update")
    done = await bolt.store.get(record.id)
    assert done is not None and done.answers is not None
    assert (done.answers[0].selected, done.answers[0].other_text) == ((), "after the demo")


async def test_typed_text_is_judged_by_what_the_person_sees(bolt: Bolt) -> None:
    """The text field holding only zero-width characters is refused as an empty one is; hidden
    characters inside an answer are not kept, and a line separator is a newline."""
    record = await bolt.ask([DEPLOY])
    view_id = await open_modal(bolt, record, "U0ALICE", f"askb:other:{record.id}:0")
    values = {"q0.other": {"text": typed("\u200b \u2060\u200b")}}
    status, body = await bolt.send(view_submission(bolt.fake, view_id, "U0ALICE", values))
    assert status == 200
    assert json.loads(body) == {
        "response_action": "errors",
        "errors": {"q0.other": replies.NEED_ANSWER},
    }
    await pending_still(bolt, record.id)
    values = {"q0.other": {"text": typed("after\u200b the\u2028demo")}}
    status, _ = await bolt.send(view_submission(bolt.fake, view_id, "U0ALICE", values))
    assert status == 200
    await bolt.fake.wait_for("chat.update")
    done = await bolt.store.get(record.id)
    assert done is not None and done.answers is not None
    assert done.answers[0].other_text == "after the\ndemo"


async def test_a_reminder_of_an_approval_mentions_only_who_has_not_submitted(bolt: Bolt) -> None:
    """Through the sweeper: two must agree and Alice has submitted, so her part is done; Bob
    and the reviewers' group (some of whom may not have) are reminded."""
    now = time.time()
    record = AskRecord(
        questions=QuestionSet.model_validate({"questions": [DEPLOY]}),
        destination=Destination(platform="slack", channel=CHANNEL),
        answerers=("U0ALICE", "U0BOB", "S0REVIEW"),
        required=2,
        context={"asker": "Build bot"},
        created_at=now,
        expires_at=now + 300,
        follow_ups=FollowUps(remind_after=60, remind_times=1),
    )
    await bolt.store.create(record)
    ref = await bolt.poster.post(record)
    await bolt.store.set_message(record.id, ref)
    yes = (Answer(question="Ship the release now?", selected=("Yes",)),)
    recorded = await bolt.store.submit(record.id, _responder("U0ALICE"), yes)
    assert recorded.outcome is SubmitOutcome.RECORDED
    assert await Sweeper(bolt.store, {"slack": bolt.poster}).follow_up(now + 61) == 1
    (reminder,) = [
        c for c in bolt.fake.ok_calls("chat.postMessage") if c.get("thread_ts") == ref.message_id
    ]
    assert reminder["text"].startswith(
        "⏰ <@U0BOB>, <!subteam^S0REVIEW>: the question from Build bot still waits"
    )


async def test_answered_meanwhile_modal_shows_who(bolt: Bolt) -> None:
    record = await bolt.ask(FORM[:2])
    view_id = await open_modal(bolt, record, "U0BOB", f"askb:answer:{record.id}")
    await bolt.store.submit(record.id, _responder("U0ALICE"), _answers(record))
    values = form_values((radio(0), None), (checks(1), None))
    status, body = await bolt.send(view_submission(bolt.fake, view_id, "U0BOB", values))
    reply = json.loads(body)
    assert status == 200 and reply["response_action"] == "update"
    assert "already answered by <@U0ALICE>" in json.dumps(reply["view"])
    # the answer came in without a re-render (say its click timed out): this submission does it
    (update,) = await bolt.fake.wait_for("chat.update")
    assert all(b["type"] != "actions" for b in update["blocks"])
    assert "Answered by <@U0ALICE>" in json.dumps(update["blocks"])
    assert bolt.interactions is not None
    await bolt.interactions.drain()
    assert len(bolt.fake.ok_calls("chat.update")) == 1


async def test_unauthorised_answer_button_opens_no_modal(bolt: Bolt) -> None:
    record = await bolt.ask(FORM, answerers=("U0BOSS",))
    await bolt.send(click(bolt, record, "U0MALLORY", f"askb:answer:{record.id}"))
    (msg,) = await bolt.fake.wait_for("chat.postEphemeral")
    assert "can't answer" in msg["text"]
    assert bolt.fake.ok_calls("views.open") == []


async def test_slow_preparation_opens_a_loading_modal_first(
    fake: FakeSlack, store: RedisStore
) -> None:
    receiver = http_receiver(fake, store, fast_path=0.0)
    server = HttpServer(receiver.routes(), "127.0.0.1", 0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            bolt = Bolt(server, session, fake, store, SlackPoster(receiver.client))
            record = await bolt.ask(FORM)
            await bolt.send(click(bolt, record, "U0ALICE", f"askb:answer:{record.id}"))
            (opened,) = await fake.wait_for("views.open")
            (updated,) = await fake.wait_for("views.update")
    finally:
        await server.stop()
    assert "Loading" in json.dumps(opened["view"])
    assert updated["view"]["callback_id"] == "askb:form"


async def test_store_down_during_a_click(fake: FakeSlack, tmp_path: Path) -> None:
    with redis_server(tmp_path / "r", appendonly=True) as srv:
        store = RedisStore.from_url(srv.url, prefix=f"t{uuid.uuid4().hex[:8]}")
        receiver = http_receiver(fake, store, store_timeout=0.5)
        server = HttpServer(receiver.routes(), "127.0.0.1", 0)
        await server.start()
        try:
            async with aiohttp.ClientSession() as session:
                bolt = Bolt(server, session, fake, store, SlackPoster(receiver.client))
                record = await bolt.ask([DEPLOY])
                early = click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0")
                srv.kill()
                assert (await bolt.send(early))[0] == 200
                (msg,) = await fake.wait_for("chat.postEphemeral", within=15)
                assert msg["text"] == replies.TRY_AGAIN and msg["user"] == "U0ALICE"
                srv.start()
                still = await store.get(record.id)
                assert still is not None and still.status is AskStatus.PENDING
                assert still.answers is None and fake.ok_calls("chat.update") == []
                await bolt.send(click(bolt, record, "U0ALICE", f"askb:pick:{record.id}:0:0"))
                await fake.wait_for("chat.update")
        finally:
            await server.stop()
            await store.aclose()


async def test_rate_limited_post_is_retried_and_posted_once(bolt: Bolt) -> None:
    bolt.fake.rate_limit("chat.postMessage", retry_after=0)
    record = await bolt.ask([DEPLOY])
    posts = [c for c in bolt.fake.calls if c.method == "chat.postMessage"]
    assert [c.ok for c in posts] == [False, True]
    assert len(bolt.fake.messages) == 1 and record.message is not None


def _responder(user_id: str) -> Any:
    from bridge.record import Responder

    return Responder(user_id=user_id)


def _answers(record: Any) -> list[Any]:
    from bridge.models import Answer

    return [
        Answer(question=qq.question, selected=(qq.options[0].label,))
        for qq in record.questions.questions
    ]


async def test_direct_message_destination_posts_to_the_user(bolt: Bolt) -> None:
    from bridge.models import QuestionSet
    from bridge.record import AskRecord, Destination

    record = AskRecord(
        questions=QuestionSet.model_validate({"questions": [DEPLOY]}),
        destination=Destination(platform="slack", user="U0ALICE"),
        expires_at=time.time() + 60,
    )
    ref = await bolt.poster.post(record)
    assert ref.channel == "D0ALICE"
    (post,) = bolt.fake.ok_calls("chat.postMessage")
    assert post["channel"] == "U0ALICE" and post["unfurl_links"] is False
