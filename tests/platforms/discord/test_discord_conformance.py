"""Every message, edit, reminder, modal and private reply the Discord renderers build, for the whole
contract space and in every status, is one Discord takes -- judged by Discord's OpenAPI document and
documented limits (:mod:`tests.support.discord.discord_rules`), on the very bodies discord.py sends:
real discord.py (the poster's REST client, interaction responses and follow-ups) sends them to the
fake Discord, which refuses an invalid one as Discord does (400 50035), so a refusal fails the
property with Discord's own error path.

And what the person must see survives every cut: each question's first words, every option's
label (in the embeds, the buttons and the modals), the chosen labels and typed answer, the
outcome. The last level of cuts (``render_message(..., tightest=True)``) fits whatever the input.
A deliberately broken renderer fails these checks (the last tests), so they can fail.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import discord
import pytest
from discord.http import handle_message_parameters
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bridge import routing
from bridge.answering import MAX_TYPED, one_click
from bridge.models import MAX_DESCRIPTION, MAX_LABEL, Answer, QuestionSet
from bridge.record import AskRecord, AskStatus, Destination, FollowUps, Responder, Submission
from bridge.text import one_line
from platforms.discord import DiscordPlatform, DiscordPoster, markup
from platforms.discord.app import RECORDED_NOW, tell
from platforms.discord.markup import (
    EMBEDS_BUDGET,
    LEVELS,
    MAX_APPROVALS,
    MAX_ASKER,
    MAX_TITLE,
    REPLIES,
    TIGHTEST,
    WHOLE,
    Message,
    embeds_cost,
    fits,
    form_modal,
    other_modal,
    plain,
    render_message,
    retry_view,
    step_text,
    step_view,
    typed_modal,
    typed_questions,
)
from platforms.discord.text import NO_MENTIONS, fit, units
from tests.support.discord.ask_space import CHANNEL, approvals, asks, ended
from tests.support.discord.discord_harness import ALICE, settings_for
from tests.support.discord.discord_rules import check_request, embeds_total
from tests.support.discord.fake_discord import Call, FakeDiscord, assert_conforming, dm_channel

T = TypeVar("T")
PROPERTY = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Bounded and deterministic: the same examples on every run, in a few seconds."""


class Wire:
    """The fake Discord and a logged-in discord.py client on one event loop of the test's own:
    what the poster and the interaction responses send reaches the fake as real HTTP."""

    def __init__(self, runner: asyncio.Runner) -> None:
        self.runner = runner
        self.fake = self.run(FakeDiscord(users={ALICE: "alice"}).start())
        self.platform = DiscordPlatform(settings_for(self.fake))
        self.poster: DiscordPoster = self.platform.poster()
        self.client = self.run(self.platform.rest.get())
        self.source = self.run(self.poster.post(_one_question()))
        """A posted message for the interactions that update theirs."""

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    def interaction(self, custom_id: str, *, on_message: bool = False) -> discord.Interaction[Any]:
        """A click by Alice in her DM (on :attr:`source` with ``on_message``), as discord.py
        builds it from the gateway's event."""
        message = self.fake.messages[self.source.message_id] if on_message else None
        data = {"custom_id": custom_id, "component_type": 2}
        made = self.fake.interaction(ALICE, 3, data, dm_channel(ALICE), message)
        payload: Any = made.payload  # an INTERACTION_CREATE's data, as the gateway sends it
        return discord.Interaction(data=payload, state=self.client._connection)

    def sent(self, since: int) -> list[Call]:
        """The requests since call number ``since``, each one Discord took."""
        calls = self.fake.calls[since:]
        assert not self.fake.invalid, describe_calls(self.fake.invalid)
        assert all(c.status < 300 for c in calls), describe_calls(calls)
        return calls


def describe_calls(calls: list[Call]) -> str:
    return "\n".join(f"{c.method} {c.path}: {c.status} {c.response}" for c in calls)


@contextmanager
def wire() -> Iterator[Wire]:
    with asyncio.Runner() as runner:
        made = Wire(runner)
        try:
            yield made
        finally:
            made.run(made.platform.rest.aclose())
            made.run(made.fake.stop())


def _one_question() -> AskRecord:
    questions = QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": "Ship it?",
                    "header": "Ship",
                    "options": [
                        {"label": "Yes", "description": "now"},
                        {"label": "No", "description": "later"},
                    ],
                }
            ]
        }
    )
    return AskRecord(
        questions=questions,
        destination=Destination(platform="discord", channel=CHANNEL),
        expires_at=time.time() + 3600,
    )


