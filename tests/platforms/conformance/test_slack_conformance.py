"""Every request the Slack platform builds, for every ask the contract allows, in every status, is
one Slack takes -- judged by :mod:`tests.support.slack.slack_rules` (slack_sdk's models, Slack's
documented limits, and Slack's OpenAPI document for the Web API parameters) -- and still shows
what the person must see: the question's first words, every option's label, the outcome.

The requests are the real ones: the poster, the Bolt app's ephemeral replies and the modals go
through slack_sdk's own Web API methods into :class:`Recorder`, which keeps each call's
parameters as slack_sdk would send them instead of sending them.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import ButtonElement, SectionBlock
from slack_sdk.web.async_client import AsyncWebClient

from bridge import clicks, replies
from bridge.answering import MAX_TYPED
from bridge.models import (
    MAX_DESCRIPTION,
    MAX_HEADER,
    MAX_LABEL,
    MAX_QUESTION_TEXT,
    Answer,
    QuestionSet,
)
from bridge.record import (
    AskRecord,
    AskStatus,
    Destination,
    FollowUps,
    MessageRef,
    Responder,
    Submission,
)
from bridge.text import ELLIPSIS, one_line, shown
from platforms.slack import ids, markup
from platforms.slack.app import Reply
from platforms.slack.groups import GroupResolver
from platforms.slack.markup import (
    BLOCKS_BUDGET,
    REPLIES,
    blocks_cost,
    form_view,
    loading_view,
    notice_view,
    other_view,
    render_message,
)
from platforms.slack.poster import SlackPoster
from platforms.slack.text import escape, fit
from tests.support.slack import slack_rules
from tests.support.slack.slack_rules import RULES, describe, refusal

LIMITS_DOC = Path(__file__).resolve().parents[3] / "docs" / "limits.md"
CHANNEL = "C0GENERAL"
SEEN = 30
"""How much of a text must show whatever was cut (UTF-16 units of its escaped beginning)."""


class Recorder(AsyncWebClient):
    """A Web API client that records each call's method and parameters as slack_sdk hands them
    to the network, and answers like Slack would for a call that works."""

    def __init__(self) -> None:
        super().__init__(token="xoxb-conformance")
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._ts = itertools.count(1)

    async def api_call(self, api_method: str, **kwargs: Any) -> Any:  # type: ignore[override]
        sent: dict[str, Any] = {}
        for part in ("params", "data", "json"):  # slack_sdk drops the parameters left None
            sent.update({k: v for k, v in (kwargs.get(part) or {}).items() if v is not None})
        self.calls.append((api_method, sent))
        ts = f"1700000000.{next(self._ts):06d}"
        return {"ok": True, "channel": sent.get("channel", CHANNEL), "ts": ts, "view": sent}


def assert_calls_conform(client: Recorder) -> None:
    for method, args in client.calls:
        found = refusal(method, args, bearer=True)
        assert found is None, f"{method}: {describe(found)}"


# -- question sets and records ------------------------------------------------------------------

PIECES = [
    "👨\u200d👩\u200d👧\u200d👦",  # a ZWJ family
    "🏳️\u200d🌈",
    "🇫🇷",  # a flag: two regional indicators
    "👍🏽",  # a skin tone
    "1️⃣",  # a keycap
    "❤️",
    "漢字かな한국어",
    "e\u0301",  # a combining accent
    "Z\u0324\u0354\u0367\u0311\u0313",  # stacked combining marks
    "שלום",
    "&",
    "<",
    ">",
    "*",
    "_",
    "~",
    "`",
    "<!channel>",
    "<@U0123>",
    "<https://evil.example|click>",
    "\n",
    "\t",
    " ",
    '"',
    "\\",
    "\u202e",
    "\u200b",
    "\ufe0f",
    "\x00",
]
"""Text people and models write that costs the most, joins, stacks or means something to Slack."""

chars = st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(PIECES))


def texts(most: int) -> st.SearchStrategy[str]:
    """Text of 1 to ``most`` characters, short or a chunk repeated to any length up to ``most``
    (so every length is reached without drawing thousands of characters)."""
    chunk = st.lists(chars, min_size=1, max_size=8).map("".join)
    short = chunk.map(lambda t: t[:most])
    long = st.builds(lambda c, n: (c * n)[:n], chunk, st.integers(1, most))
    return st.one_of(short, long, st.builds(lambda c: (c * most)[:most], chunk))


@st.composite
def question_sets(draw: st.DrawFn) -> QuestionSet:
    """Any question set the model accepts: 1 to 4 questions of 2 to 4 options, every text up to
    its maximum (a distinct suffix keeps texts and labels apart and visible)."""
    questions = []
    for i in range(draw(st.integers(1, 4))):
        options = [
            {
                "label": draw(texts(MAX_LABEL - 2)) + f" {j}",
                "description": draw(texts(MAX_DESCRIPTION - 2)) + f" {j}",
            }
            for j in range(draw(st.integers(2, 4)))
        ]
        questions.append(
            {
                "question": draw(texts(MAX_QUESTION_TEXT - 2)) + f" {i}",
                "header": draw(texts(MAX_HEADER - 1)) + "H",
                "multiSelect": draw(st.booleans()),
                "options": options,
            }
        )
    return QuestionSet.model_validate({"questions": questions})


@st.composite
def answer_sets(draw: st.DrawFn, qs: QuestionSet) -> tuple[Answer, ...]:
    """An answer per question: chosen labels (any number for multiSelect), typed text up to
    its maximum, or both."""
    answers = []
    for q in qs.questions:
        labels = q.option_labels()
        picked = draw(st.lists(st.sampled_from(labels), unique=True, max_size=len(labels)))
        chosen = tuple(label for label in labels if label in picked)
        if not q.multiSelect:
            chosen = chosen[:1]
        typed = draw(st.one_of(st.none(), texts(MAX_TYPED)))
        if not chosen and typed is None:
            chosen = (labels[0],)
        answers.append(Answer(question=q.question, selected=chosen, other_text=typed))
    return tuple(answers)


ids_or_junk = st.one_of(
    st.from_regex(r"[UWS][A-Z0-9]{2,30}", fullmatch=True), texts(60), st.just("<!channel>")
)


@st.composite
def asks(draw: st.DrawFn) -> tuple[AskRecord, tuple[Answer, ...], list[Submission]]:
    """A pending ask (asker, answerers, follow-ups as a model and an operator may set them), the
    answers someone could give, and submissions of several people to it."""
    qs = draw(question_sets())
    answers = draw(answer_sets(qs))
    record = AskRecord(
        questions=qs,
        destination=Destination(platform="slack", channel=CHANNEL),
        expires_at=time.time() + 600,
        answerers=tuple(draw(st.lists(ids_or_junk, max_size=14))),
        context={"asker": draw(texts(300))},
        follow_ups=FollowUps(remind_after=60, remind_times=draw(st.integers(1, 100))),
        message=MessageRef(platform="slack", channel=CHANNEL, message_id="1700000000.000001"),
    )
    subs = [
        Submission(
            user_id=draw(ids_or_junk),
            name=draw(st.one_of(st.none(), texts(80))),
            at=float(n),
            answers=draw(answer_sets(qs)),
            withdrawn=draw(st.booleans()),
        )
        for n in range(draw(st.integers(0, 14)))
    ]
    return record, answers, subs


def statuses(
    record: AskRecord, answers: tuple[Answer, ...], subs: list[Submission]
) -> Iterator[AskRecord]:
    """The ask in every status a message shows: pending, pending with the approvals of several
    people, escalated (posted again elsewhere), answered by one person or by several who
    agree, expired and cancelled -- ended ones also as a store keeps them (no descriptions)."""
    yield record
    yield record.model_copy(update={"required": len(subs) + 2, "submissions": tuple(subs)})
    escalated_to = Destination(platform="slack", user="U0BOSS")
    yield record.model_copy(
        update={
            "follow_ups": FollowUps(escalate_after=60, escalate_to=escalated_to),
            "escalations": (MessageRef(platform="slack", channel="D0BOSS", message_id="2.1"),),
        }
    )
    one = Responder(user_id="U0ANA", name="<!channel>")
    yield record.model_copy(
        update={"status": AskStatus.ANSWERED, "answers": answers, "answered_by": one}
    )
    agreed = [s.model_copy(update={"answers": answers, "withdrawn": False}) for s in subs]
    agreed = [s for s in agreed if not s.typed]
    yield record.model_copy(
        update={
            "status": AskStatus.ANSWERED,
            "required": max(2, len(agreed)),
            "answers": answers,
            "answered_by": one,
            "submissions": tuple(agreed),
        }
    )
    for status in (AskStatus.EXPIRED, AskStatus.CANCELLED):
        ended = record.model_copy(update={"status": status})
        yield ended
        yield ended.model_copy(update={"questions": ended.questions.undescribed()})


# -- what a person must see ---------------------------------------------------------------------


def beginning(text: str, *, line: bool = True) -> str:
    """The escaped beginning of ``text`` that shows whatever the level (a level cuts at least
    :data:`SEEN` units in; one-line places show the text on one line)."""
    return fit(one_line(text) if line else text, SEEN).removesuffix(ELLIPSIS)


def section(wire: list[dict[str, Any]], suffix: str) -> str:
    (found,) = [b["text"]["text"] for b in wire if b["block_id"].endswith(suffix)]
    return str(found)


def assert_seen(record: AskRecord, wire: list[dict[str, Any]]) -> None:
    """The question's first words, each option's label (or each chosen one and the typed
    answer, once answered) and the outcome are on the message."""
    answers = record.answers or ()
    for i, q in enumerate(record.questions.questions):
        text = section(wire, f".q{i}")
        assert beginning(q.question, line=False) in text
        if record.status is AskStatus.ANSWERED and i < len(answers):
            shown_labels = answers[i].selected
            typed = answers[i].other_text
            assert typed is None or beginning(typed) in text
        else:
            shown_labels = tuple(q.option_labels())
        for label in shown_labels:
            assert f"*{beginning(label)}" in text
    if record.status is not AskStatus.PENDING:
        (outcome,) = [b for b in wire if b["block_id"].endswith(".end")]
        assert outcome["elements"][0]["text"] == REPLIES.outcome(record)


def assert_view_seen(record: AskRecord, view: dict[str, Any]) -> None:
    headers = [b for b in view["blocks"] if b["type"] == "section"]
    pickers = [b["element"] for b in view["blocks"] if b["block_id"].endswith(".pick")]
    by_question = dict(enumerate(record.questions.questions))
    for block in headers:
        q = by_question[ids.block_question(block["block_id"]) or 0]
        assert beginning(q.question, line=False) in block["text"]["text"]
    for element, q in zip(pickers, record.questions.questions, strict=True):
        for option, o in zip(element["options"], q.options, strict=True):
            assert option["text"]["text"].startswith(beginning(o.label))


# -- the check every rendering goes through -----------------------------------------------------


async def send_everything(client: Recorder, record: AskRecord, *, modals: bool) -> None:
    """Everything the Slack platform sends about ``record``: its post (at the level it picks and
    at the tightest), its update and a reminder; with ``modals``, the modals and every reply a
    person can get."""
    poster = SlackPoster(client, browser=True)  # the larger message: with Open in browser
    await poster.post(record)
    await poster.update(record)
    tightest = render_message(record, tightest=True, browser=True)
    await client.chat_postMessage(channel=CHANNEL, text=tightest.text, blocks=tightest.wire)
    await poster.remind(record, 1)
    if not modals:
        return
    meta = ids.ModalMeta(record.id, channel=CHANNEL, thread="1700000000.000001")
    await client.views_open(trigger_id="1.2.3", view=loading_view())
    await client.views_update(view_id="V1", hash="h1", view=form_view(record, meta))
    for i in range(len(record.questions.questions)):
        other = other_view(record, ids.ModalMeta(record.id, CHANNEL, question=i))
        await client.views_open(trigger_id="1.2.3", view=other)
    reply = Reply(client, CHANNEL, "U0ANA", "1700000000.000001")
    for words in replies_for(record):
        await reply(words)
        await client.views_update(view_id="V1", view=notice_view(words))


def replies_for(record: AskRecord) -> list[str]:
    """Every text a person can be told privately about ``record``."""
    said = [REPLIES.not_allowed(record), replies.GONE, replies.RECORDED, replies.NOT_OPENED]
    said += [replies.TRY_AGAIN, replies.MAYBE_SAVED, replies.BAD_CONTROL, clicks.NO_BROWSER]
    said.append(f"{REPLIES.not_allowed(record)} {clicks.BROWSER_GROUPS}")
    said.append(
        clicks.LINK_WORDS.format(valid="43200 minutes", url="https://a.example/a/" + "x" * 1024)
    )
    for sub in record.submissions:
        said += [
            REPLIES.recorded(record, sub.user_id),
            REPLIES.recorded(record, sub.user_id, again=True),
        ]
    for status in AskStatus:
        said.append(REPLIES.ended(record.model_copy(update={"status": status})) or replies.GONE)
    return said


def check(record: AskRecord, *, modals: bool | None = None) -> None:
    """``record``'s every request conforms (with ``modals``, by default while it is pending, its
    modals and replies too), its message shows what must be seen at the level chosen and at the
    tightest, and both stay within the budget."""
    modals = record.status is AskStatus.PENDING if modals is None else modals
    client = Recorder()
    asyncio.run(send_everything(client, record, modals=modals))
    assert_calls_conform(client)
    for browser in (False, True):
        for message in (
            render_message(record, browser=browser),
            render_message(record, tightest=True, browser=browser),
        ):
            assert blocks_cost(message) <= BLOCKS_BUDGET
            assert_seen(record, message.wire)
    if modals:
        meta = ids.ModalMeta(record.id, channel=CHANNEL)
        assert_view_seen(record, form_view(record, meta).to_dict())


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ask=asks())
def test_every_request_for_every_ask_in_every_status_conforms(
    ask: tuple[AskRecord, tuple[Answer, ...], list[Submission]],
) -> None:
    """The modals and replies are checked once per ask, with the submissions that shape them."""
    for record in statuses(*ask):
        check(record, modals=record.status is AskStatus.PENDING and record.required > 1)


# -- the contract's maxima, and the two failures of issue 23 ------------------------------------


def at_most(*, questions: int, multi: bool, text: str = "x") -> QuestionSet:
    """``questions`` questions of four options, every text at its maximum length."""
    return QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": (text * MAX_QUESTION_TEXT)[: MAX_QUESTION_TEXT - 1] + str(i),
                    "header": (text * MAX_HEADER)[:MAX_HEADER],
                    "multiSelect": multi,
                    "options": [
                        {
                            "label": (text * MAX_LABEL)[: MAX_LABEL - 1] + str(j),
                            "description": (text * MAX_DESCRIPTION)[:MAX_DESCRIPTION],
                        }
                        for j in range(4)
                    ],
                }
                for i in range(questions)
            ]
        }
    )


def pending(qs: QuestionSet, **update: Any) -> AskRecord:
    record = AskRecord(
        questions=qs,
        destination=Destination(platform="slack", channel=CHANNEL),
        expires_at=time.time() + 600,
        context={"asker": "Build bot"},
        message=MessageRef(platform="slack", channel=CHANNEL, message_id="1700000000.000001"),
    )
    return record.model_copy(update=update)


@pytest.mark.parametrize("questions", [1, 4])
@pytest.mark.parametrize("multi", [False, True])
def test_questions_at_the_maximum_are_posted(questions: int, multi: bool) -> None:
    """Issue 23: a 2,000-character question with four options of 200-character labels and
    1,000-character descriptions, plain ASCII, built a 3,349-character section at the first level
    of cuts; slack_sdk refused it and the error escaped instead of a tighter level being tried."""
    check(pending(at_most(questions=questions, multi=multi)))


def test_an_answered_multiselect_at_the_maximum_renders() -> None:
    """Issue 23: all four labels and 2,000 typed characters made a 3,144-character section, so
    the message was never updated and kept its live buttons."""
    qs = at_most(questions=1, multi=True)
    (q,) = qs.questions
    answer = Answer(question=q.question, selected=tuple(q.option_labels()), other_text="t" * 2000)
    record = pending(
        qs,
        status=AskStatus.ANSWERED,
        answers=(answer,),
        answered_by=Responder(user_id="U0ANA"),
    )
    check(record)
    assert not [b for b in render_message(record).wire if b["type"] == "actions"]


WORST = "a"
"""A character that costs one unit: a text of it fills its cap exactly."""
LONGEST_ID = "S" + "X" * 30
"""The longest id a mention is made of: ``<!subteam^S…>``, 42 characters."""


def worst_cases() -> Iterator[tuple[str, AskRecord]]:
    """Asks whose every text reaches its cap at the tightest level: the largest messages the last
    level can build, which the markup module's arithmetic adds up."""
    qs = at_most(questions=4, multi=True, text=WORST)
    typed = tuple(
        Answer(question=q.question, selected=tuple(q.option_labels()), other_text=WORST * 2000)
        for q in qs.questions
    )
    chosen = tuple(a.model_copy(update={"other_text": None}) for a in typed)
    mentioned = tuple(f"{LONGEST_ID[:-2]}{n:02}" for n in range(12))
    base = pending(qs, answerers=mentioned, context={"asker": WORST * 300})
    subs = tuple(
        Submission(user_id=f"{LONGEST_ID[:-2]}{n:02}", at=float(n), answers=typed, withdrawn=True)
        for n in range(30)
    )
    agreeing = tuple(
        Submission(user_id=f"{LONGEST_ID[:-2]}{n:02}", at=float(n), answers=chosen)
        for n in range(50)
    )
    by = Responder(user_id=LONGEST_ID)
    yield "pending", base.model_copy(update={"required": 50, "submissions": subs})
    yield (
        "answered",
        base.model_copy(update={"status": AskStatus.ANSWERED, "answers": typed, "answered_by": by}),
    )
    yield (
        "agreed",
        base.model_copy(
            update={
                "status": AskStatus.ANSWERED,
                "required": 50,
                "answers": chosen,
                "answered_by": by,
                "submissions": agreeing,
            }
        ),
    )
    single = QuestionSet(questions=at_most(questions=1, multi=False, text=WORST).questions)
    yield "one-click", base.model_copy(update={"questions": single})


