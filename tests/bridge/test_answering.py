"""The answering layer, platform-neutral: every click verdict over the memory store and real Redis.

Platforms only translate payloads; what a click does -- who may answer, the answers built from
indices, the store's verdict, what the person is told, when the message is re-rendered -- is
judged here once. Mentions are rendered as ``<m:ID>`` so the texts show where a platform's mention
lands.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from typing import Any

import pytest
from redis.asyncio import Redis

from bridge import replies, routing
from bridge.answering import (
    MAX_TYPED,
    Answering,
    Caller,
    Outcome,
    Picks,
    Problem,
    Verdict,
    check_picks,
    one_click,
)
from bridge.clicks import Clicks
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer, QuestionSet
from bridge.record import AskRecord, AskStatus, Responder, Submission
from bridge.replies import Replies
from bridge.store.base import Store
from bridge.store.redis import RedisStore
from tests.support.engine_fixtures import new_record
from tests.support.redis_server import RedisServer

REPLIES = Replies(mention=lambda who: f"<m:{who}>", text=lambda text: f"[{text}]")
ALICE = Caller("U0ALICE", "alice")
BOB = Caller("U0BOB", "bob")


@pytest.fixture(params=["memory", "redis"])
def store_kind(request: pytest.FixtureRequest) -> str:
    """This suite runs over the embedded store and a real Redis server."""
    return str(request.param)


class Groups:
    """A platform's group lookup: ``members`` by group id; ``down`` makes every lookup fail."""

    def __init__(self, members: dict[str, set[str]]) -> None:
        self.members = members
        self.down = False
        self.lookups = 0

    async def groups_of(
        self, user_id: str, candidates: Sequence[str], record: AskRecord | None = None
    ) -> tuple[str, ...]:
        self.lookups += 1
        if self.down:
            raise ConnectionError("group directory unreachable")
        return tuple(g for g in candidates if user_id in self.members.get(g, set()))


@pytest.fixture
def groups() -> Groups:
    return Groups({"S0REVIEW": {"U0GROUPIE"}})


@pytest.fixture
def poster() -> MemoryPoster:
    return MemoryPoster()


@pytest.fixture
def answering(store: Store, poster: MemoryPoster, groups: Groups) -> Answering:
    return Answering(store, poster, REPLIES, membership=groups, store_timeout=2.0)


@pytest.fixture
def clicks(answering: Answering) -> Clicks:
    return Clicks(answering)


async def posted(store: Store, poster: MemoryPoster, record: AskRecord) -> AskRecord:
    """Create and post ``record`` as the chat handler does."""
    await store.create(record)
    ref = await poster.post(record)
    shown = await store.set_message(record.id, ref)
    assert shown is not None
    return shown


def single(record: AskRecord) -> AskRecord:
    """``record`` with a one-click shape: one single-select question (Yes / No / Later)."""
    q = record.questions.questions[0]
    return record.model_copy(update={"questions": QuestionSet(questions=(q,))})


async def pending(store: Store, ask_id: str) -> AskRecord:
    record = await store.get(ask_id)
    assert record is not None and record.status is AskStatus.PENDING and record.answers is None
    return record


# -- one click ---------------------------------------------------------------------------------


async def test_pick_answers_with_the_full_label(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record()))
    verdict = await answering.pick(record.id, 0, 1, ALICE)
    assert verdict.outcome is Outcome.ACCEPTED and verdict.stands
    assert verdict.explain is None and verdict.show_final
    assert verdict.record is not None and verdict.record.status is AskStatus.ANSWERED
    (answer,) = verdict.record.answers or ()
    assert answer.selected == ("No",) and answer.other_text is None
    assert verdict.record.answered_by is not None
    assert verdict.record.answered_by.user_id == "U0ALICE"
    assert verdict.record.answered_by.name == "alice"


@pytest.mark.parametrize(("question", "option"), [(0, 3), (0, 9), (1, 0), (5, 5)])
async def test_pick_out_of_range_is_refused_and_changes_nothing(
    answering: Answering, store: Store, poster: MemoryPoster, question: int, option: int
) -> None:
    record = await posted(store, poster, single(new_record()))
    verdict = await answering.pick(record.id, question, option, ALICE)
    assert verdict.outcome is Outcome.INVALID and verdict.explain == replies.BAD_CONTROL
    assert not verdict.show_final
    await pending(store, record.id)


async def test_pick_on_a_form_shaped_ask_is_refused(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, new_record(n=2))
    verdict = await answering.pick(record.id, 0, 0, ALICE)
    assert verdict.outcome is Outcome.INVALID
    await pending(store, record.id)


async def test_unknown_ask_is_gone(answering: Answering) -> None:
    for verdict in (
        await answering.pick("nosuchask", 0, 0, ALICE),
        await answering.open_form("nosuchask", ALICE),
        await answering.submit_form("nosuchask", ALICE, {0: Picks((0,))}),
    ):
        assert verdict.outcome is Outcome.NOT_FOUND and verdict.explain == replies.GONE
        assert verdict.record is None and not verdict.show_final


