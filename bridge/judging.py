"""The rules of answering an ask, written once: what a form must hold, who may answer, when
several people agree, and where an ask's outcome goes once it ends.

Every store and the answering layer judge by these functions, so a rule cannot drift between
them: the store's template methods (:class:`~bridge.store.base.Store`) judge a click, a form and
who may answer from the ask's terms before any backend's atomic step runs, and hand it the
verdicts (:mod:`bridge.store.ask_terms`); what depends on the ask's current state (agreement,
where an outcome goes) :class:`~bridge.store.memory.MemoryStore` applies inside its lock, and the
Redis store's scripts (``bridge/store/redis/lua/``) decide the same inside their step -- the
contract tests hold them to this module -- and :mod:`bridge.answering` words a form's problems
for the person.

Pure: no I/O, no store, no platform; it imports only the models and :mod:`bridge.text` (whose
:func:`~bridge.text.blank` is the one rule for "empty" typed text), so every layer can use it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from bridge.models import Answer, QuestionSet
from bridge.text import typed

MAX_TYPED = 2000
"""Longest typed answer accepted (Slack's text input allows 3000, Discord's 4000)."""


@dataclass(frozen=True)
class Picks:
    """One question's part of a submitted form: chosen option indices and typed text."""

    selected: tuple[int, ...] = ()
    text: str | None = None


class FormProblem(StrEnum):
    """Why a form's answer to one question cannot be taken
    (:meth:`~bridge.store.base.Store.submit_form`); the answering layer words it for the
    person."""

    NO_SUCH_QUESTION = "no_such_question"
    NO_SUCH_OPTION = "no_such_option"
    TOO_LONG = "too_long"  # the typed text is longer than MAX_TYPED
    NEED_ANSWER = "need_answer"
    ONE_ONLY = "one_only"  # several options of a single-select question
    NOT_BOTH = "not_both"  # an option and typed text for a single-select question


# -- forms --------------------------------------------------------------------------------------


def typed_text(picks: Picks) -> tuple[str | None, bool]:
    """A question's typed text as it is judged and kept: :func:`bridge.text.typed` (what the
    person sees of it, trimmed; ``None`` when they would see nothing, so a text of only spaces
    or only zero-width characters answers nothing), at most :data:`MAX_TYPED` characters, and
    whether it was longer than that. Lone surrogates (a JSON escape in a platform's payload)
    become U+FFFD, so the text can be stored.

    Every store judges a form by this one function (through :func:`form_problems` and
    :func:`form_answers`), so no second rule for "blank" lives anywhere."""
    text = typed(picks.text or "") or ""
    return text[:MAX_TYPED] or None, len(text) > MAX_TYPED


def form_problems(questions: QuestionSet, picks: Mapping[int, Picks]) -> dict[int, FormProblem]:
    """What is wrong with a submitted form, by question index; empty when it answers every
    question completely and nothing else."""
    qs = questions.questions
    problems: dict[int, FormProblem] = {}
    for i in picks:
        if not 0 <= i < len(qs):
            problems[i] = FormProblem.NO_SUCH_QUESTION
    for i, q in enumerate(qs):
        got = picks.get(i, Picks())
        text, too_long = typed_text(got)
        chosen = set(got.selected)
        if any(not 0 <= o < len(q.options) for o in chosen):
            problems[i] = FormProblem.NO_SUCH_OPTION
        elif too_long:
            problems[i] = FormProblem.TOO_LONG
        elif not chosen and not text:
            problems[i] = FormProblem.NEED_ANSWER
        elif not q.multiSelect and len(chosen) > 1:
            problems[i] = FormProblem.ONE_ONLY
        elif not q.multiSelect and chosen and text:
            problems[i] = FormProblem.NOT_BOTH
    return problems


def form_answers(questions: QuestionSet, picks: Mapping[int, Picks]) -> list[Answer]:
    """A form's answers, in question order, with full labels taken from the stored question
    set (options out of range left out: an ended ask judges the form whatever it holds)."""
    answers = []
    for i, q in enumerate(questions.questions):
        got = picks.get(i, Picks())
        chosen = sorted({o for o in got.selected if 0 <= o < len(q.options)})
        labels = tuple(q.options[o].label for o in chosen)
        answers.append(Answer(question=q.question, selected=labels, other_text=typed_text(got)[0]))
    return answers


def one_click(questions: QuestionSet) -> bool:
    """The simplest shape, answered by one button: a single single-select question. Every other
    shape is answered through a form."""
    qs = questions.questions
    return len(qs) == 1 and not qs[0].multiSelect


def picked_answer(questions: QuestionSet, question: int, option: int) -> Answer | None:
    """The answer a one-click ask's button stands for (option ``option`` of question
    ``question``, from 0), with its label from the stored question set; ``None`` when the ask is
    not a one-click ask or has no such question or option."""
    qs = questions.questions
    if not one_click(questions) or not 0 <= question < len(qs):
        return None
    q = qs[question]
    if not 0 <= option < len(q.options):
        return None
    return Answer(question=q.question, selected=(q.options[option].label,))


# -- who may answer -----------------------------------------------------------------------------