@pytest.mark.parametrize(
    ("name", "record"), [pytest.param(name, record, id=name) for name, record in worst_cases()]
)
def test_the_tightest_level_fits_the_largest_records_by_the_stated_arithmetic(
    name: str, record: AskRecord
) -> None:
    """The markup module's docstring adds up the last level's worst case; these records reach
    every cap, and their sizes are the ones it states."""
    message = render_message(record, tightest=True, browser=True)  # the larger: Open in browser
    stated = {"pending": 8252, "answered": 5200, "agreed": 5200, "one-click": 3010}
    assert blocks_cost(message) <= stated[name]
    sections = [b["text"]["text"] for b in message.wire if b["type"] == "section"]
    assert max(len(t) for t in sections) <= 3000
    check(record)


# -- the checks can fail --------------------------------------------------------------------------


def test_a_renderer_that_cuts_nothing_fails_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A renderer broken to cut nothing, with slack_sdk's own limits on sections and buttons
    lifted (as if the blocks were built by hand), builds a section over 3,000 and a button over
    75: the conformance check refuses it, by the documented limits alone."""
    monkeypatch.setattr(markup, "fit", lambda text, limit: escape(shown(text)))
    monkeypatch.setattr(SectionBlock, "text_max_length", 10**6)
    monkeypatch.setattr(ButtonElement, "text_max_length", 10**6)
    record = pending(at_most(questions=1, multi=False))
    with pytest.raises(AssertionError) as failed:
        check(record, modals=False)
    assert "(section text) [json-pointer:/blocks/1/text/text]" in str(failed.value)
    assert "(button text) [json-pointer:/blocks/2/elements/0/text/text]" in str(failed.value)
    message = render_message(record)
    found = slack_rules.message_refusal(message.text, message.wire)
    assert found is not None and found.error == "invalid_blocks"


def test_the_calls_besides_messages_and_modals_conform() -> None:
    """A posted message's link and a user group's members, as the poster and the membership
    lookup ask for them (``auth.test``, ``conversations.info`` and ``apps.connections.open`` are
    judged as the start, doctor and Socket Mode tests make them through the fake)."""
    client = Recorder()
    ref = MessageRef(platform="slack", channel=CHANNEL, message_id="1700000000.000001")

    async def ask() -> None:
        await SlackPoster(client).permalink(ref)
        await GroupResolver(client).members("S0TEAM")

    asyncio.run(ask())
    assert [method for method, _ in client.calls] == ["chat.getPermalink", "usergroups.users.list"]
    assert_calls_conform(client)


def test_the_web_api_parameters_are_checked_against_slacks_document() -> None:
    """A parameter a method does not declare, one missing, or of the wrong type is refused as
    Slack's document describes the method; a Socket Mode call is known without it."""
    found = refusal("chat.postMessage", {"channel": "C1", "text": "t", "unfurl": True}, bearer=True)
    assert found is not None and "'unfurl' was unexpected" in describe(found)
    found = refusal("chat.update", {"channel": "C1", "text": "t"}, bearer=True)
    assert found is not None and "'ts' is a required property" in describe(found)
    found = refusal(
        "chat.postMessage", {"channel": "C1", "text": "t", "mrkdwn": "yes"}, bearer=True
    )
    assert found is not None and "'yes' is not of type 'boolean'" in describe(found)
    assert refusal("views.open", {"trigger_id": "1", "view": {"type": "modal"}}, bearer=False)
    assert refusal("apps.connections.open", {}, bearer=True) is None
    assert refusal("chat.getPermalink", {"channel": "C1", "message_ts": "1.2"}, bearer=True) is None