# -- forms -------------------------------------------------------------------------------------


async def test_form_with_choices_and_typed_text(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    # questions alternate single-select (even) and multiSelect (odd)
    record = await posted(store, poster, new_record(n=4))
    picks = {
        0: Picks((2,)),
        1: Picks((0, 2), "  and on Fridays  "),
        2: Picks((), "my own answer"),  # typed text alone answers a question
        3: Picks((), "only typed"),
    }
    verdict = await answering.submit_form(record.id, BOB, picks)
    assert verdict.outcome is Outcome.ACCEPTED and verdict.explain is None and verdict.show_final
    assert verdict.record is not None
    got = [(a.selected, a.other_text) for a in verdict.record.answers or ()]
    assert got == [
        (("Later",), None),
        (("Yes", "Later"), "and on Fridays"),
        ((), "my own answer"),
        ((), "only typed"),
    ]


async def test_other_alone_on_the_one_click_shape(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record()))
    verdict = await answering.submit_form(record.id, ALICE, {0: Picks(text="Next week")})
    assert verdict.outcome is Outcome.ACCEPTED
    assert verdict.record is not None and verdict.record.answers is not None
    assert verdict.record.answers[0].other_text == "Next week"


@pytest.mark.parametrize(
    ("picks", "problems"),
    [
        ({}, {0: replies.NEED_ANSWER, 1: replies.NEED_ANSWER}),
        ({7: Picks((0,))}, {0: replies.NEED_ANSWER, 1: replies.NEED_ANSWER, 7: "no-such-q"}),
        ({0: Picks((9,)), 1: Picks((0,))}, {0: replies.NO_SUCH_OPTION}),
        ({0: Picks((-1,)), 1: Picks((0,))}, {0: replies.NO_SUCH_OPTION}),
        ({0: Picks((0, 1)), 1: Picks((0,))}, {0: replies.ONE_ONLY}),
        ({0: Picks((0,), "also this"), 1: Picks((0,))}, {0: replies.NOT_BOTH}),
        ({0: Picks((), "   "), 1: Picks((1,))}, {0: replies.NEED_ANSWER}),
        ({0: Picks((), "\u200b\u2060\u2800"), 1: Picks((1,))}, {0: replies.NEED_ANSWER}),
        ({0: Picks((0,)), 1: Picks((), "x" * (MAX_TYPED + 1))}, {1: "too-long"}),
    ],
    ids=[
        "empty",
        "no-such-question",
        "option-out-of-range",
        "negative-option",
        "two-on-single",
        "choice-and-text-on-single",
        "blank-text",
        "invisible-text",
        "text-too-long",
    ],
)
async def test_malformed_forms_are_refused_and_change_nothing(
    answering: Answering,
    store: Store,
    poster: MemoryPoster,
    picks: dict[int, Picks],
    problems: dict[int, str],
) -> None:
    record = await posted(store, poster, new_record(n=2))
    verdict = await answering.submit_form(record.id, ALICE, picks)
    assert verdict.outcome is Outcome.INVALID and not verdict.show_final
    named = {
        replies.NO_SUCH_QUESTION: "no-such-q",
        replies.TOO_LONG.format(limit=MAX_TYPED): "too-long",
    }
    assert {i: named.get(p.text, p.text) for i, p in verdict.problems.items()} == problems
    assert verdict.explain == verdict.problems[min(verdict.problems)].text
    await pending(store, record.id)
    assert [e.kind for e in await store.history(record.id)] == ["created", "posted"]


def test_problems_with_typed_text_are_marked_for_the_text_field() -> None:
    qs = new_record(n=2).questions
    found = check_picks(qs, {0: Picks((0,), "both"), 1: Picks((), "y" * (MAX_TYPED + 1))})
    assert found == {
        0: Problem(replies.NOT_BOTH, typed=True),
        1: Problem(replies.TOO_LONG.format(limit=MAX_TYPED), typed=True),
    }
    assert check_picks(qs, {0: Picks((1,)), 1: Picks((0, 1, 2), "more")}) == {}


def test_one_click_is_a_single_single_select_question() -> None:
    assert one_click(single(new_record()).questions)
    assert not one_click(new_record(n=2).questions)
    multi = new_record(n=2).questions.questions[1]  # odd questions are multiSelect
    assert not one_click(QuestionSet(questions=(multi,)))


# -- who may answer ----------------------------------------------------------------------------