# -- what the person must see ------------------------------------------------------------------

FIRST = 16
"""UTF-16 units of a text's beginning that every level keeps (the tightest cap is 40)."""


def first_words(text: str, *, markdown: bool, line: bool = True) -> str:
    """The beginning of ``text`` as Discord is sent it (cleaned, on one line where shown on
    one, escaped where shown as Markdown), which no cut may take away."""
    whole = fit(one_line(text) if line else text, 10**9, markdown=markdown)
    kept = ""
    for char in whole:
        if units(kept + char) > FIRST:
            break
        kept += char
    return kept.rstrip().removesuffix("\\")


def descriptions(body: dict[str, Any]) -> list[str]:
    return [e.get("description") or "" for e in body.get("embeds") or []]


def assert_questions_shown(record: AskRecord, body: dict[str, Any]) -> None:
    """Each question's first words open its embed; every label's first words are in it (and on
    its button, for the one-click shape) while the ask is pending or ended unanswered."""
    shown = descriptions(body)
    for i, q in enumerate(record.questions.questions):
        assert shown[i].startswith(first_words(q.question, markdown=False, line=False))
        answered = record.status is AskStatus.ANSWERED and record.answers is not None
        labels = record.answers[i].selected if answered and record.answers else q.option_labels()
        for label in labels:
            assert first_words(label, markdown=True) in shown[i], (label, shown[i])
    if record.status is AskStatus.PENDING and one_click(record.questions):
        buttons = body["components"][0]["components"]
        for button, label in zip(
            buttons, record.questions.questions[0].option_labels(), strict=False
        ):
            assert button["label"].startswith(first_words(label, markdown=False))


def assert_answers_shown(record: AskRecord, body: dict[str, Any]) -> None:
    """The outcome line whole, and each typed answer's first words."""
    assert body["content"] == REPLIES.outcome(record)
    shown = descriptions(body)
    for i, answer in enumerate(record.answers or ()):
        if answer.other_text is not None:
            assert first_words(answer.other_text, markdown=True) in shown[i]


# -- the message in every status ---------------------------------------------------------------


@dataclass(frozen=True)
class Journey:
    """One question set in every status a message shows."""

    pending: AskRecord
    approving: AskRecord
    answered: AskRecord
    expired: AskRecord
    cancelled: AskRecord
    reminder: int

    def statuses(self) -> list[AskRecord]:
        return [self.pending, self.approving, self.answered, self.expired, self.cancelled]


@st.composite
def journeys(draw: st.DrawFn) -> Journey:
    pending = draw(asks())
    follow = pending.follow_ups
    assert follow is not None
    return Journey(
        pending=pending,
        approving=draw(approvals(pending)),
        answered=draw(ended(pending, AskStatus.ANSWERED)),
        expired=draw(ended(pending, AskStatus.EXPIRED)),
        cancelled=draw(ended(pending, AskStatus.CANCELLED)),
        reminder=draw(st.integers(1, follow.remind_times)),
    )


def largest(*, multi: bool, count: int, unit: str = "*") -> Journey:
    """The biggest journey the contract allows: ``count`` questions of 2,000 characters, four
    options of 200-character labels and 1,000-character descriptions (``*``: each shown as two
    characters, escaped), 30 answerers; answered with every label and 2,000 typed characters;
    30 submissions of that size while approvals are pending."""
    questions = QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": (f"Q{i} " + unit * 2000)[:2000],
                    "header": f"H{i}" + unit * 10,
                    "multiSelect": multi,
                    "options": [
                        {
                            "label": (f"L{i}{o} " + unit * MAX_LABEL)[:MAX_LABEL],
                            "description": (f"D{i}{o} " + unit * MAX_DESCRIPTION)[:MAX_DESCRIPTION],
                        }
                        for o in range(4)
                    ],
                }
                for i in range(count)
            ]
        }
    )
    labels = [q.option_labels() if multi else q.option_labels()[:1] for q in questions.questions]
    chosen = tuple(
        Answer(
            question=q.question, selected=tuple(labels[i]), other_text="T " + "_" * (MAX_TYPED - 2)
        )
        for i, q in enumerate(questions.questions)
    )
    users = [str(10**17 + n) for n in range(30)]
    now = time.time()
    pending = AskRecord(
        questions=questions,
        destination=Destination(platform="discord", channel=CHANNEL),
        answerers=tuple(users),
        context={"asker": "@everyone " * 50},
        created_at=now,
        expires_at=now + 3600,
        follow_ups=FollowUps(
            remind_after=60,
            remind_times=100,
            escalate_after=60,
            escalate_to=Destination(platform="discord", user=ALICE),
        ),
    )
    subs = tuple(
        Submission(user_id=u, at=float(n), answers=chosen, withdrawn=n % 2 == 0)
        for n, u in enumerate(users)
    )
    return Journey(
        pending=pending,
        approving=pending.model_copy(update={"required": 50, "submissions": subs}),
        answered=pending.model_copy(
            update={
                "status": AskStatus.ANSWERED,
                "answers": chosen,
                "answered_by": Responder(user_id=users[0]),
                "answered_at": now,
            }
        ),
        expired=pending.model_copy(update={"status": AskStatus.EXPIRED}),
        cancelled=pending.model_copy(update={"status": AskStatus.CANCELLED}),
        reminder=100,
    )


