"""The short ways :mod:`bridge.result` takes for what every waiting call renders. Answers
already normal (a store's; the tool's own outcome, rendered) are checked as they are, not drafted
anew: against the drafting they skip, kept as the reference (``_drafted``), the two must agree on
any return -- the same answers, or the same refusal. The result's text comes from an encoder
built once: the same text as ``json.dumps``."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bridge import (
    Answer,
    QuestionSet,
    ToolOutcome,
    ToolRejected,
    normalise_answers,
    validate_questions,
)
from bridge.result import _drafted
from tests.support.samples import FORMAT, FORMAT_QUESTION, SECTIONS, SECTIONS_QUESTION

OUTRO = {"label": "Outro", "description": "c"}
QS = validate_questions(
    [FORMAT_QUESTION, {**SECTIONS_QUESTION, "options": [*SECTIONS_QUESTION["options"], OUTRO]}]
)
LABELS = ["Summary", "Detailed", "Intro", "Body", "Outro"]

question_texts = st.sampled_from([FORMAT, SECTIONS, f" {FORMAT}", f"{SECTIONS} ", "What colour?"])
labels = st.one_of(
    st.sampled_from(LABELS),
    st.sampled_from(LABELS).map(lambda label: f" {label}"),
    st.sampled_from(LABELS).map(lambda label: f"{label}\u200b"),
    st.just("Haiku"),
)
typed_texts = st.one_of(
    st.none(),
    st.sampled_from(["with a table", "  padded  ", "", "   ", "a; b", "\u200b", "line\u2028break"]),
    labels,
    st.text(max_size=8),
)
answers = st.builds(
    Answer,
    question=question_texts,
    selected=st.lists(labels, max_size=4).map(tuple),
    other_text=typed_texts,
)
items = st.one_of(answers, answers.map(lambda a: a.model_dump()), st.just(42), st.just({"nope": 1}))


def normal_answers(qs: QuestionSet) -> st.SearchStrategy[list[Answer]]:
    """Answers as a store keeps them: one per question, in order, labels in option order."""

    def one(index: int) -> st.SearchStrategy[Answer]:
        q = qs.questions[index]
        chosen = st.lists(st.sampled_from(q.option_labels()), unique=True, max_size=len(q.options))
        if not q.multiSelect:
            chosen = chosen.map(lambda picked: picked[:1])
        return st.builds(
            Answer,
            question=st.just(q.question),
            selected=chosen.map(lambda picked: tuple(x for x in q.option_labels() if x in picked)),
            other_text=st.one_of(st.none(), st.sampled_from(["with a table", "a FAQ"])),
        )

    return st.tuples(*(one(i) for i in range(len(qs.questions)))).map(list)


def outcome(normalise: Any, returned: object) -> tuple[str, object]:
    try:
        return ("answers", normalise(QS, returned))
    except ToolRejected as rejected:
        return ("refused", rejected.message)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(items, max_size=3), normal_answers(QS), st.tuples(answers, answers)))
@example([Answer(question=FORMAT, selected=(" Summary",))])
@example([Answer(question=FORMAT), Answer(question=SECTIONS, selected=("Outro", "Body"))])
@example([Answer(question=FORMAT, selected=("Summary", "Detailed")), Answer(question=SECTIONS)])
@example([Answer(question=FORMAT, other_text="Detailed"), Answer(question=SECTIONS)])
@example([Answer(question=FORMAT, other_text=" x "), Answer(question=SECTIONS)])
@example([Answer(question=FORMAT), Answer(question=SECTIONS, selected=("Body", "Body"))])
def test_the_short_way_agrees_with_drafting(returned: Any) -> None:
    assert outcome(normalise_answers, returned) == outcome(_drafted, returned)


@given(normal_answers(QS))
def test_normal_answers_come_back_as_they_are(returned: list[Answer]) -> None:
    """What makes the short way short: no answer rebuilt (a rebuild would be equal, not the
    same object)."""
    got = normalise_answers(QS, returned)
    assert all(mine is given for mine, given in zip(got, returned, strict=True))


@given(st.text(max_size=12))
@example("caf\u00e9 \u2014 \U0001f600")
@example('quote " and back\\slash, tab\t')
def test_the_result_text_is_what_json_dumps_writes(typed: str) -> None:
    """The result's encoder is built once and looks for no cycle: the same text, byte for byte,
    as ``json.dumps(payload, ensure_ascii=False)`` (the docs show it: ``"selected": [...]``)."""
    answers = [Answer(question=FORMAT, selected=("Summary",), other_text=typed or None)]
    outcome = ToolOutcome(questions=QS, answers=normalise_answers(QS, answers))
    assert outcome.text == json.dumps(outcome.payload, ensure_ascii=False)
    assert outcome.host_text == json.dumps(outcome.host_payload, ensure_ascii=False)