async def test_unauthorised_user_is_told_who_may_answer(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record(answerers=("U0BOB", "S0REVIEW"))))
    for verdict in (
        await answering.pick(record.id, 0, 0, ALICE),
        await answering.open_form(record.id, ALICE),
        await answering.submit_form(record.id, ALICE, {0: Picks((0,))}),
    ):
        assert verdict.outcome is Outcome.NOT_ALLOWED and not verdict.show_final
        assert (
            verdict.explain
            == "Sorry, you can't answer this one: it is for <m:U0BOB>, <m:S0REVIEW>."
        )
    await pending(store, record.id)


async def test_answerer_named_directly_needs_no_group_lookup(
    answering: Answering, store: Store, poster: MemoryPoster, groups: Groups
) -> None:
    record = await posted(store, poster, single(new_record(answerers=("U0BOB", "S0REVIEW"))))
    verdict = await answering.pick(record.id, 0, 0, BOB)
    assert verdict.outcome is Outcome.ACCEPTED and groups.lookups == 0


async def test_member_of_an_answerer_group_may_answer(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record(answerers=("S0REVIEW",))))
    verdict = await answering.pick(record.id, 0, 0, Caller("U0GROUPIE"))
    assert verdict.outcome is Outcome.ACCEPTED
    assert verdict.record is not None and verdict.record.answered_by is not None
    assert verdict.record.answered_by.groups == ("S0REVIEW",)


async def test_groups_known_from_the_interaction_are_used_as_given(
    answering: Answering, store: Store, poster: MemoryPoster, groups: Groups
) -> None:
    """Discord reads roles from the interaction's member: no lookup, and only those count."""
    record = await posted(store, poster, single(new_record(answerers=("R0MODS",))))
    outsider = await answering.pick(record.id, 0, 0, Caller("U0GROUPIE", groups=("R0OTHER",)))
    assert outsider.outcome is Outcome.NOT_ALLOWED
    member = await answering.pick(record.id, 0, 0, Caller("U0CARA", groups=("R0OTHER", "R0MODS")))
    assert member.outcome is Outcome.ACCEPTED and groups.lookups == 0


async def test_failed_group_lookup_is_unavailable_and_changes_nothing(
    answering: Answering, store: Store, poster: MemoryPoster, groups: Groups
) -> None:
    record = await posted(store, poster, single(new_record(answerers=("S0REVIEW",))))
    groups.down = True
    verdict = await answering.pick(record.id, 0, 0, Caller("U0GROUPIE"))
    assert verdict.outcome is Outcome.UNAVAILABLE and verdict.explain == replies.TRY_AGAIN
    await pending(store, record.id)


# -- after the ask ended -----------------------------------------------------------------------


async def test_late_click_is_told_who_answered_and_shows_the_final_state(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record()))
    await answering.pick(record.id, 0, 0, ALICE)
    for verdict in (
        await answering.pick(record.id, 0, 1, BOB),
        await answering.open_form(record.id, BOB, 0),
        await answering.submit_form(record.id, BOB, {0: Picks(text="mine")}),
    ):
        assert verdict.outcome is Outcome.ALREADY_ANSWERED and verdict.show_final
        assert verdict.explain == "This was already answered by <m:U0ALICE>."
    done = await store.get(record.id)
    assert done is not None and done.answers is not None and done.answers[0].selected == ("Yes",)


async def test_repeated_submit_stands_and_shows_the_final_state(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, new_record(n=2))
    picks = {0: Picks((1,)), 1: Picks((0,))}
    first = await answering.submit_form(record.id, ALICE, picks)
    again = await answering.submit_form(record.id, ALICE, picks)
    assert first.outcome is Outcome.ACCEPTED
    assert again.outcome is Outcome.REPEATED and again.stands and again.show_final
    assert again.explain == replies.RECORDED
    changed = await answering.submit_form(record.id, ALICE, {0: Picks((0,)), 1: Picks((0,))})
    assert changed.outcome is Outcome.ALREADY_ANSWERED and not changed.stands


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (AskStatus.EXPIRED, "This question expired before anyone answered it."),
        (AskStatus.CANCELLED, "This question was cancelled."),
    ],
)
async def test_click_on_a_closed_ask_is_explained(
    answering: Answering, store: Store, poster: MemoryPoster, status: AskStatus, text: str
) -> None:
    record = await posted(store, poster, single(new_record()))
    assert await store.close(record.id, status) is not None
    verdict = await answering.pick(record.id, 0, 0, ALICE)
    assert verdict.outcome is Outcome.CLOSED and verdict.explain == text and verdict.show_final
    opened = await answering.open_form(record.id, ALICE)
    assert opened.outcome is Outcome.CLOSED and opened.explain == text


async def test_click_after_expiry_before_any_sweep_is_refused_as_expired(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record(expires_in=-1.0)))
    # past expires_at, and no sweeper runs in this test
    verdict = await answering.pick(record.id, 0, 0, ALICE)
    assert verdict.outcome is Outcome.CLOSED and verdict.show_final
    assert verdict.explain == "This question expired before anyone answered it."
    done = await store.get(record.id)
    assert done is not None and done.status is AskStatus.EXPIRED and done.answers is None


