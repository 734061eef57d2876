"""A form Slack will not open: the person is told privately to click again, the log has one line.

Through the Bolt app over real HTTP and the fake Slack, whose ``views.open`` answers as Slack's
does for a ``trigger_id`` that is stale (``expired_trigger_id``), already used
(``exchanged_trigger_id``) or unknown (``invalid_trigger_id``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from bridge import replies
from bridge.record import AskRecord, AskStatus
from tests.support.samples import q
from tests.support.slack.payloads import block_actions
from tests.support.slack.slack_harness import Bolt

FORM = [
    q("Which region?", "Region", ["eu", "us", "ap"]),
    q("Which checks to run?", "Checks", ["lint", "types", "tests"], multi=True),
]


def answer_click(bolt: Bolt, record: AskRecord, user: str) -> dict[str, Any]:
    assert record.message is not None
    ref = record.message
    return block_actions(bolt.fake, ref.channel, ref.message_id, user, f"askb:answer:{record.id}")


async def refuse(bolt: Bolt, click: dict[str, Any], error: str) -> None:
    """Make Slack refuse the ``views.open`` of ``click`` with ``error``, its own way."""
    if error == "expired_trigger_id":
        bolt.fake.expire_triggers()
    elif error == "exchanged_trigger_id":
        await bolt.send(click)  # delivered twice: the first opens the form with the trigger
        await bolt.fake.wait_for("views.open")
    elif error == "invalid_trigger_id":
        click["trigger_id"] = "10.nosuchtrigger"
    else:
        bolt.fake.fail_next("views.open", error)


def logged_once(caplog: pytest.LogCaptureFixture, ask_id: str, error: str) -> None:
    """One WARNING line naming the ask and Slack's error, and no traceback anywhere."""
    ours = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("platforms")]
    assert ours == [("WARNING", f"could not open the form of ask {ask_id}: Slack answered {error}")]
    loud = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in loud] == []


@pytest.mark.parametrize("loading", [False, True], ids=["form", "loading-modal"])
@pytest.mark.parametrize(
    "error", ["expired_trigger_id", "exchanged_trigger_id", "invalid_trigger_id", "internal_error"]
)
async def test_a_refused_views_open_tells_the_person_to_click_again(
    bolt: Bolt, caplog: pytest.LogCaptureFixture, error: str, loading: bool
) -> None:
    assert bolt.interactions is not None
    if loading:  # the form is not ready at once: a loading modal is opened first
        bolt.interactions.fast_path = 0.0
    record = await bolt.ask(FORM)
    click = answer_click(bolt, record, "U0ALICE")
    await refuse(bolt, click, error)
    with caplog.at_level(logging.INFO):
        await bolt.send(click)
        (note,) = await bolt.fake.wait_for(
            "chat.postEphemeral", lambda c: c["user"] == "U0ALICE", within=10
        )
        await bolt.interactions.drain()
    assert note["text"] == replies.NOT_OPENED
    assert [c.error for c in bolt.fake.errors()] == [error]
    logged_once(caplog, record.id, error)
    still = await bolt.store.get(record.id)
    assert still is not None and still.status is AskStatus.PENDING


async def test_a_refused_fill_in_of_the_loading_modal_tells_the_person_to_click_again(
    bolt: Bolt, caplog: pytest.LogCaptureFixture
) -> None:
    """The loading modal opened, but Slack would not put the form in it (closed meanwhile:
    ``not_found``): the person sees only "Loading…", so they are told to click again."""
    assert bolt.interactions is not None
    bolt.interactions.fast_path = 0.0
    record = await bolt.ask(FORM)
    bolt.fake.fail_next("views.update", "not_found")
    with caplog.at_level(logging.INFO):
        await bolt.send(answer_click(bolt, record, "U0ALICE"))
        (note,) = await bolt.fake.wait_for(
            "chat.postEphemeral", lambda c: c["user"] == "U0ALICE", within=10
        )
        await bolt.interactions.drain()
    assert note["text"] == replies.NOT_OPENED
    assert len(bolt.fake.ok_calls("views.open")) == 1
    logged_once(caplog, record.id, "not_found")


async def test_someone_who_may_not_answer_is_told_why_not_to_click_again(
    bolt: Bolt, caplog: pytest.LogCaptureFixture
) -> None:
    """Slack refused the loading modal, and the form would have been refused anyway: the
    refusal is what the person needs to hear (clicking again would not help)."""
    assert bolt.interactions is not None
    bolt.interactions.fast_path = 0.0
    record = await bolt.ask(FORM, answerers=("U0BOSS",))
    click = answer_click(bolt, record, "U0MALLORY")
    bolt.fake.expire_triggers()
    with caplog.at_level(logging.INFO):
        await bolt.send(click)
        (note,) = await bolt.fake.wait_for(
            "chat.postEphemeral", lambda c: c["user"] == "U0MALLORY", within=10
        )
        await bolt.interactions.drain()
    assert note["text"] == "Sorry, you can't answer this one: it is for <@U0BOSS>."
    logged_once(caplog, record.id, "expired_trigger_id")
