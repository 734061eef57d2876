"""Asks several people must agree on, seen from the asking side: the policy, the chat handler's
result (who answered, for the host; for the model only when the policy says so), the answers feed,
and ``ask-bridge ask --required``. The store's rules are in ``store/test_contract.py``, the
clicks' in ``test_answering.py``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

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
from tests.support.engine_fixtures import new_record

QUESTION = new_record().questions.questions[0]
YES = (Answer(question=QUESTION.question, selected=("Yes",)),)
ALICE = Responder(user_id="U0ALICE", name="alice")
BOB = Responder(user_id="U0BOB", name="bob")
DEST = Destination(platform="memory", channel="C1")


class NamedPoster(MemoryPoster):
    """A platform whose ids start with ``U`` (a user) or ``S`` (a group), in upper case."""

    answerer_rule = "ids start with U or S"

    def answerer(self, answerer: str) -> str | None:
        found = answerer.strip().upper()
        return found if found[:1] in ("U", "S") else None

    def individual(self, answerer: str) -> bool:
        return answerer.startswith("U")


class NumberedPoster(MemoryPoster):
    """Another platform, whose ids are numbers."""

    answerer_rule = "its ids are numbers"

    def answerer(self, answerer: str) -> str | None:
        found = answerer.strip()
        return found if found.isdigit() else None


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


def test_answerer_ids_are_counted_as_the_people_they_name() -> None:
    """Trimmed and cased as the platform writes its ids (its poster says how), then each once:
    three spellings of one person are one person, not three of the three required."""
    poster = NamedPoster()
    one = AskPolicy(required=3, answerers=("U0AAAA1", "u0aaaa1", "U0AAAA1 "))
    assert one.answerers == ("U0AAAA1", "u0aaaa1")  # any platform: trimmed, each once
    with pytest.raises(ValueError, match=r"3 people must agree but only 1 may answer \(U0AAAA1\):"):
        check_required(one, poster)
    with pytest.raises(ValueError, match="only 1 may answer"):
        ChatHandler(poster, MemoryStore(), DEST, one)
    named = AskPolicy(required=2, answerers=(" u0alice", "U0ALICE", "s0ops ", "U0BOB"))
    assert ChatHandler(poster, MemoryStore(), DEST, named).policy.answerers == (
        "U0ALICE",
        "S0OPS",
        "U0BOB",
    )
    with pytest.raises(ValueError, match="an answerer id is empty: give a user or group id"):
        AskPolicy(answerers=("U0ALICE", " "))


def test_an_id_that_cannot_be_anyones_is_refused_in_one_line_naming_it() -> None:
    poster = NamedPoster()
    with pytest.raises(ValueError) as info:
        ChatHandler(poster, MemoryStore(), DEST, AskPolicy(answerers=("U0ALICE", "C0TEAM")))
    assert str(info.value) == (
        "answerer 'C0TEAM' is not an id of anyone who may answer on memory: ids start with U or S"
    )
    many = AskPolicy(answerers=("C1", "U0A", "#general", *(f"C{n}\nx" for n in range(2, 7))))
    with pytest.raises(ValueError) as info:
        check_required(many, poster)
    assert str(info.value) == (
        "answerers 'C1', '#general', 'C2\\nx', 'C3\\nx', 'C4\\nx' and 2 more are not ids of "
        "anyone who may answer on memory: ids start with U or S"
    )


def test_an_escalations_platform_may_name_its_own_people() -> None:
    """Who may answer does not change when an ask escalates to another platform, so its people
    are named among the answerers: an id the ask's platform refuses is judged by theirs."""
    poster, other = NamedPoster(), NumberedPoster("other")
    policy = AskPolicy(answerers=("u0alice", " 42"), escalate_after=60, escalate_to="other:C9")
    handler = ChatHandler(poster, MemoryStore(), DEST, policy, posters={"other": other})
    assert handler.policy.answerers == ("U0ALICE", "42")
    # without that platform's poster nobody can tell: kept as given
    assert ChatHandler(poster, MemoryStore(), DEST, policy).policy.answerers == ("U0ALICE", "42")
    bad = AskPolicy(answerers=("x7",), escalate_after=60, escalate_to="other:C9")
    with pytest.raises(ValueError) as info:
        ChatHandler(poster, MemoryStore(), DEST, bad, posters={"other": other})
    assert str(info.value) == (
        "answerer 'x7' is not an id of anyone who may answer on memory or other: ids start with "
        "U or S; its ids are numbers"
    )
    with pytest.raises(ValueError, match="answerer '42' is not an id"):  # not escalated there
        ChatHandler(poster, MemoryStore(), DEST, AskPolicy(answerers=("42",)))