async def test_open_form_records_who_opened_it(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, new_record(n=2))
    verdict = await answering.open_form(record.id, ALICE)
    assert verdict.outcome is Outcome.OPEN and verdict.explain is None
    assert verdict.record is not None and verdict.record.id == record.id
    events = await store.history(record.id)
    assert (events[-1].kind, events[-1].user_id) == ("opened", "U0ALICE")
    assert (await answering.open_form(record.id, ALICE, 9)).outcome is Outcome.INVALID


async def test_show_shows_the_final_state_of_ended_asks_only(
    answering: Answering, clicks: Clicks, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record()))
    refused = await answering.submit_form(record.id, ALICE, {})
    clicks.show(refused)
    accepted = await answering.pick(record.id, 0, 2, ALICE)
    clicks.show(accepted)
    await clicks.drain()
    (shown,) = poster.updated(record.id)
    assert shown.status is AskStatus.ANSWERED and shown.answers is not None
    assert shown.answers[0].selected == ("Later",)


# -- asks that need several people -------------------------------------------------------------

CAROL = Caller("U0CAROL", "carol")


async def test_two_approvers_recorded_then_accepted(
    answering: Answering, clicks: Clicks, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record(required=2)))
    first = await answering.pick(record.id, 0, 0, ALICE)
    assert first.outcome is Outcome.RECORDED and not first.stands
    assert not first.show_final and first.show_progress
    assert (
        first.explain == "Your answer is recorded: [Yes]. So far 1 of 2 agree on it: 1 more needed."
    )
    clicks.show(first)
    await clicks.drain()
    (shown,) = poster.updated(record.id)  # the pending message now lists Alice's submission
    assert shown.status is AskStatus.PENDING
    assert [s.user_id for s in shown.submissions] == ["U0ALICE"]
    assert REPLIES.approvals(shown) == [
        "Needs 2 approvals: the same choice from 2 people (typed answers are shown but never "
        "count toward agreement).",
        "1 of 2: <m:U0ALICE> chose [Yes]",
    ]
    # the same person again: nothing changes, nothing to re-render, told it stands
    again = await answering.pick(record.id, 0, 0, ALICE)
    assert again.outcome is Outcome.REPEATED and not again.show_progress and not again.show_final
    assert again.explain is not None and again.explain.startswith(
        "Your answer is already recorded: [Yes]. So far 1 of 2"
    )
    second = await answering.pick(record.id, 0, 0, BOB)
    assert second.outcome is Outcome.ACCEPTED and second.stands and second.explain is None
    assert second.show_final and not second.show_progress
    clicks.show(second)
    await clicks.drain()
    final = poster.updated(record.id)[-1]
    assert final.status is AskStatus.ANSWERED
    assert REPLIES.outcome(final) == "Answered by <m:U0ALICE> and <m:U0BOB>"


async def test_disagreement_shown_then_resolved(
    answering: Answering, clicks: Clicks, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record(required=2)))
    for who, option in ((ALICE, 0), (BOB, 1)):
        verdict = await answering.pick(record.id, 0, option, who)
        assert verdict.outcome is Outcome.RECORDED
        clicks.show(verdict)
    await clicks.drain()
    current = await pending(store, record.id)
    assert REPLIES.approvals(current)[1:] == [
        "1 of 2: <m:U0ALICE> chose [Yes]",
        "1 of 2: <m:U0BOB> chose [No]",
    ]
    assert poster.updated(record.id)[-1] == current
    # Alice changes her mind to Bob's answer: that makes two
    changed = await answering.pick(record.id, 0, 1, ALICE)
    assert changed.outcome is Outcome.ACCEPTED
    assert changed.record is not None and changed.record.answers is not None
    assert changed.record.answers[0].selected == ("No",)
    late = await answering.pick(record.id, 0, 0, CAROL)
    assert late.outcome is Outcome.ALREADY_ANSWERED
    assert late.explain == "This was already answered by <m:U0BOB> and <m:U0ALICE>."


class SlowPoster(MemoryPoster):
    """A platform whose message updates wait until ``go`` is set (a rate-limited API)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()

    async def update(self, record: AskRecord) -> None:
        await self.go.wait()
        await super().update(record)


async def test_a_flood_of_changed_submissions_costs_two_updates_not_one_each(
    store: Store, groups: Groups
) -> None:
    """One person flipping their answer as fast as they can: every submission is recorded and
    told, but the message is updated by at most one round in flight and one after it, which
    shows the latest state -- the bot's rate limit stays for every other ask."""
    poster = SlowPoster()
    answering = Answering(store, poster, REPLIES, membership=groups, store_timeout=2.0)
    clicks = Clicks(answering)
    record = await posted(store, poster, single(new_record(required=2)))
    for i in range(40):
        verdict = await answering.pick(record.id, 0, i % 2, ALICE)
        assert verdict.outcome is Outcome.RECORDED and verdict.show_progress
        clicks.show(verdict)
    await asyncio.sleep(0.05)
    assert poster.updated(record.id) == []  # the first update waits on the platform
    poster.go.set()
    await clicks.drain()
    shown = poster.updated(record.id)
    assert len(shown) == 2  # the one in flight, then one round showing the latest
    assert shown[-1] == await pending(store, record.id)  # the latest: Alice's "No"
    assert [a.selected for a in shown[-1].submissions[0].answers] == [("No",)]
    # once the flood is over, the next change is shown again
    verdict = await answering.pick(record.id, 0, 2, ALICE)
    clicks.show(verdict)
    await clicks.drain()
    assert poster.updated(record.id)[-1].submissions[0].answers[0].selected == ("Later",)


