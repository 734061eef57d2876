"""Answer normalisation and the two result shapes the model reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bridge import (
    Answer,
    AskUserDeferred,
    QuestionSet,
    ToolOutcome,
    ToolRejected,
    answers_result,
    deferred_result,
    normalise_answers,
    validate_questions,
)
from bridge.deferred import DEFAULT_INSTRUCTIONS
from tests.support.samples import FORMAT, FORMAT_QUESTION, SECTIONS, SECTIONS_QUESTION


@pytest.fixture
def qs() -> QuestionSet:
    """The core pair with a third section, so answers can name several labels out of order."""
    outro = {"label": "Outro", "description": "c"}
    sections = {**SECTIONS_QUESTION, "options": [*SECTIONS_QUESTION["options"], outro]}
    return validate_questions([FORMAT_QUESTION, sections])


def answer_tuples(answers: tuple[Answer, ...]) -> list[tuple[str, tuple[str, ...], str | None]]:
    return [(a.question, a.selected, a.other_text) for a in answers]


def handler_error(qs: QuestionSet, returned: object) -> str:
    with pytest.raises(ToolRejected) as info:
        normalise_answers(qs, returned)
    assert info.value.message.startswith("could not get the person's answer: ")
    return info.value.message


def test_mapping_of_label_labels_and_free_text(qs: QuestionSet) -> None:
    got = normalise_answers(qs, {SECTIONS: ["Outro", "Intro", "Outro"], FORMAT: "Summary"})
    assert answer_tuples(got) == [
        (FORMAT, ("Summary",), None),
        (SECTIONS, ("Intro", "Outro"), None),  # option order, duplicates folded
    ]


def test_free_text_goes_to_other_text_stripped(qs: QuestionSet) -> None:
    got = normalise_answers(qs, {FORMAT: "  bullet points  ", SECTIONS: ["Body", "and a FAQ"]})
    assert answer_tuples(got) == [
        (FORMAT, (), "bullet points"),
        (SECTIONS, ("Body",), "and a FAQ"),
    ]


def test_several_free_texts_are_joined(qs: QuestionSet) -> None:
    (_, sections) = normalise_answers(qs, {SECTIONS: ["a FAQ", "Intro", "a glossary", "a FAQ"]})
    assert sections.selected == ("Intro",)
    assert sections.other_text == "a FAQ; a glossary"


def test_left_out_none_and_blank_answers_are_empty(qs: QuestionSet) -> None:
    returns: list[object] = [{}, {FORMAT: None}, {FORMAT: "   ", SECTIONS: []}, [], ()]
    for returned in returns:
        assert answer_tuples(normalise_answers(qs, returned)) == [
            (FORMAT, (), None),
            (SECTIONS, (), None),
        ]


def test_a_handlers_text_is_judged_by_what_a_person_sees(qs: QuestionSet) -> None:
    """As a store judges a typed answer (:func:`bridge.text.typed`): text of only zero-width
    characters is no answer, a label with one hidden in it is the label, and other text is
    kept as it is seen."""
    got = normalise_answers(
        qs, {FORMAT: "\u200b\u2060 ", SECTIONS: ["Intro\u200b", "a FAQ\u2028and\x9b more"]}
    )
    assert answer_tuples(got) == [
        (FORMAT, (), None),
        (SECTIONS, ("Intro",), "a FAQ\nand more"),
    ]


def test_question_keys_match_after_stripping(qs: QuestionSet) -> None:
    (fmt, _) = normalise_answers(qs, {f"  {FORMAT} ": " Detailed "})
    assert fmt.selected == ("Detailed",)


def test_list_of_answers_is_reordered_and_completed(qs: QuestionSet) -> None:
    got = normalise_answers(
        qs,
        [Answer(question=SECTIONS, selected=("Outro", "Body"), other_text="  ")],
    )
    assert answer_tuples(got) == [(FORMAT, (), None), (SECTIONS, ("Body", "Outro"), None)]


def test_list_of_answer_dicts_is_accepted(qs: QuestionSet) -> None:
    got = normalise_answers(qs, [{"question": FORMAT, "other_text": "tables"}])
    assert answer_tuples(got)[0] == (FORMAT, (), "tables")


def test_several_labels_for_single_select_is_a_handler_error(qs: QuestionSet) -> None:
    message = handler_error(qs, {FORMAT: ["Summary", "Detailed"]})
    assert f"question {FORMAT!r} takes one option but the handler chose 2" in message
    handler_error(qs, [Answer(question=FORMAT, selected=("Summary", "Detailed"))])


def test_label_and_text_on_single_select_keeps_both(qs: QuestionSet) -> None:
    (fmt, _) = normalise_answers(qs, {FORMAT: ["Summary", "with a table"]})
    assert (fmt.selected, fmt.other_text) == (("Summary",), "with a table")


def test_unknown_question_text_is_a_handler_error(qs: QuestionSet) -> None:
    message = handler_error(qs, {"What colour?": "Blue"})
    assert "the handler answered a question that was not asked: 'What colour?'" in message
    handler_error(qs, [Answer(question="What colour?")])


def test_same_question_answered_twice_is_a_handler_error(qs: QuestionSet) -> None:
    assert "twice" in handler_error(qs, [Answer(question=FORMAT), Answer(question=FORMAT)])
    assert "twice" in handler_error(qs, {FORMAT: "Summary", f"{FORMAT} ": "Detailed"})


def test_answer_selecting_a_non_option_is_a_handler_error(qs: QuestionSet) -> None:
    message = handler_error(qs, [Answer(question=FORMAT, selected=("Haiku",))])
    assert f"the handler selected 'Haiku', which is not an option of {FORMAT!r}" in message


@pytest.mark.parametrize(
    "returned",
    [42, "Summary", None, {FORMAT: 3}, {FORMAT: ["Summary", 3]}, [42], [{"nope": 1}], {1: "x"}],
)
def test_returns_of_the_wrong_shape_are_handler_errors(qs: QuestionSet, returned: Any) -> None:
    handler_error(qs, returned)


def test_answers_result_is_json_with_one_answer_per_question(qs: QuestionSet) -> None:
    text = answers_result(qs, [Answer(question=SECTIONS, selected=("Body",))])
    assert isinstance(text, str)
    data = json.loads(text)
    assert list(data) == ["questions", "answers"]
    assert data["questions"] == qs.wire()
    assert all("multiSelect" in item for item in data["questions"])
    assert data["answers"] == [
        {"question": FORMAT, "selected": [], "other_text": None},
        {"question": SECTIONS, "selected": ["Body"], "other_text": None},
    ]


def test_answers_result_keeps_unicode_readable(qs: QuestionSet) -> None:
    text = answers_result(qs, [Answer(question=FORMAT, other_text="café ✓")])
    assert "café ✓" in text
    assert json.loads(text)["answers"][0]["other_text"] == "café ✓"


def test_broken_unicode_from_a_person_still_encodes(qs: QuestionSet) -> None:
    text = answers_result(qs, [Answer(question=FORMAT, other_text="ok\ud800")])
    text.encode("utf-8")
    assert json.loads(text)["answers"][0]["other_text"] == "ok\ufffd"


def test_deferred_result_shape_and_no_extra(qs: QuestionSet) -> None:
    deferred = AskUserDeferred(extra={"ask_id": "secret-id-123"})
    content = deferred_result(qs, deferred)
    assert content == {
        "questions": qs.wire(),
        "status": "deferred",
        "instructions": DEFAULT_INSTRUCTIONS,
    }
    assert "secret-id-123" not in json.dumps(content)


def test_default_instructions_say_what_the_spec_requires() -> None:
    text = DEFAULT_INSTRUCTIONS.lower()
    for part in ("now shown to the person", "end your turn", "one short sentence"):
        assert part in text
    assert "do not answer the questions yourself" in text
    assert "do not assume any choice" in text
    assert "next message" in text


def test_tool_outcome_holds_answers_or_a_deferral(qs: QuestionSet) -> None:
    answered = ToolOutcome(questions=qs, answers=normalise_answers(qs, {FORMAT: "Summary"}))
    assert isinstance(answered.content, str)
    assert json.loads(answered.content)["answers"][0]["selected"] == ["Summary"]
    deferred = ToolOutcome(questions=qs, deferred=AskUserDeferred(instructions="Wait."))
    assert deferred.content == {
        "questions": qs.wire(),
        "status": "deferred",
        "instructions": "Wait.",
    }
    with pytest.raises(ValueError):
        ToolOutcome(questions=qs)
    with pytest.raises(ValueError):
        ToolOutcome(questions=qs, answers=(), deferred=AskUserDeferred())
    with pytest.raises(AttributeError):
        answered.answers = ()  # type: ignore[misc]


def test_tool_outcome_text_and_what_hosts_read(qs: QuestionSet) -> None:
    answered = ToolOutcome(questions=qs, answers=normalise_answers(qs, {FORMAT: "Résumé"}))
    assert answered.text == answered.content
    assert answered.host_payload == answered.payload == json.loads(answered.text)
    assert "ask_id" not in answered.host_payload

    deferral = AskUserDeferred(instructions="Attendez la réponse.", extra={"ask_id": 7, "x": 1})
    deferred = ToolOutcome(questions=qs, deferred=deferral)
    assert json.loads(deferred.text) == deferred.content == deferred.payload
    assert "réponse" in deferred.text  # readable text, not \u escapes
    assert deferred.host_payload == {**deferred.payload, "ask_id": "7"}  # only the ask id
    assert json.loads(deferred.host_text) == deferred.host_payload
    no_id = ToolOutcome(questions=qs, deferred=AskUserDeferred(extra={"x": 1}))
    assert no_id.host_payload == no_id.payload


def test_deferred_is_immutable_and_checks_instructions() -> None:
    deferred = AskUserDeferred(extra={"a": 1})
    with pytest.raises(AttributeError):
        deferred.instructions = "x"  # type: ignore[misc]
    assert deferred.extra is not None
    with pytest.raises(TypeError):
        deferred.extra["a"] = 2  # type: ignore[index]
    with pytest.raises(ValueError):
        AskUserDeferred(instructions="  ")
