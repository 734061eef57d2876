"""Renderings: every valid question set, in every status, is valid Block Kit under the size limit,
with untrusted text inert and routing by index only."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from bridge import routing
from bridge.answering import MAX_TYPED
from bridge.models import MAX_DESCRIPTION, MAX_LABEL, MAX_QUESTION_TEXT, Answer, QuestionSet
from bridge.record import AskRecord, AskStatus, Destination, Responder, Submission
from bridge.text import ELLIPSIS
from platforms.slack import ids
from platforms.slack.markup import (
    BLOCKS_BUDGET,
    Message,
    blocks_cost,
    form_view,
    other_view,
    render_message,
)
from platforms.slack.text import cost, escape, fit, mention
from tests.support.samples import one_question_set
from tests.support.slack.slack_rules import (
    BLOCKS_JSON,
    MESSAGE_BLOCKS,
    block_problems,
    describe,
    message_refusal,
    view_refusal,
)

NASTY = '&<>"\\\n\t @!|*_~`😀\u0000\u202e\u2028x'
OWN_MENTIONS = re.compile(r"<@[UW][A-Z0-9]+>|<!subteam\^S[A-Z0-9]+>")


def block_dicts(message: Message) -> list[dict[str, Any]]:
    """The blocks as Slack receives them; ``to_dict`` raises if one is invalid."""
    return [b.to_dict() for b in message.blocks]


def texts(max_size: int) -> st.SearchStrategy[str]:
    chars = st.one_of(st.characters(), st.sampled_from(NASTY))
    return st.text(alphabet=chars, min_size=1, max_size=max_size)


@st.composite
def question_sets(draw: st.DrawFn) -> QuestionSet:
    n = draw(st.integers(1, 4))
    questions = []
    for i in range(n):
        k = draw(st.integers(2, 4))
        questions.append(
            {
                "question": draw(texts(MAX_QUESTION_TEXT - 2)) + f" {i}",
                "header": draw(st.text(min_size=1, max_size=12)),
                "multiSelect": draw(st.booleans()),
                "options": [
                    {
                        "label": draw(texts(MAX_LABEL - 2)) + f" {j}",
                        "description": draw(texts(MAX_DESCRIPTION)),
                    }
                    for j in range(k)
                ],
            }
        )
    try:
        return QuestionSet.model_validate({"questions": questions})
    except ValidationError:
        assume(False)
        raise


def record_for(qs: QuestionSet, **update: Any) -> AskRecord:
    return AskRecord(
        questions=qs,
        destination=Destination(platform="slack", channel="C1"),
        expires_at=time.time() + 60,
        answerers=("U0ANA", "S0TEAM", "<!channel>"),
        context={"asker": "<!here> agent & co"},
        **update,
    )


def statuses(qs: QuestionSet, other: str, user: str) -> list[AskRecord]:
    answers = tuple(
        Answer(
            question=q.question,
            selected=tuple(o.label for o in q.options[: 4 if q.multiSelect else 1]),
            other_text=other,
        )
        for q in qs.questions
    )
    return [
        record_for(qs),
        record_for(
            qs,
            status=AskStatus.ANSWERED,
            answers=answers,
            answered_by=Responder(user_id=user),
        ),
        record_for(qs, status=AskStatus.EXPIRED),
        record_for(qs, status=AskStatus.CANCELLED),
    ]


def assert_inert(rendered: str) -> None:
    leftover = OWN_MENTIONS.sub("", rendered)
    assert "<" not in leftover and ">" not in leftover, leftover


def check_all(qs: QuestionSet, other: str, user: str) -> None:
    for record in statuses(qs, other, user):
        message = render_message(record)
        dicts = block_dicts(message)  # raises SlackObjectFormationError if invalid
        assert blocks_cost(message.blocks) <= BLOCKS_BUDGET < BLOCKS_JSON.most
        refused = message_refusal(message.text, dicts)
        assert refused is None, describe(refused)
        assert_inert(json.dumps(dicts, ensure_ascii=False) + message.text)
    pending = statuses(qs, other, user)[0]
    meta = ids.ModalMeta(pending.id, channel="C1", thread="1.2")
    views = [form_view(pending, meta)]
    views += [
        other_view(pending, ids.ModalMeta(pending.id, "C1", question=i))
        for i in range(len(qs.questions))
    ]
    for view in views:
        as_dict = view.to_dict()
        refused = view_refusal(as_dict)
        assert refused is None, describe(refused)
        assert_inert(json.dumps(as_dict["blocks"], ensure_ascii=False))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qs=question_sets(), other=texts(MAX_TYPED), user=st.text(max_size=40))
def test_every_rendering_is_valid_and_fits(qs: QuestionSet, other: str, user: str) -> None:
    check_all(qs, other, user)


def test_four_by_four_at_maximum_length_fits() -> None:
    worst = '😀&"' * 1500  # every character costs the most it can
    qs = QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": worst[: MAX_QUESTION_TEXT - 1] + str(i),
                    "header": "&" * 12,
                    "multiSelect": i % 2 == 1,
                    "options": [
                        {
                            "label": worst[: MAX_LABEL - 1] + str(j),
                            "description": worst[:MAX_DESCRIPTION],
                        }
                        for j in range(4)
                    ],
                }
                for i in range(4)
            ]
        }
    )
    check_all(qs, worst[:MAX_TYPED], "U0ANA")


def test_the_most_submissions_at_maximum_length_fit() -> None:
    """An ask needing 50 people, 30 submissions of every label at maximum length plus typed
    text: the pending message lists the 10 latest, escaped and bounded, within Slack's limits."""
    worst = '😀&"<' * 1500
    qs = QuestionSet.model_validate(
        {
            "questions": [
                {
                    "question": worst[: MAX_QUESTION_TEXT - 1] + str(i),
                    "header": "&" * 12,
                    "multiSelect": True,
                    "options": [
                        {"label": worst[: MAX_LABEL - 1] + str(j), "description": worst[:900]}
                        for j in range(4)
                    ],
                }
                for i in range(4)
            ]
        }
    )
    answers = tuple(
        Answer(
            question=q.question,
            selected=tuple(q.option_labels()),
            other_text=worst[:MAX_TYPED] if i % 2 else None,
        )
        for i, q in enumerate(qs.questions)
    )
    subs = tuple(
        Submission(user_id=f"U0{'X' * 28}{n:02}", name="<!channel>", at=float(n), answers=answers)
        for n in range(30)
    )
    record = record_for(qs, required=50, submissions=subs)
    message = render_message(record)
    dicts = block_dicts(message)
    assert blocks_cost(message.blocks) <= BLOCKS_BUDGET < BLOCKS_JSON.most
    assert message_refusal(message.text, dicts) is None
    raw = json.dumps(dicts, ensure_ascii=False)
    assert_inert(raw)  # the bridge's own mentions of the people who submitted stay real
    (listing,) = [b for b in dicts if b["block_id"].endswith(".subs")]
    lines = listing["text"]["text"].split("\n")
    assert lines[0].startswith("Needs 50 approvals") and lines[1] == "… and 20 earlier submissions"
    assert len(lines) == 12 and all("(typed: doesn't count)" in line for line in lines[2:])
    assert len(listing["text"]["text"]) <= 3000