async def test_typed_answer_is_recorded_but_never_counts(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record(required=2)))
    for who in (ALICE, BOB):
        verdict = await answering.submit_form(record.id, who, {0: Picks(text="After <!channel>")})
        assert verdict.outcome is Outcome.RECORDED and verdict.show_progress
        assert verdict.explain is not None and "never count toward agreement" in verdict.explain
    current = await pending(store, record.id)
    assert REPLIES.approvals(current)[1:] == [
        "<m:U0ALICE> answered [“After <!channel>”] (typed: doesn't count)",
        "<m:U0BOB> answered [“After <!channel>”] (typed: doesn't count)",
    ]


def test_a_pending_message_lists_the_latest_submissions_only() -> None:
    record = single(new_record(required=50))
    subs = tuple(
        Submission(
            user_id=f"U{i:02}",
            name=None,
            at=float(i),
            answers=(
                Answer(
                    question=record.questions.questions[0].question,
                    selected=("Yes" if i % 2 else "No",),
                ),
            ),
        )
        for i in range(25)
    )
    lines = REPLIES.approvals(record.model_copy(update={"submissions": subs}))
    assert len(lines) == 2 + replies.MAX_SUBMISSIONS_SHOWN
    assert lines[1] == "… and 15 earlier submissions"
    assert lines[2] == "12 of 50: <m:U15> chose [Yes]"
    assert lines[-1] == "13 of 50: <m:U24> chose [No]"
    assert REPLIES.approvals(single(new_record())) == []


class Gated(MemoryPoster):
    """Holds the first update until ``release`` is set: a slow platform call."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.waiting = asyncio.Event()
        self.held = False

    async def update(self, record: AskRecord) -> None:
        if not self.held:
            self.held = True
            self.waiting.set()
            await self.release.wait()
        await super().update(record)


async def test_a_late_progress_update_never_hides_the_final_state(
    store: Store, groups: Groups
) -> None:
    """Alice's submission is shown slowly; Bob's agreement ends the ask and its final state is
    shown first; Alice's pending rendering then lands on top of it -- and is put right."""
    poster = Gated()
    answering = Answering(store, poster, REPLIES, membership=groups, store_timeout=2.0)
    clicks = Clicks(answering)
    record = await posted(store, poster, single(new_record(required=2)))
    first = await answering.pick(record.id, 0, 0, ALICE)
    clicks.show(first)
    await poster.waiting.wait()  # Alice's pending rendering is on its way
    second = await answering.pick(record.id, 0, 0, BOB)
    await clicks.showing.show(second.record, claimed=second.claimed)  # type: ignore[arg-type]
    assert poster.updated(record.id)[-1].status is AskStatus.ANSWERED
    poster.release.set()
    await clicks.drain()
    shown = poster.updated(record.id)
    assert [r.status for r in shown] == [AskStatus.ANSWERED, AskStatus.PENDING, AskStatus.ANSWERED]


async def test_one_person_asks_are_never_shown_in_progress(
    answering: Answering, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record()))
    verdict = await answering.submit_form(record.id, ALICE, {0: Picks(text="my own words")})
    assert verdict.outcome is Outcome.ACCEPTED and not verdict.show_progress  # typed answers count


# -- the store unavailable ---------------------------------------------------------------------


async def test_store_down_is_unavailable_and_nothing_changes(
    store_kind: str, store: Store, poster: MemoryPoster
) -> None:
    """A store that cannot answer within the timeout: every kind of click is told to try again.
    "Nothing was saved" only where that is certain: a Redis that refused the connection was
    never sent the click (and never will be: it was withdrawn); a store that hangs on it may
    have saved the answer, so the person is told to look at the message (opening a form saves
    no answer either way)."""
    record = await posted(store, poster, single(new_record()))
    hangs = store_kind == "memory"
    down: Any = Hanging() if hangs else unreachable()
    answering = Answering(down, poster, REPLIES, store_timeout=0.3)
    saving = replies.MAYBE_SAVED if hangs else replies.TRY_AGAIN
    try:
        for verdict, told in (
            (await answering.pick(record.id, 0, 0, ALICE), saving),
            (await answering.open_form(record.id, ALICE), replies.TRY_AGAIN),
            (await answering.submit_form(record.id, ALICE, {0: Picks((0,))}), saving),
        ):
            assert verdict.outcome is Outcome.UNAVAILABLE and verdict.explain == told
            assert not verdict.show_final and not verdict.stands
    finally:
        await down.aclose()
    await pending(store, record.id)


