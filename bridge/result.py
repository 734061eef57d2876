"""What the model reads back: answers normalised to one shape, rendered as the tool result.

Handlers answer in whatever shape is natural to them (a mapping of question text to a label, a
list of labels or free text; or a list of :class:`Answer`). :func:`normalise_answers` turns any of
them into one :class:`Answer` per question, in question order, with chosen labels in option order
-- so every path (a terminal, Slack, Discord, the deferred answers feed) renders the same JSON
through :func:`answers_result`. A handler that answers wrongly (an unknown question, several
options for a single-select question) is reported as :class:`ToolRejected`, like any handler error.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from bridge.deferred import AskUserDeferred
from bridge.errors import ToolRejected
from bridge.models import Answer, Question, QuestionSet
from bridge.record import Submission
from bridge.text import typed

HANDLER_FAILED = "could not get the person's answer: "
OTHER_TEXT_SEPARATOR = "; "
_json_text = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
"""What ``json.dumps(value, ensure_ascii=False)`` writes, for the results built here: fresh dicts
and lists of texts, which hold no cycle to look for (the search, one set entry per container,
was a sixth of a four-question result's encoding)."""


class HandlerError(Exception):
    """A handler returned something that is not an answer to the questions asked."""


@dataclass
class _Draft:
    question: Question
    selected: set[str] = field(default_factory=set)
    texts: list[str] = field(default_factory=list)
    seen: bool = False

    def add(self, value: str) -> None:
        """A label goes to ``selected``; any other text is the person's own answer, as
        :func:`bridge.text.typed` keeps it (what they see of it), unless they would see nothing
        of it: the rule a store judges typed text by, for answers that come through a handler."""
        labels = self.question.option_labels()
        label = value.strip()
        text = label if label in labels else typed(value)
        if text is None:
            return
        if text in labels:
            self.selected.add(text)
        elif text not in self.texts:
            self.texts.append(text)

    def answer(self) -> Answer:
        q = self.question
        selected = tuple(label for label in q.option_labels() if label in self.selected)
        if not q.multiSelect and len(selected) > 1:
            chosen = ", ".join(repr(s) for s in selected)
            raise HandlerError(
                f"question {q.question!r} takes one option but the handler chose {len(selected)}: "
                f"{chosen}"
            )
        other = OTHER_TEXT_SEPARATOR.join(self.texts) or None
        return Answer(question=q.question, selected=selected, other_text=other)


class _Drafts:
    def __init__(self, qs: QuestionSet) -> None:
        self.order = [_Draft(q) for q in qs.questions]
        self.by_text = {d.question.question: d for d in self.order}

    def draft(self, text: object) -> _Draft:
        if not isinstance(text, str):
            raise HandlerError(f"the handler answered a question given as {type(text).__name__}")
        found = self.by_text.get(text) or self.by_text.get(text.strip())
        if found is None:
            raise HandlerError(f"the handler answered a question that was not asked: {text!r}")
        if found.seen:
            raise HandlerError(f"the handler answered the question {text!r} twice")
        found.seen = True
        return found


def _from_mapping(drafts: _Drafts, returned: Mapping[Any, object]) -> None:
    for text, value in returned.items():
        draft = drafts.draft(text)
        if value is None:
            continue
        if isinstance(value, str):
            draft.add(value)
            continue
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            for v in value:
                draft.add(v)
            continue
        raise HandlerError(
            f"the answer to {draft.question.question!r} must be an option label, a list of "
            f"labels or the person's own text, got {type(value).__name__}"
        )


def _from_answers(drafts: _Drafts, returned: Sequence[object]) -> None:
    for item in returned:
        if isinstance(item, Answer):
            answer = item
        elif isinstance(item, Mapping):
            try:
                answer = Answer.model_validate(item)
            except ValidationError as exc:
                raise HandlerError(f"the handler returned a malformed answer: {exc}") from None
        else:
            raise HandlerError(
                f"the handler returned a list holding {type(item).__name__}; a list must hold "
                "Answer objects"
            )
        draft = drafts.draft(answer.question)
        labels = draft.question.option_labels()
        for label in answer.selected:
            if label.strip() not in labels:
                raise HandlerError(
                    f"the handler selected {label!r}, which is not an option of "
                    f"{draft.question.question!r}"
                )
            draft.add(label)
        if answer.other_text is not None:
            draft.add(answer.other_text)


def normalise_answers(qs: QuestionSet, returned: object) -> tuple[Answer, ...]:
    """One :class:`Answer` per question of ``qs``, in question order, from a handler's return.

    ``returned`` is a mapping of question text to an option label, a list of labels, or the
    person's own text (``None`` or a left-out question: no answer); or a sequence of
    :class:`Answer` (or dicts of its fields). Labels that match an option go to ``selected`` in
    option order; other non-empty text goes to ``other_text`` (several such texts are joined with
    ``"; "``). Anything else raises :class:`ToolRejected` ("could not get the person's answer:
    ..."), the same way a handler that raises is reported.
    """
    as_given = _normal(qs, returned)
    return as_given if as_given is not None else _drafted(qs, returned)


def _drafted(qs: QuestionSet, returned: object) -> tuple[Answer, ...]:
    """:func:`normalise_answers` of any return: each answer drafted against its question."""
    drafts = _Drafts(qs)
    try:
        if isinstance(returned, Mapping):
            _from_mapping(drafts, returned)
        elif isinstance(returned, list | tuple):
            _from_answers(drafts, returned)
        else:
            raise HandlerError(
                f"the handler returned {type(returned).__name__}; it must return a mapping of "
                "question text to answer, a list of Answer, or AskUserDeferred"
            )
        return tuple(d.answer() for d in drafts.order)
    except HandlerError as exc:
        raise ToolRejected(HANDLER_FAILED + str(exc)) from None


def _normal(qs: QuestionSet, returned: object) -> tuple[Answer, ...] | None:
    """``returned`` as it is, when it is already what :func:`normalise_answers` makes of it: one
    :class:`Answer` per question, in question order, each naming its question as asked, its
    labels options' own (stripped: a label's type strips it) in option order, at most one for a
    single-select question, and typed text as :func:`typed` keeps it that is no label; else
    ``None``.

    A store's answers are that (it judged them against the set), and a waiting call normalises
    them twice -- the outcome read back, then the result's JSON: drafting them anew each time
    (:func:`_drafted`) cost 16 us for four questions, this check costs 2.5 us."""
    questions = qs.questions
    if not isinstance(returned, list | tuple) or len(returned) != len(questions):
        return None
    for q, a in zip(questions, returned, strict=True):
        if type(a) is not Answer or a.question != q.question:
            return None
        selected, other = a.selected, a.other_text
        if not selected and other is None:
            continue
        labels = [o.label for o in q.options]
        if len(selected) == 1:
            if selected[0] not in labels:
                return None
        elif selected and not (
            q.multiSelect and list(selected) == [label for label in labels if label in selected]
        ):
            return None
        if other is not None and (other in labels or typed(other) != other):
            return None
    return tuple(returned)


@dataclass(frozen=True)
class AskUserAnswered:
    """Answers together with who gave them, returned by a handler that knows (the chat handler)
    instead of bare answers.

    ``who``: the people whose answer was taken (one; or, for an ask that needed ``required`` K
    people to agree, the K who agreed); ``submissions``: every person's submission (K >= 2,
    disagreeing and typed ones included); ``extra``: more for the host (the ask id). All of it
    reaches the host on :attr:`ToolOutcome.answered`; the model reads only the answers, plus
    ``answered_by`` (each of ``who`` as user id, name and time) when ``tell_model`` is set
    (``AskPolicy.tell_model_who``)."""

    answers: Sequence[Answer]
    who: tuple[Submission, ...] = ()
    submissions: tuple[Submission, ...] = ()
    tell_model: bool = False
    extra: Mapping[str, Any] | None = None


def who_payload(who: Sequence[Submission]) -> list[dict[str, Any]]:
    """Who answered, as the model reads it when the policy opts in: user id, display name and
    when (ISO 8601, UTC)."""
    return [
        {
            "user_id": s.user_id,
            "name": s.name,
            "at": datetime.datetime.fromtimestamp(s.at, datetime.UTC).isoformat(),
        }
        for s in who
    ]


def answers_payload(
    qs: QuestionSet, answers: Sequence[Answer], who: Sequence[Submission] | None = None
) -> dict[str, Any]:
    """The answers result as a JSON-ready dict (what :func:`answers_result` serialises); with
    ``who`` (only when the policy tells the model who answered), also ``answered_by``."""
    normalised = normalise_answers(qs, list(answers))
    body: dict[str, Any] = {
        "questions": qs.wire(),
        "answers": [
            {"question": a.question, "selected": list(a.selected), "other_text": a.other_text}
            for a in normalised
        ],
    }
    if who is not None:
        body["answered_by"] = who_payload(who)
    return body


def answers_result(
    qs: QuestionSet, answers: Sequence[Answer], who: Sequence[Submission] | None = None
) -> str:
    """The tool result for answers: JSON text the model reads, one answer per question in order.

    ``{"questions": [...], "answers": [{"question", "selected", "other_text"}, ...]}``; the
    questions echo the validated set whole (the options' descriptions included, as the model sent
    them) with ``multiSelect`` always present. Every path that hands answers to a model (the
    waiting tool call, the deferred answers feed, MCP) renders them here; the store keeps the
    descriptions until the outcome was handed over (``bridge.store.keys``, Retention).
    """
    return _json_text(answers_payload(qs, answers, who))


def unanswered_text(expired: bool) -> str:
    """What the model (or a pipeline) is told when an ask ended without an answer: expired, or
    cancelled. One wording for the waiting call (:class:`~bridge.errors.NotAnswered`) and
    ``ask-bridge wait``."""
    what = "expired" if expired else "were cancelled"
    return (
        f"nobody answered: the questions {what} before anyone answered. Continue without the "
        "answers, or ask again if you still need them."
    )


def deferred_result(qs: QuestionSet, deferred: AskUserDeferred) -> dict[str, Any]:
    """The tool result for a deferral: ``{"questions", "status": "deferred", "instructions"}``.

    ``deferred.extra`` is deliberately absent: it is for the host, found on
    :attr:`ToolOutcome.deferred`.
    """
    return {
        "questions": qs.wire(),
        "status": "deferred",
        "instructions": deferred.instructions,
    }


@dataclass(frozen=True)
class ToolOutcome:
    """One finished ``ask_user`` call: the validated questions and either answers or a deferral.

    ``content`` is exactly what the model reads. Hosts and framework adapters that need more than
    the model sees -- the deferral's ``extra`` (an ask id, a message link) -- read it from
    ``deferred`` here; get an outcome from ``AskUserTool.ainvoke``/``invoke``.
    """

    questions: QuestionSet
    answers: tuple[Answer, ...] | None = None
    deferred: AskUserDeferred | None = None
    answered: AskUserAnswered | None = None
    """Who answered, when the handler said (the chat handler does): for the host; the model
    reads it only when ``answered.tell_model``."""

    def __post_init__(self) -> None:
        if (self.answers is None) == (self.deferred is None):
            raise ValueError("a ToolOutcome holds either answers or a deferral, not both")

    @property
    def content(self) -> str | dict[str, Any]:
        """The tool result: answers JSON text, or the deferred dict (without ``extra``)."""
        if self.deferred is not None:
            return deferred_result(self.questions, self.deferred)
        return self.text

    @property
    def payload(self) -> dict[str, Any]:
        """The tool result as a JSON-ready dict: the answers payload or the deferred dict."""
        if self.deferred is not None:
            return deferred_result(self.questions, self.deferred)
        assert self.answers is not None
        told = self.answered is not None and self.answered.tell_model
        who = self.answered.who if told and self.answered is not None else None
        return answers_payload(self.questions, self.answers, who)

    @property
    def text(self) -> str:
        """The tool result as JSON text, whichever the outcome: what hosts that only carry text
        (provider APIs, LangChain, pydantic-ai) hand to the model."""
        return _json_text(self.payload)

    @property
    def host_payload(self) -> dict[str, Any]:
        """:attr:`payload` plus, for a deferral whose ``extra`` has one, its ``ask_id``: for
        hosts whose caller is not the model alone (the MCP client, ``ask-bridge ask``) and must
        match the answer that later arrives on the answers feed."""
        body = self.payload
        ask_id = (self.deferred.extra or {}).get("ask_id") if self.deferred is not None else None
        if ask_id is not None:
            body["ask_id"] = str(ask_id)
        return body

    @property
    def host_text(self) -> str:
        """:attr:`host_payload` as JSON text."""
        return _json_text(self.host_payload)