def may_answer(answerers: Collection[str], key: str, authorising: Iterable[str]) -> bool:
    """Whether a person may answer an ask naming ``answerers`` (none: anyone may): named by
    their key (:attr:`~bridge.record.Responder.key`) or by one of their authorising ids (their
    groups, their ids on other platforms: :attr:`~bridge.record.Responder.authorising`).
    The one place this is decided: every store's submission is judged by it before its atomic
    step (:func:`bridge.store.ask_terms.judge`)."""
    if not answerers:
        return True
    allowed = set(answerers)
    return key in allowed or any(i in allowed for i in authorising)


# -- agreement (an ask needing ``required`` K >= 2 people) --------------------------------------

TYPED_MARK = "T"
"""Put before a typed submission's canonical answers to make its agreement key: the canonical
text of answers starts with ``[``, so such a key never equals an answer's and never agrees."""
WITHDRAWN_MARK = "W"
"""Put before a withdrawn submission's agreement key: it never equals an answer's again."""


def agreement_key(chosen: str, typed: bool) -> str:
    """The key a submission of canonical answers ``chosen`` is counted under (see ``subk:`` in
    :mod:`bridge.store.keys`): the answers themselves, or, typed, a key that agrees with none."""
    return TYPED_MARK + chosen if typed else chosen


def withdrawn_key(key: str) -> str:
    """A submission's agreement key once its person lost their authority: counted never."""
    return WITHDRAWN_MARK + key


def agreeing(keys: Mapping[str, str], chosen: str) -> list[str]:
    """The people (by submission key) whose current agreement key, in ``keys``, is exactly the
    canonical answers ``chosen``, sorted: the ones who agree on them."""
    return sorted(person for person, key in keys.items() if key == chosen)


def agreed(agreeing_people: int, required: int, typed: bool) -> bool:
    """Whether a submission, with ``agreeing_people`` (itself included) submitting the same
    answers, makes ``required`` agree: never when it holds typed text."""
    return not typed and agreeing_people >= required


@dataclass(frozen=True)
class Recheck:
    """What must happen before a submission may make K agree (:func:`recheck`)."""

    unverified: tuple[str, ...] = ()
    """Submission keys whose people's authority the caller must re-check first (``VERIFY``)."""
    withdrawn: tuple[str, ...] = ()
    """Submission keys whose people no longer may answer: withdrawn, then the rest counted."""


def verdicts(
    answerers: Collection[str], verified: Mapping[str, Sequence[str]] | None
) -> dict[str, bool] | None:
    """Whether each re-checked person still may answer: ``verified`` maps submission keys to
    their people's authorising ids as they are now (:meth:`Store.submit
    <bridge.store.base.Store.submit>`); ``None`` when the caller cannot re-check."""
    if verified is None:
        return None
    return {key: may_answer(answerers, key, ids) for key, ids in verified.items()}


def recheck(others: Sequence[str], required: int, checked: Mapping[str, bool] | None) -> Recheck:
    """Authority at the moment it counts: a submission agreeing with ``others`` (the other
    people, by key, whose current submission is the same untyped answers) that would make
    ``required`` agree needs each of them re-checked in ``checked`` (:func:`verdicts`; ``None``:
    the caller cannot re-check, so submissions count as made). Names the ones still to
    re-check, else the ones to withdraw (see :meth:`Store.submit
    <bridge.store.base.Store.submit>`; ``record_submission`` in
    ``bridge/store/redis/lua/lib/submission.lua`` applies the same verdicts)."""
    if checked is None or len(others) + 1 < required:
        return Recheck()
    unverified = tuple(sorted(k for k in others if k not in checked))
    if unverified:
        return Recheck(unverified=unverified)
    return Recheck(withdrawn=tuple(k for k in others if not checked[k]))


def repeats_answer(accepted: str | None, chosen: str, by_me: bool, mine: str | None) -> bool:
    """Whether a submission of ``chosen`` to an answered ask (``accepted``: the canonical
    answers it took) repeats that answer: the same answers, sent by the person who answered it
    (``by_me``) or by one whose current submission (``mine``: its agreement key) is among the
    agreeing -- their submission stands (``REPEATED``); anything else came late."""
    return accepted == chosen and (by_me or mine == chosen)


# -- once an ask ends ---------------------------------------------------------------------------

Handoff = Literal["waiter", "feed", "none"]
"""Where an ended ask's outcome goes: to the waiting call (which takes it), to the answers feed,
or nowhere (an expiry or cancel nobody waits for an answer of)."""


def handoff(*, answered: bool, deferred: bool, waiter_live: bool) -> Handoff:
    """Where an ask's outcome goes as it ends: a deferred ask's to the feed, whatever it is; an
    answer to the waiting call while its lease lives, else to the feed (nobody would return
    it); an expiry or cancel of an ask nobody deferred, nowhere (the waiting call, if any, sees
    the status). (``finish`` in
    ``bridge/store/redis/lua/lib/core.lua`` decides the same.)"""
    if deferred:
        return "feed"
    if answered:
        return "waiter" if waiter_live else "feed"
    return "none"
