"""The question-set data model: the wire shapes of the ``ask_user`` tool.

Field names are the tool's wire names (``multiSelect`` included) so a model's arguments and the
JSON result round-trip without aliases. The limits live here, once; validation of untrusted tool
arguments (with model-facing messages) is in :mod:`bridge.validation`, which builds these models
only after every rule has passed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

MIN_QUESTIONS = 1
MAX_QUESTIONS = 4
MIN_OPTIONS = 2
MAX_OPTIONS = 4
MAX_HEADER = 12
# Texts come from a model and are shown to people: bounded so a runaway generation cannot bloat the
# store or a chat message. Generous on purpose -- platforms cut long texts visibly for display.
MAX_QUESTION_TEXT = 2000
MAX_LABEL = 200
MAX_DESCRIPTION = 1000

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


STORED = {"stored": True}
"""Validation context for a record read back from a store (``model_validate_json(...,
context=STORED)``): only there may an option lack its description (see :class:`Option`)."""


class Option(BaseModel):
    """One choice of a question: a short ``label`` and a ``description`` of what it means.

    Both are required, from a model and from Python alike (``Option(label=...)`` alone is refused;
    :func:`bridge.validation.validate_questions` refuses an option without one however it came).
    The one exception is a stored record: the description helps a person decide, and once an
    ask's outcome reached whoever gets it the store drops the descriptions (``bridge.store.keys``,
    Retention). Such a record is read with the :data:`STORED` context, which lets an option
    parse without its description; it then has the description ``""``, which its JSON leaves
    out (never a given one: a given description is non-empty)."""

    model_config = ConfigDict(frozen=True)

    label: Annotated[NonEmpty, StringConstraints(max_length=MAX_LABEL)]
    description: Annotated[
        str, StringConstraints(strip_whitespace=True, max_length=MAX_DESCRIPTION)
    ] = Field(exclude_if=lambda text: not text)

    @model_validator(mode="before")
    @classmethod
    def _stored_without_description(cls, data: object, info: ValidationInfo) -> object:
        if isinstance(data, dict) and "description" not in data and info.context == STORED:
            return {**data, "description": ""}
        return data

    @field_validator("description")
    @classmethod
    def _described(cls, text: str, info: ValidationInfo) -> str:
        if not text and info.context != STORED:
            raise ValueError("String should have at least 1 character")
        return text


def _undescribed(option: Option) -> Option:
    """The option without its description (a copy, not validated: only a store builds one)."""
    return option.model_copy(update={"description": ""})


class Question(BaseModel):
    """One multiple-choice question.

    ``header`` is a chip-sized label (at most 12 characters) shown above the question;
    ``multiSelect`` lets the person pick several options.
    """

    model_config = ConfigDict(frozen=True)

    question: Annotated[NonEmpty, StringConstraints(max_length=MAX_QUESTION_TEXT)]
    header: Annotated[NonEmpty, StringConstraints(max_length=MAX_HEADER)]
    options: Annotated[tuple[Option, ...], Field(min_length=MIN_OPTIONS, max_length=MAX_OPTIONS)]
    multiSelect: bool = False

    @model_validator(mode="after")
    def _labels_unique(self) -> Question:
        labels = [o.label for o in self.options]
        if len(set(labels)) != len(labels):
            raise ValueError("no two options of a question may have the same label")
        return self

    def option_labels(self) -> list[str]:
        return [o.label for o in self.options]


class QuestionSet(BaseModel):
    """The tool's arguments: 1 to 4 questions with distinct texts."""

    model_config = ConfigDict(frozen=True)

    questions: Annotated[
        tuple[Question, ...], Field(min_length=MIN_QUESTIONS, max_length=MAX_QUESTIONS)
    ]

    @model_validator(mode="after")
    def _questions_unique(self) -> QuestionSet:
        texts = [q.question for q in self.questions]
        if len(set(texts)) != len(texts):
            raise ValueError("no two questions may have the same text")
        return self

    def wire(self) -> list[dict[str, object]]:
        """The questions as JSON-ready dicts, ``multiSelect`` always present."""
        return [q.model_dump(mode="json") for q in self.questions]

    def undescribed(self) -> QuestionSet:
        """This set with every option's description dropped (what a store keeps of an ask
        whose outcome was handed over: see :class:`Option`)."""
        bare = tuple(
            q.model_copy(update={"options": tuple(_undescribed(o) for o in q.options)})
            for q in self.questions
        )
        return self.model_copy(update={"questions": bare})