LARGEST = largest(multi=True, count=4)
ONE_CLICK = largest(multi=False, count=1)
EXPANDING = largest(multi=True, count=4, unit="\ufb2c")
"""U+FB2C is written as three characters by NFC: texts that grow when cleaned (past the
contract's bound in bytes too: the renderer must not depend on it)."""


async def show_everywhere(wire: Wire, journey: Journey) -> None:
    """Post, update through every status, remind and escalate, as the poster does."""
    ref = await wire.poster.post(journey.pending)
    for record in journey.statuses()[1:]:
        await wire.poster.update(record.model_copy(update={"message": ref}))
    await wire.poster.remind(journey.pending.model_copy(update={"message": ref}), journey.reminder)
    follow = journey.pending.follow_ups
    assert follow is not None and follow.escalate_to is not None
    await wire.poster.post(journey.pending.model_copy(update={"destination": follow.escalate_to}))


def check_journey(wire: Wire, journey: Journey) -> None:
    since = len(wire.fake.calls)
    wire.run(show_everywhere(wire, journey))
    bodies = [c.body for c in wire.sent(since) if c.path.startswith("/channels/")]
    post, approving, answered, expired, cancelled, reminder, escalated = bodies
    sent = {k: v for k, v in post.items() if k not in ("nonce", "enforce_nonce")}  # send()'s own
    assert sent == json.loads(json.dumps(body_of(render_message(journey.pending))))
    assert_questions_shown(journey.pending, post)
    assert_questions_shown(journey.pending, escalated)
    assert_questions_shown(journey.approving, approving)
    for record, body in [(journey.answered, answered), (journey.expired, expired)]:
        assert_questions_shown(record, body)
        assert_answers_shown(record, body)
    assert_answers_shown(journey.cancelled, cancelled)
    assert "still waits for an answer" in reminder["content"]
    for record in journey.statuses():  # the level a retry uses fits too, with Open in browser
        for browser in (False, True):
            for message in (
                render_message(record, browser=browser),
                render_message(record, tightest=True, browser=browser),
            ):
                assert fits(message)
                assert not check_request("PATCH", "/channels/1/messages/2", body_of(message))


def body_of(message: Message) -> dict[str, Any]:
    """The JSON discord.py sends for ``message`` (the poster's arguments, its own builder: the
    post of every journey is checked to be exactly this)."""
    params = handle_message_parameters(
        content=message.content,
        embeds=message.embeds,
        view=message.view,
        allowed_mentions=message.allowed_mentions,
    )
    assert params.payload is not None
    return params.payload


def journey_property(wire: Wire) -> Callable[[], None]:
    @PROPERTY
    @given(journey=journeys())
    @example(journey=LARGEST)
    @example(journey=ONE_CLICK)
    @example(journey=EXPANDING)
    def messages_conform(journey: Journey) -> None:
        check_journey(wire, journey)

    return messages_conform


def test_every_message_in_every_status_is_one_discord_takes() -> None:
    with wire() as w:
        journey_property(w)()


# -- modals and private replies ----------------------------------------------------------------


@st.composite
def steps(draw: st.DrawFn) -> tuple[AskRecord, routing.Step, AskRecord]:
    """A pending ask (with approvals), a person's choices so far, and the ask answered."""
    pending = draw(approvals(draw(asks())))
    choices = tuple(
        routing.Choice(
            frozenset(draw(st.sets(st.integers(0, len(q.options) - 1), max_size=len(q.options)))),
            typed=draw(st.booleans()),
        )
        for q in pending.questions.questions
    )
    return pending, routing.Step(pending.id, choices), draw(ended(pending, AskStatus.ANSWERED))


