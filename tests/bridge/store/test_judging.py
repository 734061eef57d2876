"""The rules in :mod:`bridge.judging` and every backend agree: a form's problems and answers, a
one-click answer, and who may answer, over generated question sets, forms and people.

Every store judges forms, clicks and answerers by :mod:`bridge.judging` in its template methods,
from the ask's terms its backend stores, and its backend's atomic step applies the verdicts to
the ask as it stands (the Redis store's scripts, ``bridge/store/redis/lua/``, receive the answers
built and who may answer decided); this suite holds each backend's outcome, terms read back and
records written, to that one module, so terms stored or verdicts applied differently fail here
(the contract suite's examples are fixed cases; these are drawn).
"""

from __future__ import annotations

import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.judging import (
    MAX_TYPED,
    Picks,
    form_answers,
    form_problems,
    may_answer,
    picked_answer,
)
from bridge.models import MAX_OPTIONS, MIN_OPTIONS, Option, Question, QuestionSet
from bridge.record import AskRecord, Destination, Responder
from bridge.store.base import Store
from bridge.store.terms import SubmitOutcome
from tests.support.engine_fixtures import new_record

EXAMPLES = settings(
    max_examples=40,
    deadline=None,  # a networked backend on a loaded machine
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # one store, many asks
)

TEXTS = (
    st.none()
    | st.sampled_from(
        [
            "",
            " \n\t ",
            "\u200b\u2060\u2800",  # seen as nothing
            "yes",
            "  trimmed  ",
            "\u200bhidden\u200b",
            "fine\udc00 text",  # a lone surrogate from a payload's JSON escape
            "x" * MAX_TYPED,
            "x" * (MAX_TYPED + 1),
            "\u200b" * 10 + "y" * MAX_TYPED,  # bounded as it is seen
        ]
    )
    | st.text(max_size=12)
)


@st.composite
def question_sets(draw: st.DrawFn) -> QuestionSet:
    """One to three questions of two to four options, each single- or multi-select."""
    n = draw(st.integers(1, 3))
    return QuestionSet(
        questions=tuple(
            Question(
                question=f"Question {i}?",
                header=f"Q{i}",
                options=tuple(
                    Option(label=f"Option {i}.{o}", description=f"About {o}")
                    for o in range(draw(st.integers(MIN_OPTIONS, MAX_OPTIONS)))
                ),
                multiSelect=draw(st.booleans()),
            )
            for i in range(n)
        )
    )


def forms(questions: QuestionSet) -> st.SearchStrategy[dict[int, Picks]]:
    """Forms for ``questions``: answers to some of them, and to questions it does not have;
    options in and out of range, repeated; typed text blank, long, hidden or plain."""
    n = len(questions.questions)
    picks = st.builds(Picks, st.lists(st.integers(-1, 5), max_size=4).map(tuple), TEXTS)
    return st.dictionaries(st.integers(-1, n), picks, max_size=n + 1)


def ask(questions: QuestionSet, answerers: tuple[str, ...] = ()) -> AskRecord:
    now = time.time()
    return AskRecord(
        questions=questions,
        destination=Destination(platform="memory", channel="C1"),
        answerers=answerers,
        created_at=now,
        expires_at=now + 3600,
    )


IDS = ["U_A", "U_B", "P_A", "G_OPS", "G_DEV", "D_A"]
"""The ids people and answerer lists are drawn from: users, a linked person, groups, another
platform's id."""


@st.composite
def people(draw: st.DrawFn) -> Responder:
    """Someone clicking: a user, maybe linked to a person with ids elsewhere, in some groups."""
    linked = draw(st.booleans())
    return Responder(
        user_id=draw(st.sampled_from(["U_A", "U_B"])),
        groups=tuple(draw(st.lists(st.sampled_from(["G_OPS", "G_DEV"]), max_size=2))),
        person="P_A" if linked else None,
        aliases=("D_A",) if linked and draw(st.booleans()) else (),
    )


@EXAMPLES
@given(data=st.data())
async def test_a_form_is_judged_as_the_rules_say(store: Store, data: st.DataObject) -> None:
    """Problems exactly as :func:`form_problems` finds them (nothing recorded); a form without
    any is the ask's answer, built as :func:`form_answers` builds it."""
    questions = data.draw(question_sets())
    picks = data.draw(forms(questions))
    rec = ask(questions)
    await store.create(rec)
    result = await store.submit_form(rec.id, Responder(user_id="U_A"), picks)
    problems = form_problems(questions, picks)
    if problems:
        assert result.outcome is SubmitOutcome.INVALID
        assert dict(result.problems) == problems
        assert [e.kind for e in await store.history(rec.id)] == ["created"]
    else:
        assert result.outcome is SubmitOutcome.ACCEPTED
        assert result.record is not None
        assert list(result.record.answers or ()) == form_answers(questions, picks)


@EXAMPLES
@given(data=st.data())
async def test_a_click_is_judged_as_the_rules_say(store: Store, data: st.DataObject) -> None:
    """A one-click answer is taken exactly when :func:`picked_answer` names one (a single
    single-select question, an option it has), and it is that answer."""
    questions = data.draw(question_sets())
    question, option = data.draw(st.integers(-1, 3)), data.draw(st.integers(-1, 5))
    rec = ask(questions)
    await store.create(rec)
    result = await store.pick(rec.id, Responder(user_id="U_A"), question, option)
    expected = picked_answer(questions, question, option)
    if expected is None:
        assert result.outcome is SubmitOutcome.INVALID
    else:
        assert result.outcome is SubmitOutcome.ACCEPTED
        assert result.record is not None and result.record.answers == (expected,)


@EXAMPLES
@given(answerers=st.lists(st.sampled_from(IDS), max_size=3, unique=True), who=people())
async def test_who_may_answer_is_judged_as_the_rules_say(
    store: Store, answerers: list[str], who: Responder
) -> None:
    """Named by key or any authorising id (or nobody named): :func:`may_answer` decides a
    click whose caller looks up groups (``GROUPS``, nothing recorded) and a submission
    (``NOT_ALLOWED``, refused) alike."""
    allowed = may_answer(answerers, who.key, who.authorising)
    rec = new_record(answerers=tuple(answerers))
    await store.create(rec)
    looked_up = await store.pick(rec.id, who, 0, 0, groups_unknown=True)
    assert looked_up.outcome is (SubmitOutcome.ACCEPTED if allowed else SubmitOutcome.GROUPS)
    if not allowed:
        submitted = await store.pick(rec.id, who, 0, 1)
        assert submitted.outcome is SubmitOutcome.NOT_ALLOWED
        assert [e.kind for e in await store.history(rec.id)] == ["created", "refused"]