_M = TypeVar("_M", bound=BaseModel)
_OPTION_GIVEN = {"label", "description"}
_QUESTION_GIVEN = {"question", "header", "options"}
_QUESTION_GIVEN_MULTI = {"question", "header", "options", "multiSelect"}
_SET_GIVEN = {"questions"}
_set_slot = object.__setattr__


def _built(cls: type[_M], values: dict[str, object], given: set[str]) -> _M:
    """A ``cls`` holding ``values`` (every field, in the model's order) without validation, as
    :meth:`BaseModel.model_construct` makes one, less its per-call bookkeeping; ``given`` is its
    ``model_fields_set``, shared."""
    model = cls.__new__(cls)
    _set_slot(model, "__dict__", values)
    _set_slot(model, "__pydantic_fields_set__", given)
    _set_slot(model, "__pydantic_extra__", None)
    _set_slot(model, "__pydantic_private__", None)
    return model


def checked_question_set(questions: Iterable[Mapping[str, Any]]) -> QuestionSet:
    """The :class:`QuestionSet` of ``questions``: stripped fields that passed every rule of
    :func:`bridge.validation.validate_questions` (which calls this, and only once they did).

    Those rules are stricter than the models' constraints (a blank text is refused, not only an
    empty one; labels and questions must differ in how they look, not only in their code
    points), so pydantic's validation would re-check what was decided -- and for text outside
    Latin scripts it costs: its strip and length constraints encode every text to UTF-8 again,
    40% of the checking of a call at the contract's maximum sizes (the tests hold a built set
    equal to the validated one for any input the rules accept). The models share their
    ``model_fields_set``, one set per distinct set of names given: pydantic would give each of
    a four-question set's 21 models its own (216 bytes), held by every tool call from its
    validation to its post (a wave of 1,000 calls holds them all at once, and the memory they
    freed stays in the process). The models are frozen, so pydantic never adds to a set in place
    (``model_copy`` copies it before adding the names it updates)."""
    built: list[Question] = []
    for question in questions:
        options = tuple(
            _built(Option, {"label": o["label"], "description": o["description"]}, _OPTION_GIVEN)
            for o in question["options"]
        )
        values: dict[str, object] = {
            "question": question["question"],
            "header": question["header"],
            "options": options,
            "multiSelect": question.get("multiSelect", False),
        }
        given = _QUESTION_GIVEN_MULTI if "multiSelect" in question else _QUESTION_GIVEN
        built.append(_built(Question, values, given))
    return _built(QuestionSet, {"questions": tuple(built)}, _SET_GIVEN)


class Answer(BaseModel):
    """The person's answer to one question.

    ``selected`` holds chosen option labels in option order; ``other_text`` is what they typed
    instead of (or, for multiSelect, as well as) choosing, or ``None``.
    """

    model_config = ConfigDict(frozen=True)

    question: str
    selected: tuple[str, ...] = ()
    other_text: str | None = None


def holds_typed(answers: Iterable[Answer]) -> bool:
    """Whether any of ``answers`` holds typed ("Other") text. Such a submission is recorded and
    shown but never counts toward agreement (:func:`bridge.judging.agreed`), so K people can only
    agree on options; it is written here, beside :class:`Answer`, because the record
    (:attr:`bridge.record.Submission.typed`) and every store ask it."""
    return any(a.other_text is not None for a in answers)