def test_mentions_and_links_from_the_model_are_inert() -> None:
    qs = one_question_set(
        "Ping <!channel> <!here> <@U123> and <https://evil.example|x>?",
        "<!everyone>",
        ("<@U123>", "<https://evil|click>"),
        ("a & b", "<!subteam^S1>"),
    )
    message = render_message(record_for(qs))
    raw = json.dumps(block_dicts(message)) + message.text
    for bad in ("<!channel>", "<!here>", "<@U123>", "<https://", "<!everyone>", "<!subteam^S1>"):
        assert bad not in raw
    assert "&lt;!channel&gt;" in raw and "a &amp; b" in raw
    # the bridge's own mentions of configured answerers stay real; a bogus answerer id is inert
    assert "<@U0ANA>" in raw and "<!subteam^S0TEAM>" in raw and ", &lt;!channel&gt;:" in raw


def test_fit_cuts_visibly_and_never_splits_an_entity() -> None:
    assert fit("a<b", 10) == "a&lt;b"
    cut = fit("<" * 10, 12)
    assert cut == "&lt;&lt;" + ELLIPSIS and cost(cut) <= 12
    assert fit("x" * 100, 10) == "x" * 9 + ELLIPSIS
    assert fit("a\u0000b\u202ec\ud800", 10) == "abc"
    assert fit("\x1f", 10) == "(blank)"
    assert escape("&<>") == "&amp;&lt;&gt;"
    assert mention("U0ANA") == "<@U0ANA>" and mention("S0TEAM") == "<!subteam^S0TEAM>"
    assert mention("<!here>") == "&lt;!here&gt;"


def test_buttons_route_by_index_and_answers_keep_full_labels() -> None:
    long_label = "L" * MAX_LABEL
    qs = one_question_set("Pick", "H", (long_label, "d"), ("short", "d"))
    record = record_for(qs)
    dicts: list[dict[str, Any]] = block_dicts(render_message(record))
    buttons = [el for b in dicts if b["type"] == "actions" for el in b["elements"]]
    assert [b["action_id"] for b in buttons] == [
        routing.pick_id(record.id, 0, 0),
        routing.pick_id(record.id, 0, 1),
        routing.other_id(record.id, 0),
    ]
    assert buttons[0]["text"]["text"].endswith(ELLIPSIS) and len(buttons[0]["text"]["text"]) <= 75
    assert routing.parse(buttons[0]["action_id"]) == routing.Route("pick", record.id, 0, 0)
    assert [ids.block_question(b) for b in ("q0.pick", "q3.other", "q1.text")] == [0, 3, 1]
    assert ids.block_question("x0.pick") is None and ids.block_question("q.pick") is None


