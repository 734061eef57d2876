"""The fake Slack Web API refuses what Slack refuses, so a rendering it accepts is one Slack takes.

slack_sdk's ``to_dict()`` leaves these limits unchecked; the fake, judging by
:mod:`tests.support.slack.slack_rules`, must not.
"""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError

from platforms.slack.client import make_client
from tests.support.slack.fake_slack import BOT_TOKEN, FakeSlack
from tests.support.slack.slack_rules import message_refusal, view_refusal


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "block_id": "s", "text": {"type": "mrkdwn", "text": text}}


def radio_input(description: str) -> dict[str, Any]:
    option = {
        "text": {"type": "plain_text", "text": "label"},
        "value": "0",
        "description": {"type": "plain_text", "text": description},
    }
    return {
        "type": "input",
        "block_id": "q0.pick",
        "label": {"type": "plain_text", "text": "Choose one"},
        "element": {"type": "radio_buttons", "action_id": "pick", "options": [option]},
    }


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "block_id": "c", "elements": [{"type": "mrkdwn", "text": text}]}


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        (radio_input("d" * 75), radio_input("d" * 200)),  # option description: 75 at most
        (section("x"), section("")),  # section text: at least 1 character
        (section("x" * 3000), section("x" * 3001)),  # section text: 3000 at most
        (context("x" * 3000), context("x" * 5000)),  # any text object: 3000 at most
        (context("x"), context("")),  # any text object: at least 1 character
    ],
    ids=["option-description", "empty-section", "long-section", "long-context", "empty-context"],
)
def test_fake_rejects_what_slack_rejects(good: dict[str, Any], bad: dict[str, Any]) -> None:
    assert blocks_error([good]) is None
    assert blocks_error([bad]) == "invalid_blocks"


def blocks_error(blocks: list[dict[str, Any]]) -> str | None:
    found = message_refusal("t", blocks)
    return None if found is None else found.error


def test_section_needs_text_or_fields() -> None:
    fields = [{"type": "mrkdwn", "text": "a"}, {"type": "mrkdwn", "text": "b"}]
    assert blocks_error([{"type": "section", "fields": fields}]) is None
    assert blocks_error([{"type": "section", "block_id": "s"}]) == "invalid_blocks"
    long_field = [{"type": "mrkdwn", "text": "x" * 2001}]
    assert blocks_error([{"type": "section", "fields": long_field}]) == "invalid_blocks"


def test_modal_with_a_long_option_description_is_refused() -> None:
    view = {
        "type": "modal",
        "title": {"type": "plain_text", "text": "Answer"},
        "submit": {"type": "plain_text", "text": "Submit"},
        "blocks": [radio_input("d" * 76)],
    }
    refused = view_refusal(view)
    assert refused is not None and refused.error == "invalid_arguments"
    (problem,) = refused.problems
    assert problem.pointer == "/view/blocks/0/element/options/0/description/text"


@pytest.mark.slack_refusals("invalid_blocks")
async def test_refusals_travel_over_the_wire_as_slack_errors(fake: FakeSlack) -> None:
    client = make_client(BOT_TOKEN, fake.url)
    fake.missing_channels.add("C0GONE")
    with pytest.raises(SlackApiError) as refused:
        await client.chat_postMessage(channel="C1", text="t", blocks=[section("")])
    assert refused.value.response["error"] == "invalid_blocks"
    assert refused.value.response["errors"] == [
        "must be 1 to 3000 characters (text of any text object (at least 1)) "
        "[json-pointer:/blocks/0/text/text]"
    ]
    with pytest.raises(SlackApiError) as missing:
        await client.chat_postMessage(channel="C0GONE", text="t", blocks=[section("x")])
    assert missing.value.response["error"] == "channel_not_found"
    assert fake.messages == {}