class Hanging:
    """A store whose every operation hangs, like a Redis that stopped answering."""

    def __getattr__(self, name: str) -> Any:
        async def hang(*_: Any, **__: Any) -> Any:
            await asyncio.Event().wait()

        return hang

    async def aclose(self) -> None:
        return None


def unreachable() -> RedisStore:
    """A Redis store whose server is gone (nothing listens on port 1)."""
    return RedisStore.from_url("redis://127.0.0.1:1/0")


# -- timing: the verdict before the ack --------------------------------------------------------


class Gate:
    """Wraps a store so its answering steps (``submit``, ``pick``) wait until the test opens
    the gate."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.open = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def submit(self, *args: Any, **kwargs: Any) -> Any:
        await self.open.wait()
        return await self.inner.submit(*args, **kwargs)

    async def pick(self, *args: Any, **kwargs: Any) -> Any:
        await self.open.wait()
        return await self.inner.pick(*args, **kwargs)


async def test_fast_verdict_comes_before_the_ack(
    answering: Answering, clicks: Clicks, store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record()))
    acks: list[float] = []

    async def ack() -> None:
        acks.append(time.monotonic())

    async def late(_: Verdict) -> None:
        raise AssertionError("a fast verdict is never late")

    verdict = await clicks.in_time(answering.pick(record.id, 0, 0, ALICE), ack=ack, late=late)
    assert verdict is not None and verdict.outcome is Outcome.ACCEPTED and acks == []
    # when the caller acks now, the answer is already in the store
    done = await store.get(record.id)
    assert done is not None and done.status is AskStatus.ANSWERED


async def test_slow_store_acks_first_and_tells_the_verdict_later(
    store: Store, poster: MemoryPoster
) -> None:
    record = await posted(store, poster, single(new_record()))
    gate = Gate(store)
    answering = Answering(gate, poster, REPLIES)  # type: ignore[arg-type]
    clicks = Clicks(answering, ack_budget=0.05)
    acked = asyncio.Event()
    told: list[Verdict] = []

    async def ack() -> None:
        acked.set()

    async def late(verdict: Verdict) -> None:
        told.append(verdict)

    verdict = await clicks.in_time(answering.pick(record.id, 0, 1, ALICE), ack=ack, late=late)
    assert verdict is None and acked.is_set() and told == []
    gate.open.set()
    await clicks.drain()
    (late_verdict,) = told
    assert late_verdict.outcome is Outcome.ACCEPTED
    (shown,) = poster.updated(record.id)  # the late verdict re-renders too
    assert shown.status is AskStatus.ANSWERED


# -- acks first: showing verdicts waits for the clicks being judged -----------------------------


async def _never_late(_: Verdict) -> None:
    raise AssertionError("judged within the budget")


async def _acked() -> None:
    return None


async def _a_verdict_while_a_click_is_judged(
    store: Store, poster: MemoryPoster, **options: Any
) -> tuple[AskRecord, Verdict, Gate, Clicks, asyncio.Task[Verdict | None]]:
    """An answered ask's verdict, still to be shown, and a click on another ask being judged
    (held at a closed gate) by the ``Clicks`` that is to show it."""
    shown_first = await posted(store, poster, single(new_record()))
    judged_now = await posted(store, poster, single(new_record()))
    verdict = await Answering(store, poster, REPLIES).pick(shown_first.id, 0, 0, ALICE)
    gate = Gate(store)
    answering = Answering(gate, poster, REPLIES)  # type: ignore[arg-type]
    clicks = Clicks(answering, ack_budget=30, **options)
    judging = asyncio.create_task(
        clicks.in_time(answering.pick(judged_now.id, 0, 1, BOB), ack=_acked, late=_never_late)
    )
    await asyncio.sleep(0.05)
    return shown_first, verdict, gate, clicks, judging


async def test_showing_a_verdict_waits_while_another_click_is_judged(
    store: Store, poster: MemoryPoster
) -> None:
    shown_first, verdict, gate, clicks, judging = await _a_verdict_while_a_click_is_judged(
        store, poster
    )
    clicks.show(verdict)
    await asyncio.sleep(0.3)
    assert poster.updated(shown_first.id) == []  # held back: a click is being judged
    gate.open.set()
    second = await judging
    assert second is not None and second.outcome is Outcome.ACCEPTED
    await clicks.drain()
    (shown,) = poster.updated(shown_first.id)
    assert shown.status is AskStatus.ANSWERED


async def test_a_verdict_is_shown_after_show_wait_however_busy(
    store: Store, poster: MemoryPoster
) -> None:
    shown_first, verdict, gate, clicks, judging = await _a_verdict_while_a_click_is_judged(
        store, poster, show_wait=0.2
    )
    clicks.show(verdict)
    await asyncio.sleep(0.8)
    assert len(poster.updated(shown_first.id)) == 1 and not judging.done()
    gate.open.set()
    await judging
    await clicks.drain()


class SlowUpdates(MemoryPoster):
    """Message updates that take until the test lets them finish; counts those in progress."""

    def __init__(self) -> None:
        super().__init__()
        self.finish = asyncio.Event()
        self.running = 0
        self.most = 0

    async def update(self, record: AskRecord) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.finish.wait()
            await super().update(record)
        finally:
            self.running -= 1


async def test_at_most_show_at_once_verdicts_are_shown_at_once(store: Store) -> None:
    poster = SlowUpdates()
    records = [await posted(store, poster, single(new_record())) for _ in range(6)]
    answering = Answering(store, poster, REPLIES)
    clicks = Clicks(answering, show_at_once=2)
    for record in records:
        clicks.show(await answering.pick(record.id, 0, 0, ALICE))
    await asyncio.sleep(0.3)
    assert poster.running == 2
    poster.finish.set()
    await clicks.drain()
    assert poster.most == 2
    assert all(len(poster.updated(r.id)) == 1 for r in records)


async def test_failing_background_work_is_logged(
    answering: Answering, clicks: Clicks, caplog: pytest.LogCaptureFixture
) -> None:
    async def fails() -> None:
        raise RuntimeError("unexpected")

    clicks.background.spawn(fails())
    await clicks.drain()
    (logged,) = [r for r in caplog.records if r.name == "bridge.clicks"]
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], RuntimeError)


# -- routing ids -------------------------------------------------------------------------------


def test_routing_ids_round_trip_within_discords_limit() -> None:
    longest = "a" * 64
    for made, route in (
        (routing.pick_id(longest, 3, 3), routing.Route("pick", longest, 3, 3)),
        (routing.other_id(longest, 2), routing.Route("other", longest, 2)),
        (routing.answer_id(longest), routing.Route("answer", longest)),
    ):
        assert len(made) <= routing.MAX_ID == 100
        assert routing.parse(made) == route


@pytest.mark.parametrize(
    "control",
    [
        "askb:pick:ID:0:-1",
        "askb:pick:ID:0",
        "askb:pick:ID:0:1:2",
        "askb:pick:bad id:0:1",
        "askb:pick:ID:0:\u00b2",
        "askb:pick:ID:0:123",
        "askb:answer:ID:0",
        "askb:nope:ID",
        "askb:",
        "askb:pick",
    ],
)
def test_malformed_ids_of_ours_are_reported(control: str) -> None:
    with pytest.raises(routing.BadRoute):
        routing.parse(control)


def test_foreign_ids_are_not_ours() -> None:
    assert routing.parse("other-app:pick:x:0:1") is None
    assert routing.parse("") is None


def test_step_ids_round_trip_and_fit() -> None:
    ask = "A" * 22
    choices = (
        routing.Choice(frozenset({0, 3})),
        routing.Choice(frozenset(), typed=True),
        routing.Choice(frozenset({1}), typed=True),
        routing.Choice(frozenset({0, 1, 2, 3})),
    )
    made = routing.next_id(ask, choices)
    assert routing.parse(made) == routing.Step(ask, choices)
    assert len(made) <= routing.MAX_ID and len(routing.next_id("B" * 64, choices)) <= routing.MAX_ID
    assert routing.parse(routing.pick_id(ask, 0, 1)) == routing.Route("pick", ask, 0, 1)
    assert routing.parse("other:thing") is None


async def test_a_click_that_ends_an_ask_claims_its_showing_in_its_own_script_on_redis(
    standalone: RedisServer,
) -> None:
    """The click that ends an ask, and the showing of its final state that follows: one script
    for the submission, which claims the showing too, and one marking it shown -- no claim
    script of its own between them (each script call a round trip, and a wake-up of ``serve``
    on top of its CPU: ``bench/slack_clicks.py``)."""
    store = RedisStore.from_url(standalone.url, prefix=f"shown{time.time_ns()}")
    raw = Redis.from_url(standalone.url, decode_responses=True)
    try:
        poster = MemoryPoster()
        clicks = Clicks(Answering(store, poster, REPLIES, store_timeout=2.0))
        record = await posted(store, poster, single(new_record()))
        before = await raw.info("commandstats")
        verdict = await clicks.answering.pick(record.id, 0, 0, ALICE)
        assert verdict.outcome is Outcome.ACCEPTED and verdict.claimed
        clicks.show(verdict)
        await clicks.drain()
        after = await raw.info("commandstats")
        assert int(after["cmdstat_evalsha"]["calls"]) - int(before["cmdstat_evalsha"]["calls"]) == 2
        assert [r.status for r in poster.updated(record.id)] == [AskStatus.ANSWERED]
        assert [e.kind for e in await store.history(record.id)][-1] == "rendered"
        late = await clicks.answering.pick(record.id, 0, 1, BOB)  # within the render interval
        assert late.outcome is Outcome.ALREADY_ANSWERED and late.show_final and not late.claimed
        clicks.show(late)
        await clicks.drain()
        assert len(poster.updated(record.id)) == 1  # shown once per interval
    finally:
        await store.aclose()
        await raw.aclose()


@pytest.mark.parametrize(
    "bad", ["askb:next:abc", "askb:next:abc:", "askb:next:abc:0000z", "askb:next:a b:0", "askb:x:y"]
)
def test_malformed_step_ids_are_bad_routes(bad: str) -> None:
    with pytest.raises(routing.BadRoute):
        routing.parse(bad)


async def test_a_form_costs_what_its_submission_alone_costs_on_redis(
    standalone: RedisServer,
) -> None:
    """A submitted form is judged and built in Python from the ask's terms, which a process reads
    once per ask and keeps, then submitted by one script: a form on an ask this process has seen
    (the refused form read its terms) runs exactly the commands a bare submission of its answers
    runs, less that submission's own first read of its ask's terms (one HGET)."""
    store = RedisStore.from_url(standalone.url, prefix=f"form{time.time_ns()}")
    raw = Redis.from_url(standalone.url, decode_responses=True)

    async def ran(work: Awaitable[object]) -> dict[str, int]:
        """The commands ``work`` ran (those its scripts ran included), by name."""
        before = await raw.info("commandstats")
        await work
        after = await raw.info("commandstats")
        return {
            k: int(v["calls"]) - int(before.get(k, {"calls": 0})["calls"])
            for k, v in after.items()
            if k != "cmdstat_info" and v != before.get(k)
        }

    try:
        answering = Answering(store, MemoryPoster(), REPLIES, store_timeout=2.0)
        form, bare = new_record(n=2), new_record(n=2)
        for record in (form, bare):
            await store.create(record)
        refused = await ran(answering.submit_form(form.id, ALICE, {0: Picks((0, 1))}))
        assert refused["cmdstat_evalsha"] == 1 and refused["cmdstat_hgetall"] == 1  # its own
        picks = {0: Picks((0,)), 1: Picks((1, 2), "and")}
        answers = [
            Answer(question="Question number 0?", selected=("Yes",)),
            Answer(question="Question number 1?", selected=("No", "Later"), other_text="and"),
        ]
        who = Responder(user_id=ALICE.user_id, name=ALICE.name)
        submitted = await ran(store.submit(bare.id, who, answers, claim=True))  # as a click
        terms_kept = submitted["cmdstat_hget"] - 1
        assert await ran(answering.submit_form(form.id, ALICE, picks)) == {
            **submitted,
            "cmdstat_hget": terms_kept,
        }
        assert (await store.get(form.id)).answers == tuple(answers)  # type: ignore[union-attr]
    finally:
        await store.aclose()
        await raw.aclose()


@pytest.mark.parametrize(
    "control_id",
    [
        routing.pick_id("a" * 64, 3, 4),
        routing.other_id("ask_1-x", 12),
        routing.answer_id("A"),
        routing.web_id("ask_1-x"),
        routing.next_id("abc", (routing.Choice(frozenset({0, 3}), typed=True),) * 4),
        "askb:pick:abc:0",
        "askb:pick:abc:0:1:2",
        "askb:pick:abc:-1:0",
        "askb:other:" + "a" * 65 + ":0",
        "askb:answer:",
        "askb:next:abc:",
        "askb:next:abc:w",
        "askb:next:abc:00000",
        "askb:frobnicate:abc",
        "askb:",
        "askb:answer:abc\nx",
        "askb:web:abc:0",
        "askb:web:",
    ],
)
def test_every_id_of_ours_matches_one_template_as_parse_reads_it(control_id: str) -> None:
    """A platform dispatching by pattern (Bolt's matchers, discord.py's dynamic items) sends
    each id to exactly one handler: the template of the kind that :func:`routing.parse` reads,
    or the malformed one for an id it refuses."""
    matched = [kind for kind, t in routing.TEMPLATES.items() if t.fullmatch(control_id)]
    malformed = routing.MALFORMED.fullmatch(control_id) is not None
    assert len(matched) + malformed == 1
    try:
        parsed = routing.parse(control_id)
    except routing.BadRoute:
        assert malformed
        return
    kind = "next" if isinstance(parsed, routing.Step) else parsed.kind if parsed else None
    assert matched == [kind]
    assert all(routing.whole(routing.TEMPLATES[k]).search(control_id) for k in matched)