async def reply_everywhere(
    wire: Wire, pending: AskRecord, step: routing.Step, done: AskRecord
) -> None:
    """Every kind of response the click handlers send, built by the renderers."""
    await wire.interaction(routing.answer_id(pending.id)).response.send_modal(form_modal(pending))
    for q in range(len(pending.questions.questions)):
        other = wire.interaction(routing.other_id(pending.id, q))
        await other.response.send_modal(other_modal(pending, q))
    typed = typed_modal(step, pending)
    if typed.children:
        await wire.interaction(routing.next_id(step.ask_id, step.choices)).response.send_modal(
            typed
        )
    await tell(
        wire.interaction(routing.answer_id(pending.id)), step_text(step), view=step_view(step)
    )
    mine = pending.submissions[0].user_id if pending.submissions else ALICE
    await tell(wire.interaction(routing.answer_id(pending.id)), REPLIES.recorded(pending, mine))
    late = wire.interaction(routing.answer_id(pending.id))
    await late.response.defer(ephemeral=True, thinking=True)
    await late.followup.send(
        plain(REPLIES.not_allowed(pending)),
        ephemeral=True,
        allowed_mentions=NO_MENTIONS,
        view=retry_view(routing.answer_id(pending.id), "Answer"),
    )
    on_step = wire.interaction(routing.next_id(step.ask_id, step.choices), on_message=True)
    explain = REPLIES.ended(done) or RECORDED_NOW
    await on_step.response.edit_message(
        content=plain(explain), view=step_view(step), allowed_mentions=NO_MENTIONS
    )


def assert_modal_shows(record: AskRecord, modal: dict[str, Any]) -> None:
    """Each question's label in a modal holds its first words; its choices every option's."""
    questions = record.questions.questions
    for top in modal["components"]:
        inner = top["component"]
        field = re.fullmatch(r"[qt]([0-9])", inner["custom_id"])
        if field is None:  # the form's "also type your own answer for" ticks
            continue
        q = questions[int(field.group(1))]
        assert first_words(q.question, markdown=False) in top["label"]
        for option, label in zip(inner.get("options", ()), q.option_labels(), strict=False):
            assert option["label"].startswith(first_words(label, markdown=False))


def reply_property(wire: Wire) -> Callable[[], None]:
    @PROPERTY
    @given(case=steps())
    def replies_conform(case: tuple[AskRecord, routing.Step, AskRecord]) -> None:
        pending, step, done = case
        since = len(wire.fake.calls)
        wire.run(reply_everywhere(wire, pending, step, done))
        callbacks = [c.body for c in wire.sent(since) if c.path.startswith("/interactions/")]
        modals = [c["data"] for c in callbacks if c["type"] == 9]
        for modal in modals:
            assert_modal_shows(pending, modal)
        asked = len(pending.questions.questions)
        assert len(modals) == 1 + asked + (1 if typed_questions(step.choices) else 0)

    return replies_conform


def test_every_modal_and_private_reply_is_one_discord_takes() -> None:
    with wire() as w:
        reply_property(w)()


# -- the levels of cuts ------------------------------------------------------------------------


def test_the_tightest_level_fits_by_arithmetic() -> None:
    """The bound the module docstring gives, from the caps alone: four pending questions of
    the longest texts, their titles, the author line and the approvals embed."""
    hint, blank = len("\n*(choose any)*"), len("\n\n")
    option = len("• **") + TIGHTEST.label + len("**") + len(" — ") + TIGHTEST.description
    description = TIGHTEST.question + hint + blank + 4 * option + 3
    answered = (
        TIGHTEST.question + hint + blank + len("✅ ") + 4 * (TIGHTEST.label + 4) + 3 * 2
        + 1 + units("✏️ ") + TIGHTEST.other
    )  # fmt: skip
    assert (description, answered) == (676, 655)
    total = 4 * (MAX_TITLE + max(description, answered)) + MAX_ASKER + len(" asks") + MAX_APPROVALS
    assert total == 5629 <= EMBEDS_BUDGET
    worst = render_message(LARGEST.approving, tightest=True)
    assert embeds_cost(worst.embeds) <= total and fits(worst)


@pytest.mark.parametrize("journey", [LARGEST, ONE_CLICK, EXPANDING], ids=["4q", "one-click", "nfc"])
def test_the_largest_asks_fall_through_to_a_level_that_fits(journey: Journey) -> None:
    for record in journey.statuses():
        message = render_message(record)
        assert fits(message)
        assert embeds_total(body_of(message)["embeds"]) <= 6000
        assert not check_request("POST", "/channels/1/messages", body_of(message))