async def test_a_person_named_in_another_case_is_the_one_who_may_answer() -> None:
    """The ask keeps the platform's own form of the id, which is what a click carries."""
    store, poster = MemoryStore(), NamedPoster()
    policy = AskPolicy(answerers=("u0alice ",), wait=10)
    (tool,) = tools_interactive(callback=ChatHandler(poster, store, DEST, policy))
    call = asyncio.create_task(tool.ainvoke([QUESTION]))
    posted = await poster.next_post()
    assert posted.answerers == ("U0ALICE",)
    assert (await store.submit(posted.id, ALICE, YES)).outcome is SubmitOutcome.ACCEPTED
    await asyncio.wait_for(call, 10)


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
        (
            [
                *("--required", "3", "--answerer", "U0AAAA1"),
                *("--answerer", "u0aaaa1", "--answerer", "U0AAAA1 "),
            ],
            "3 people must agree but only 1 may answer (U0AAAA1)",
        ),
        (
            ["--answerer", "U0ALICE", "--answerer", "C0TEAM"],
            "answerer 'C0TEAM' is not an id of anyone who may answer on slack: Slack answerers "
            "are user ids, U… or W…, and user group ids, S…",
        ),
        (["--answerer", " "], "--answerer: an answerer id is empty"),
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


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (
            ["--answerer", "0123", "--answerer", " 123", "--required", "2"],
            "2 people must agree but only 1 may answer (123)",
        ),
        (
            ["--answerer", "123", "--answerer", "U0ALICE"],
            "answerer 'U0ALICE' is not an id of anyone who may answer on discord: Discord "
            "answerers are user ids, numbers, and roles, role:ID",
        ),
    ],
)
def test_ask_on_discord_refuses_answerer_ids_before_anything_is_reached(
    extra: list[str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1")  # never reached
    monkeypatch.setenv("DISCORD_TOKEN", "unused")
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([QUESTION.model_dump(mode="json")]))
    assert main(["ask", "--platform", "discord", "--channel", "1", *extra, str(questions)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ask-bridge ask: {said}")


@pytest.mark.parametrize(
    ("given", "slack", "discord"),
    [
        (" u0alice ", "U0ALICE", None),
        ("W0GRID", "W0GRID", None),
        ("s0oncall", "S0ONCALL", None),
        ("C0TEAM", None, None),  # a channel
        ("B0BOT", None, None),  # a bot
        ("alice", None, None),
        ("\u017f0GROUP", None, None),  # a long s, which upper() would make an ASCII S
        ("U0AL ICE", None, None),
        (" 0123 ", None, "123"),  # Discord writes a snowflake without leading zeros
        ("ROLE:0042", None, "role:42"),
        ("role: 42", None, None),
        ("role:", None, None),
        ("user:42", None, None),
        ("18446744073709551615", None, "18446744073709551615"),
        ("18446744073709551616", None, None),  # past 64 bits
        ("\u0661\u0662", None, None),  # digits, but not ASCII ones
    ],
)
def test_each_platform_takes_answerer_ids_in_its_own_form(
    given: str, slack: str | None, discord: str | None
) -> None:
    from platforms.discord.text import answerer_id as discord_id
    from platforms.slack.text import answerer_id as slack_id

    assert (slack_id(given), discord_id(given)) == (slack, discord)


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
