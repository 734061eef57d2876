"""Asks several people must agree on, seen from the asking side: the policy, the chat handler's
result (who answered, for the host; for the model only when the policy says so), the answers feed,
and ``ask-bridge ask --required``. The store's rules are in ``test_store_contract.py``, the
clicks' in ``test_answering.py``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from engine_fixtures import new_record

from bridge.asking import AskPolicy, ChatHandler, check_required
from bridge.cli import main
from bridge.feed import render_delivery
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, Destination, MessageRef, Responder
from bridge.result import AskUserAnswered
from bridge.runtime import chat_policy
from bridge.store.base import SubmitOutcome
from bridge.store.memory import MemoryStore
from bridge.tool import tools_interactive

QUESTION = new_record().questions.questions[0]
YES = (Answer(question=QUESTION.question, selected=("Yes",)),)
ALICE = Responder(user_id="U0ALICE", name="alice")
BOB = Responder(user_id="U0BOB", name="bob")
DEST = Destination(platform="memory", channel="C1")


class NamedPoster(MemoryPoster):
    """A platform whose user ids start with ``U`` (anything else is a group)."""

    def individual(self, answerer: str) -> bool:
        return answerer.startswith("U")


def test_policy_bounds() -> None:
    assert AskPolicy().required == 1 and not AskPolicy().tell_model_who
    for bad in (0, 51):
        with pytest.raises(ValueError):
            AskPolicy(required=bad)
        with pytest.raises(ValueError, match="1 to 50"):
            chat_policy(False, required=bad)
    assert chat_policy(False, required=50).required == 50


def test_more_required_than_named_people_is_refused() -> None:
    poster = NamedPoster()
    too_many = AskPolicy(required=3, answerers=("U1", "U2", "U2"))
    with pytest.raises(ValueError, match="3 people must agree but only 2 may answer"):
        check_required(too_many, poster)
    with pytest.raises(ValueError, match="only 2 may answer"):
        ChatHandler(poster, MemoryStore(), DEST, too_many)
    # a group may hold any number of people; no answerers: anyone; enough people named
    check_required(AskPolicy(required=3, answerers=("U1", "S0GROUP")), poster)
    check_required(AskPolicy(required=3), poster)
    check_required(AskPolicy(required=2, answerers=("U1", "U2")), poster)
    # a platform that cannot tell users from groups refuses nothing
    check_required(too_many, MemoryPoster())
    # one person's DM shows it to one person: only an escalation lets others answer
    dm = Destination(platform="memory", user="U0BOSS")
    with pytest.raises(ValueError, match="goes to one person's DM"):
        ChatHandler(poster, MemoryStore(), dm, AskPolicy(required=2))
    escalated = AskPolicy(required=2, escalate_after=60, escalate_to="C0MANAGERS")
    ChatHandler(poster, MemoryStore(), dm, escalated)
    ChatHandler(poster, MemoryStore(), dm, AskPolicy())
    check_required(AskPolicy(required=2), poster, DEST)


async def _answered_by_two(tell: bool) -> tuple[object, str]:
    store, poster = MemoryStore(), MemoryPoster()
    policy = AskPolicy(required=2, tell_model_who=tell, wait=10)
    (tool,) = tools_interactive(callback=ChatHandler(poster, store, DEST, policy))
    call = asyncio.create_task(tool.ainvoke([QUESTION]))
    posted = await poster.next_post()
    assert posted.required == 2 and posted.tell_model_who is tell
    assert (await store.submit(posted.id, ALICE, YES, now=100.0)).outcome is SubmitOutcome.RECORDED
    assert not call.done()
    assert (await store.submit(posted.id, BOB, YES, now=160.0)).outcome is SubmitOutcome.ACCEPTED
    outcome = await asyncio.wait_for(call, 10)
    return outcome, posted.id


async def test_the_host_learns_who_agreed_and_the_model_does_not() -> None:
    outcome, ask_id = await _answered_by_two(tell=False)
    answered = outcome.answered  # type: ignore[attr-defined]
    assert isinstance(answered, AskUserAnswered) and answered.extra == {"ask_id": ask_id}
    assert [(s.user_id, s.name, s.at) for s in answered.who] == [
        ("U0ALICE", "alice", 100.0),
        ("U0BOB", "bob", 160.0),
    ]
    assert [s.user_id for s in answered.submissions] == ["U0ALICE", "U0BOB"]
    payload = json.loads(outcome.text)  # type: ignore[attr-defined]
    assert set(payload) == {"questions", "answers"}  # the seed's JSON: the agreed answers
    assert payload["answers"] == [
        {"question": QUESTION.question, "selected": ["Yes"], "other_text": None}
    ]


async def test_the_model_learns_who_answered_when_the_policy_says_so() -> None:
    outcome, _ = await _answered_by_two(tell=True)
    payload = json.loads(outcome.text)  # type: ignore[attr-defined]
    assert payload["answers"][0]["selected"] == ["Yes"]
    assert payload["answered_by"] == [
        {"user_id": "U0ALICE", "name": "alice", "at": "1970-01-01T00:01:40+00:00"},
        {"user_id": "U0BOB", "name": "bob", "at": "1970-01-01T00:02:40+00:00"},
    ]


async def test_the_feed_tells_the_model_who_answered_only_when_asked_to() -> None:
    store = MemoryStore()
    for tell in (False, True):
        rec = new_record(required=2, deferred=True).model_copy(update={"tell_model_who": tell})
        await store.create(rec)
        await store.submit(rec.id, ALICE, YES, now=rec.created_at)
        done = await store.submit(rec.id, BOB, YES, now=rec.created_at)
        assert done.record is not None and done.record.status is AskStatus.ANSWERED
        text = json.loads(render_delivery(done.record))
        assert text["answers"][0]["selected"] == ["Yes"]
        assert ("answered_by" in text) is tell
        if tell:
            assert [w["user_id"] for w in text["answered_by"]] == ["U0ALICE", "U0BOB"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--required", "0"], "the people required to agree must be 1 to 50, not 0"),
        (["--required", "51"], "the people required to agree must be 1 to 50, not 51"),
        (
            ["--required", "3", "--answerer", "U0ALICE", "--answerer", "U0BOB"],
            "3 people must agree but only 2 may answer (U0ALICE, U0BOB)",
        ),
        (
            ["--user", "U0BOSS", "--required", "2"],
            "2 people must agree but the ask goes to one person's DM (U0BOSS)",
        ),
    ],
)
def test_ask_refuses_an_impossible_required_before_anything_is_reached(
    extra: list[str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1")  # never reached
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-unused")
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:1/api/")  # never reached
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([QUESTION.model_dump(mode="json")]))
    where = [] if "--user" in extra else ["--channel", "C1"]
    assert main(["ask", *where, *extra, str(questions)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ask-bridge ask: {said}")


async def test_a_submission_made_before_the_message_was_recorded_is_shown_by_the_asking_call() -> (
    None
):
    """A click right after the post, before the asking call recorded the message: the click's
    handler has no message to show the submission on, so the asking call shows it once it
    recorded the message (the store hands it the record)."""
    store, poster = MemoryStore(), MemoryPoster()
    real = store.set_message
    ask_id: list[str] = []

    async def clicked_first(asked: str, message: MessageRef) -> AskRecord | None:
        ask_id.append(asked)
        assert (await store.submit(asked, ALICE, YES)).outcome is SubmitOutcome.RECORDED
        return await real(asked, message)

    store.set_message = clicked_first  # type: ignore[method-assign]
    policy = AskPolicy(required=2, wait=10)
    (tool,) = tools_interactive(callback=ChatHandler(poster, store, DEST, policy))
    call = asyncio.create_task(tool.ainvoke([QUESTION]))
    await poster.next_post()
    async with asyncio.timeout(5):
        while not poster.updates:  # noqa: ASYNC110 (polling what the poster recorded)
            await asyncio.sleep(0.01)
    shown = poster.updates[-1]
    assert shown.id == ask_id[0] and shown.status is AskStatus.PENDING
    assert shown.message is not None and [s.user_id for s in shown.submissions] == ["U0ALICE"]
    assert (await store.submit(ask_id[0], BOB, YES)).outcome is SubmitOutcome.ACCEPTED
    await asyncio.wait_for(call, 10)