def whole(count: int, question: int, label: int, description: int) -> AskRecord:
    questions = QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": f"Q{i} " + "q" * (question - 3),
                    "header": "Header",
                    "multiSelect": True,
                    "options": [
                        {
                            "label": f"L{i}{o} " + "l" * (label - 4),
                            "description": "d" * description,
                        }
                        for o in range(4)
                    ],
                }
                for i in range(count)
            ]
        }
    )
    return _one_question().model_copy(update={"questions": questions})


@pytest.mark.parametrize(
    ("count", "question", "label", "description"),
    [(1, 2000, 200, 300), (2, 1000, 100, 250), (4, 400, 80, 150)],
)
def test_what_is_shown_whole_and_what_is_cut_first(
    count: int, question: int, label: int, description: int
) -> None:
    """docs/limits.md's statement, and the README's examples: these sets (multiSelect, plain
    text, pending) are shown whole, with nothing cut; one more character of description each
    and the descriptions are the first and only texts cut."""
    record = whole(count, question, label, description)
    shown = render_message(record)
    assert shown.embeds == markup._message(record, WHOLE).embeds
    assert "…" not in str(body_of(shown)["embeds"])
    longer = render_message(whole(count, question, label, description + 1 + 300))
    text = "".join(e.description or "" for e in longer.embeds)
    assert text.count("…") == 4 * count  # every description, nothing else
    for q in record.questions.questions:
        assert q.question in text and all(f"**{lab}**" in text for lab in q.option_labels())


def test_levels_run_from_whole_to_tightest() -> None:
    assert LEVELS[0] == WHOLE and LEVELS[-1] == TIGHTEST
    for looser, tighter in itertools.pairwise(LEVELS):
        assert tighter.description < looser.description
        assert tighter.question <= looser.question and tighter.label <= looser.label
    record = LARGEST.pending
    tightest = body_of(render_message(record, tightest=True))
    assert tightest == body_of(markup._message(record, TIGHTEST))
    assert tightest != body_of(render_message(record))


# -- the checks can fail -----------------------------------------------------------------------


@pytest.mark.invalid_requests_expected
def test_a_button_label_over_80_fails_the_conformance_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(markup, "MAX_BUTTON", 200)
    body = body_of(render_message(ONE_CLICK.pending))
    problems = check_request("POST", "/channels/1/messages", body)
    assert ("components", 0, "components", 0, "label") in [p.path for p in problems]
    with wire() as w, pytest.raises(discord.HTTPException) as refused:
        check_journey(w, ONE_CLICK)  # the property's check, on its one-click example
    assert (refused.value.status, refused.value.code) == (400, 50035)
    assert "In components.0.components.0.label: Must be 80 or fewer in length." in str(
        refused.value
    )
    assert w.fake.invalid


@pytest.mark.invalid_requests_expected
def test_embeds_over_6000_fail_the_conformance_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(markup, "LEVELS", (WHOLE,))  # no level to fall through to
    body = body_of(render_message(whole(count=4, question=1500, label=80, description=100)))
    assert embeds_total(body["embeds"]) > 6000
    problems = check_request("POST", "/channels/1/messages", body)
    assert [(p.path, p.code) for p in problems] == [(("embeds",), "MAX_EMBED_SIZE_EXCEEDED")]
    with wire() as w, pytest.raises(discord.HTTPException) as refused:
        check_journey(w, LARGEST)  # the property's check, on its largest example
    assert "In embeds: Embed size exceeds maximum size of 6000" in str(refused.value)
    assert w.fake.invalid


@pytest.mark.invalid_requests_expected
def test_the_fake_refuses_as_discord_does_and_the_suite_notices() -> None:
    """Discord's answer, as discord.py reads it, and the refusal kept for the suite's check
    (``tests/platforms/discord/conftest.py``), which fails a test that did not expect it."""
    with wire() as w:
        channel = w.client.get_partial_messageable(int(CHANNEL))
        with pytest.raises(discord.HTTPException) as refused:
            w.run(channel.send(content="x" * 2001, allowed_mentions=NO_MENTIONS))
        assert (refused.value.status, refused.value.code) == (400, 50035)
        assert str(refused.value).endswith("In content: Must be 2000 or fewer in length.")
        (call,) = w.fake.invalid
        assert call.response == {
            "code": 50035,
            "message": "Invalid Form Body",
            "errors": {
                "content": {
                    "_errors": [
                        {
                            "code": "BASE_TYPE_MAX_LENGTH",
                            "message": "Must be 2000 or fewer in length.",
                        }
                    ]
                }
            },
        }
        with pytest.raises(AssertionError, match="Discord would refuse what the bot sent"):
            assert_conforming([w.fake])