# -- the table of limits --------------------------------------------------------------------------


def slack_section(doc: str) -> str:
    found = re.search(r"^## Slack$(.*?)(?=^## |\Z)", doc, re.MULTILINE | re.DOTALL)
    assert found, "docs/limits.md has no '## Slack' section"
    return found.group(1)


@pytest.mark.parametrize("limit", RULES, ids=lambda limit: limit.what[:30])
def test_every_limit_checked_is_in_the_table_with_its_page(limit: slack_rules.Limit) -> None:
    rows = [line for line in slack_section(LIMITS_DOC.read_text()).splitlines() if "|" in line]
    assert [r for r in rows if f"{limit.most:,}" in r and limit.page in r], limit


def _whole(count: int, question: int, label: int, description: int) -> AskRecord:
    """``count`` multiSelect questions of four options, plain text, at these lengths."""
    qs = QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": f"{i}" + "q" * (question - 1),
                    "header": f"Part {i}",
                    "multiSelect": True,
                    "options": [
                        {"label": f"{j}" + "l" * (label - 1), "description": "d" * description}
                        for j in range(4)
                    ],
                }
                for i in range(count)
            ]
        }
    )
    return AskRecord(
        questions=qs,
        destination=Destination(platform="slack", channel=CHANNEL),
        expires_at=time.time() + 600,
    )