def test_each_rendering_uses_fresh_block_ids() -> None:
    qs = one_question_set("Q", "H", ("a", "d"), ("b", "d"))
    record = record_for(qs)
    first = {b["block_id"] for b in block_dicts(render_message(record))}
    second = {b["block_id"] for b in block_dicts(render_message(record))}
    assert first.isdisjoint(second)
    assert block_problems(block_dicts(render_message(record)), "/blocks", MESSAGE_BLOCKS) == []


INVISIBLE = [
    *"\u200b\u200c\u200d\u200e\u200f\u061c\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\u180e",
    *map(chr, range(0x202A, 0x202F)),  # bidi embeddings and overrides
    *map(chr, range(0x2066, 0x206A)),  # bidi isolates
    *map(chr, range(0xE0000, 0xE0080)),  # tag characters
    *map(chr, range(0x00, 0x09)),
    *map(chr, range(0x0B, 0x20)),
    *map(chr, range(0x7F, 0xA0)),  # controls other than tab and newline
]
TAGS = "".join(chr(0xE0000 + ord(c)) for c in "say yes")


def rendered_json(qs: QuestionSet, other: str) -> str:
    """Every rendering of ``qs`` (each status, the form, the other-answer views) as JSON text."""
    out = []
    for record in statuses(qs, other, "U0ANA"):
        message = render_message(record)
        out += [json.dumps(block_dicts(message), ensure_ascii=False), message.text]
    pending = statuses(qs, other, "U0ANA")[0]
    views = [form_view(pending, ids.ModalMeta(pending.id, channel="C1", thread="1.2"))]
    views += [other_view(pending, ids.ModalMeta(pending.id, "C1", question=0))]
    out += [json.dumps(view.to_dict(), ensure_ascii=False) for view in views]
    return "\n".join(out)


def test_no_invisible_character_reaches_slack() -> None:
    for char in INVISIBLE:
        qs = one_question_set(
            f"Appro{char}ve{char}?", f"H{char}d", (f"Ye{char}s", f"d{char}1"), (f"N{char}o", "d")
        )
        rendered = rendered_json(qs, f"o{char}t")
        assert char not in rendered, f"U+{ord(char):04X}"
        if not char.isspace():  # one-line places show a vertical tab and the like as a space
            assert "Approve?" in rendered and "Yes" in rendered and "No" in rendered
    assert fit("\u200b\u2060\ufeff" + TAGS, 10) == "(blank)"
    # a presentation selector after a letter shows nothing either
    qs = one_question_set("Go\ufe0f?", "H", ("Yes\ufe0f", "d"), ("No", "d"))
    rendered = rendered_json(qs, "ok")
    assert "Go?" in rendered and "Yes" in rendered and "s\ufe0f" not in rendered


def test_emoji_sequences_reach_slack_whole() -> None:
    coder, flag, heart = "\U0001f468\u200d\U0001f4bb", "\U0001f3f3\ufe0f\u200d\U0001f308", "❤️"
    qs = one_question_set(f"Who {coder}?", "H", (flag, "d"), (heart, "d"))
    rendered = rendered_json(qs, f"me {coder}")
    assert coder in rendered and flag in rendered and heart in rendered


def without_block_ids(message: Message) -> list[dict[str, Any]]:
    """The blocks, less the ids every render draws afresh."""
    return [{k: v for k, v in b.items() if k != "block_id"} for b in block_dicts(message)]


@pytest.mark.parametrize("status", list(AskStatus))
def test_an_ended_ask_is_shown_without_descriptions_whatever_the_store_kept(
    status: AskStatus,
) -> None:
    """Descriptions help a person decide: shown while pending only. So the final state looks the
    same before and after the store dropped them (a late click re-renders from what it kept)."""
    qs = one_question_set("Ship it?", "Ship", ("Yes", "Roll out today"), ("No", "Hold the release"))
    answered = status is AskStatus.ANSWERED
    record = record_for(
        qs,
        status=status,
        answers=(Answer(question="Ship it?", selected=("Yes",)),) if answered else None,
        answered_by=Responder(user_id="U0ANA") if answered else None,
    )
    shown = json.dumps(block_dicts(render_message(record)))
    if status is AskStatus.PENDING:
        assert "Roll out today" in shown and "Hold the release" in shown
        return
    assert "Roll out today" not in shown and "Hold the release" not in shown
    kept = record.model_copy(update={"questions": qs.undescribed()})
    assert without_block_ids(render_message(kept)) == without_block_ids(render_message(record))
