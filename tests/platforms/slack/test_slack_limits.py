"""Asks at the contract's maximum sizes, posted and updated through the fake Slack, which refuses
what Slack refuses (:mod:`tests.support.slack.slack_rules`): issue 23's two failures, end to end,
and a broken renderer the fake does refuse."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import ButtonElement, SectionBlock

from bridge.models import MAX_DESCRIPTION, MAX_LABEL, MAX_QUESTION_TEXT, Answer, QuestionSet
from bridge.record import AskRecord, AskStatus, Destination, Responder
from bridge.text import shown
from platforms.slack import markup
from platforms.slack.client import make_client
from platforms.slack.poster import SlackPoster
from platforms.slack.text import escape
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack

CHANNEL = "C0GENERAL"
DESCRIPTION = "d" * MAX_DESCRIPTION


def at_maximum(questions: int, *, multi: bool) -> AskRecord:
    """``questions`` questions of four options, in plain ASCII, every text at its maximum."""
    qs = QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": "q" * (MAX_QUESTION_TEXT - 1) + str(i),
                    "header": f"Header {i}",
                    "multiSelect": multi,
                    "options": [
                        {"label": "l" * (MAX_LABEL - 1) + str(j), "description": DESCRIPTION}
                        for j in range(4)
                    ],
                }
                for i in range(questions)
            ]
        }
    )
    return AskRecord(
        questions=qs,
        destination=Destination(platform="slack", channel=CHANNEL),
        expires_at=time.time() + 600,
    )


@pytest.mark.parametrize("questions", [1, 4])
async def test_questions_at_the_maximum_are_posted(fake: FakeSlack, questions: int) -> None:
    """They used to fail before reaching Slack ("could not show the questions ... Nobody saw
    them"): the first level of cuts built a section slack_sdk refused, and no tighter level was
    tried."""
    poster = SlackPoster(make_client(BOT_TOKEN, fake.url))
    ref = await poster.post(at_maximum(questions, multi=False))
    assert fake.messages[(ref.channel, ref.message_id)]["blocks"]
    assert not fake.errors()


async def test_an_answered_multiselect_at_the_maximum_loses_its_controls(fake: FakeSlack) -> None:
    """Answered with all four labels and 2,000 typed characters, the message used to keep its
    live buttons: the update's section was too long, so no ``chat.update`` was sent."""
    poster = SlackPoster(make_client(BOT_TOKEN, fake.url))
    record = at_maximum(1, multi=True)
    record = record.model_copy(update={"message": await poster.post(record)})
    (q,) = record.questions.questions
    answer = Answer(question=q.question, selected=tuple(q.option_labels()), other_text="t" * 2000)
    answered = record.model_copy(
        update={
            "status": AskStatus.ANSWERED,
            "answers": (answer,),
            "answered_by": Responder(user_id="U0ANA"),
        }
    )
    await poster.update(answered)
    (update,) = fake.ok_calls("chat.update")
    assert [b["type"] for b in update["blocks"]] == ["context", "section", "context"]
    assert not fake.errors()


@pytest.mark.slack_refusals("invalid_blocks")
async def test_the_fake_refuses_a_renderer_that_cuts_nothing(
    fake: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renderer broken to cut nothing, with slack_sdk's own limits lifted (as if its blocks
    were built by hand): the fake refuses its section over 3,000 and its buttons over 75 as Slack
    does, and the post fails (after the poster's one retry at the tightest level)."""
    monkeypatch.setattr(markup, "fit", lambda text, limit: escape(shown(text)))
    monkeypatch.setattr(SectionBlock, "text_max_length", 10**6)
    monkeypatch.setattr(ButtonElement, "text_max_length", 10**6)
    poster = SlackPoster(make_client(BOT_TOKEN, fake.url))
    with pytest.raises(SlackApiError) as refused:
        await poster.post(at_maximum(1, multi=False))
    errors = refused.value.response["errors"]
    assert any("(section text) [json-pointer:/blocks/1/text/text]" in e for e in errors)
    assert any("(button text) [json-pointer:/blocks/2/elements/0/text/text]" in e for e in errors)
    assert fake.messages == {}


def question_section(call: dict[str, Any]) -> str:
    (section,) = [b for b in call["blocks"] if b["type"] == "section"]
    return str(section["text"]["text"])


async def test_a_message_slack_refuses_is_posted_again_at_the_tightest_cuts(
    fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    """A refusal by a limit nobody documents (``msg_blocks_too_long`` below our budget): one
    line in the log naming Slack's error, one more post at the tightest level, which Slack
    takes; the question's first words and every label still show."""
    fake.fail_next("chat.postMessage", "msg_blocks_too_long")
    poster = SlackPoster(make_client(BOT_TOKEN, fake.url))
    record = at_maximum(1, multi=False)
    with caplog.at_level(logging.WARNING, logger="bridge.poster"):
        ref = await poster.post(record)
    refused, posted = (c for c in fake.calls if c.method == "chat.postMessage")
    assert (refused.ok, refused.error, posted.ok) == (False, "msg_blocks_too_long", True)
    assert fake.messages[(ref.channel, ref.message_id)]["blocks"] == posted.args["blocks"]
    tight = question_section(posted.args)
    assert len(tight) < len(question_section(refused.args))
    tightest = question_section({"blocks": markup.render_message(record, tightest=True).wire})
    assert tight.split(" · ", 1)[1] == tightest.split(" · ", 1)[1]
    assert "q" * 100 in tight and all(f"*{'l' * 50}" in tight for _ in range(4))
    (line,) = [r.getMessage() for r in caplog.records if r.name == "bridge.poster"]
    assert line == (
        f"ask {record.id}: slack refused its message (msg_blocks_too_long); "
        "trying once more at the tightest cuts"
    )


async def test_refused_at_the_tightest_cuts_too_the_post_fails_as_before(fake: FakeSlack) -> None:
    fake.fail_next("chat.postMessage", "msg_blocks_too_long", times=2)
    poster = SlackPoster(make_client(BOT_TOKEN, fake.url))
    with pytest.raises(SlackApiError, match="msg_blocks_too_long"):
        await poster.post(at_maximum(1, multi=False))
    assert [c.error for c in fake.calls if c.method == "chat.postMessage"] == [
        "msg_blocks_too_long",
        "msg_blocks_too_long",
    ]
    assert fake.messages == {}


async def test_an_error_that_is_no_refusal_of_the_message_is_not_retried(fake: FakeSlack) -> None:
    fake.fail_next("chat.postMessage", "channel_not_found")
    poster = SlackPoster(make_client(BOT_TOKEN, fake.url))
    with pytest.raises(SlackApiError, match="channel_not_found"):
        await poster.post(at_maximum(1, multi=False))
    assert len([c for c in fake.calls if c.method == "chat.postMessage"]) == 1


async def test_an_update_slack_refuses_is_sent_again_at_the_tightest_cuts(fake: FakeSlack) -> None:
    poster = SlackPoster(make_client(BOT_TOKEN, fake.url))
    record = at_maximum(1, multi=False)
    record = record.model_copy(update={"message": await poster.post(record)})
    fake.fail_next("chat.update", "invalid_blocks")
    await poster.update(record.model_copy(update={"status": AskStatus.EXPIRED}))
    refused, updated = (c for c in fake.calls if c.method == "chat.update")
    assert (refused.error, updated.ok) == ("invalid_blocks", True)
    assert len(question_section(updated.args)) < len(question_section(refused.args))