@pytest.mark.parametrize(
    ("count", "question", "label", "description"),
    [
        (1, 2000, 100, 130),
        (2, 1000, 100, 380),
        (4, 1000, 100, 340),
        (4, 400, 80, 500),
        (4, 400, 80, 150),  # the README's example, shown whole on both platforms
    ],
)
def test_what_is_shown_whole_and_what_is_cut_first(
    count: int, question: int, label: int, description: int
) -> None:
    """docs/limits.md's statement, and the README's: these sets (multiSelect, plain text,
    pending) are shown whole; with descriptions at the contract's maximum, the descriptions are
    cut, and what else is cut keeps its beginning."""
    record = _whole(count, question, label, description)
    text = "".join(b["text"]["text"] for b in render_message(record).wire if b["type"] == "section")
    assert ELLIPSIS not in text
    for q in record.questions.questions:
        assert q.question in text
        assert all(f"*{o.label}* — {o.description}" in text for o in q.options)
    longer = _whole(count, question, label, MAX_DESCRIPTION)
    text = "".join(b["text"]["text"] for b in render_message(longer).wire if b["type"] == "section")
    assert text.count("d" * 50 + ELLIPSIS) == 4 * count
    for q in longer.questions.questions:
        assert q.question[:400] in text and all(f"*{o.label[:50]}" in text for o in q.options)


def test_descriptions_and_typed_answers_are_cut_first() -> None:
    """The first level after the whole rendering cuts only the descriptions (shown while
    pending) and typed answers (shown once answered); each later one cuts the question text
    and labels tighter, and nothing looser."""
    whole, first = markup.LEVELS[0], markup.LEVELS[1]
    assert (first.question, first.label) == (whole.question, whole.label)
    assert first.description < whole.description and first.other < whole.other
    for looser, tighter in itertools.pairwise(markup.LEVELS[1:]):
        assert tighter.question < looser.question and tighter.label < looser.label
        assert tighter.description <= looser.description and tighter.other <= looser.other
