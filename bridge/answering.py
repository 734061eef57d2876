"""Judging a click: who clicked, may they answer, what their answer is -- a verdict, the same
on every platform.

::

    ask -> post -> person clicks -> platform parses a Click -> bridge.clicks (timing, acks,
           showing) -> Answering (judging: this module) -> store (atomic) -> waiting call wakes

:class:`Answering` takes plain values -- an ask id and indices, the clicker as a
:class:`Caller`, a form's picks -- and answers :meth:`Answering.pick`,
:meth:`Answering.open_form` or :meth:`Answering.submit_form` with a :class:`Verdict`: the
record, what its message must show again, and what to tell the person privately
(``None`` when their answer was accepted). It knows nothing of time budgets, acks or platforms'
responses (:mod:`bridge.clicks` holds those): only the rules. Every failure to reach the store
becomes ``UNAVAILABLE``, never an exception; the person is told "nothing was saved" only when
that is certain (the store never sent the operation, and withdrew it), else that their answer
may have been saved.

Rules that live here so every platform follows them:

* **Who may answer**: :func:`bridge.judging.may_answer` (the store repeats the check atomically); a
  platform supplies group membership (Slack user groups via :class:`Membership`, Discord roles
  read from the interaction as :attr:`Caller.groups`).
* **Complete answers only**: a form is checked against the stored question set before anything is
  submitted -- every question answered (an option or typed text), option indices in range, at most
  one option (and not also typed text) for a single-select question, typed text bounded. The
  store judges it in the step that submits it (:meth:`Store.submit_form`, one round trip); this
  layer puts its problems into words.
* **Show rule**: every verdict that finds the ask ended says so (:attr:`Verdict.show_final`),
  not only the accepting click: an earlier attempt may have committed while its click timed out,
  so nobody showed its final state. :meth:`bridge.clicks.Clicks.show` shows it. As every
  verdict is shown by its caller, the store step that judges a click claims that showing too
  (once across replicas per render interval: :meth:`Store.pick`'s ``claim``), and the verdict
  says it holds the claim (:attr:`Verdict.claimed`): a click that ends an ask costs no round
  trip to claim its showing.
* **Several people** (``required`` K >= 2): a submission that is recorded but does not yet make
  K agree is ``RECORDED``; the person is told privately what was recorded and how many more
  agreeing people are needed, and the verdict asks for the pending message to list the
  submissions (:attr:`Verdict.show_progress`). A one-person ask never takes that path: no extra
  work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeVar

from bridge import metrics, replies
from bridge.identities import Identities
from bridge.judging import may_answer
from bridge.models import QuestionSet
from bridge.poster import Poster
from bridge.record import AskRecord, AskStatus, Responder
from bridge.replies import Replies
from bridge.store.base import MAX_TYPED as MAX_TYPED  # re-exported: the platforms bound fields
from bridge.store.base import (
    FormProblem,
    Store,
    StoreUnavailable,
    SubmitOutcome,
    SubmitResult,
    form_problems,
    giving_up_after,
)
from bridge.store.base import Picks as Picks  # re-exported: the platforms build them

log = logging.getLogger(__name__)
T = TypeVar("T")


def one_click(questions: QuestionSet) -> bool:
    """The simplest shape, answered by one button: a single single-select question. Every other
    shape is answered through a form."""
    qs = questions.questions
    return len(qs) == 1 and not qs[0].multiSelect


class Membership(Protocol):
    """A platform's lookup of group membership (Slack user groups, Discord roles), cached for at
    most a minute: it decides who may answer, and whose agreement still counts."""

    async def groups_of(
        self, user_id: str, candidates: Sequence[str], record: AskRecord | None = None
    ) -> tuple[str, ...]:
        """The ids among ``candidates`` that are groups ``user_id`` belongs to (in the place
        ``record`` was posted, where that matters: a Discord guild)."""
        ...


Verified = dict[str, tuple[str, ...]]
"""Submission key -> the authorising ids of its person as they are now (:meth:`Store.submit`)."""
VERIFY_ROUNDS = 3
"""Rounds of re-checking others' authority a judgement allows before it gives up (each finds
the people who agreed meanwhile)."""


@dataclass(frozen=True)
class Caller:
    """Who clicked. ``groups``: the memberships the platform already knows from the interaction
    (Discord roles); ``None`` means "look them up" through the :class:`Membership`."""

    user_id: str
    name: str | None = None
    groups: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Problem:
    """Why a form's answer to one question cannot be taken. ``typed``: the problem is with the
    typed text (a platform shows it on that field), else with the choice."""

    text: str
    typed: bool = False


class Outcome(StrEnum):
    """The store's verdicts (:class:`SubmitOutcome`) and the answering layer's own."""

    ACCEPTED = "accepted"
    REPEATED = "repeated"
    RECORDED = "recorded"
    ALREADY_ANSWERED = "already_answered"
    CLOSED = "closed"
    NOT_ALLOWED = "not_allowed"
    NOT_FOUND = "not_found"
    OPEN = "open"  # a form may be shown: render ``record``
    LINK = "link"  # the person's own link to answer in the browser, in ``explain``: told privately
    INVALID = "invalid"  # the click or form does not fit the question set; nothing changed
    UNAVAILABLE = "unavailable"  # the store (or a membership lookup) failed: see Unavailable


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    record: AskRecord | None
    explain: str | None
    """What to tell the person privately; ``None`` when their answer was accepted."""
    show_final: bool
    """The ask has ended: the message must show its final state (see
    :meth:`bridge.clicks.Clicks.show`)."""
    problems: Mapping[int, Problem] = field(default_factory=dict)
    """``INVALID`` forms: what is wrong with each question, by index."""
    show_progress: bool = False
    """A pending ask's submissions changed (``RECORDED``): the message must list them."""
    claimed: bool = False
    """``show_final``, and the store's step that judged the click claimed that showing
    (:attr:`SubmitResult.claimed`): ``record`` is shown as it is, not claimed again."""

    @property
    def stands(self) -> bool:
        """The person's answer is the ask's answer (accepted now, or earlier: repeated)."""
        return self.outcome in (Outcome.ACCEPTED, Outcome.REPEATED)


class Unavailable(Exception):
    """A store operation or lookup failed or timed out inside a judgement. ``maybe_saved``: a
    write may have reached the store (so the person must not be told nothing was saved)."""

    def __init__(self, reason: str, *, maybe_saved: bool) -> None:
        super().__init__(reason)
        self.maybe_saved = maybe_saved


BACKSTOP = 0.5
"""Seconds past a judgement's store deadline after which it is cut off even if an operation
does not honour the deadline (a group lookup, a read): then a write counts as maybe saved."""


class Answering:
    """Judges clicks on asks of one platform: ``store`` for state, ``poster`` for the platform
    (its name and answerer ids; :class:`bridge.clicks.Clicks` shows through it), ``replies`` for
    the words, ``membership`` for group lookups (``None``: only direct ids and
    :attr:`Caller.groups` count), ``identities`` for people linked across platforms."""

    def __init__(
        self,
        store: Store,
        poster: Poster,
        replies: Replies,
        *,
        membership: Membership | None = None,
        identities: Identities | None = None,
        store_timeout: float = 5.0,
    ) -> None:
        self.store = store
        self.poster = poster
        self.replies = replies
        self.membership = membership
        links = Identities.from_env() if identities is None else identities
        self.identities = links.normalised({poster.platform: poster.answerer})
        """Who is one person across platforms (default: ``ASK_BRIDGE_IDENTITIES``), this
        platform's ids in its own form (a malformed map or id is refused here, at start)."""
        self.store_timeout = store_timeout

    # -- judging ------------------------------------------------------------------------------

    @metrics.judged
    async def pick(self, ask_id: str, question: int, option: int, who: Caller) -> Verdict:
        """A one-click answer: option ``option`` of question ``question``, in one store step
        (:meth:`Store.pick`); more only as :meth:`_judged` says."""
        try:
            store = self.store

            def send(
                responder: Responder, unknown: bool, verified: Verified | None
            ) -> Awaitable[SubmitResult]:
                return store.pick(
                    ask_id,
                    responder,
                    question,
                    option,
                    groups_unknown=unknown,
                    verified=verified,
                    claim=True,
                )

            result = await self._judged(who, send)
            if result.outcome is SubmitOutcome.INVALID and result.record is not None:
                return self._invalid(result.record, replies.BAD_CONTROL)
            return self._submitted(result, who.user_id)
        except Unavailable as unavailable:
            return self._unavailable(unavailable)

    @metrics.judged_read
    async def open_form(self, ask_id: str, who: Caller, question: int | None = None) -> Verdict:
        """May ``who`` open the answer form (of one question, or of the whole set)? ``OPEN`` with
        the record to render, or the refusal."""
        try:
            record = await self._guard(self.store.get(ask_id), saves=False)
            if record is None:
                return self._verdict(Outcome.NOT_FOUND, None)
            if question is not None and question >= len(record.questions.questions):
                return self._invalid(record, replies.BAD_CONTROL)
            if record.status is not AskStatus.PENDING:
                ended = (
                    Outcome.ALREADY_ANSWERED
                    if record.status is AskStatus.ANSWERED
                    else Outcome.CLOSED
                )
                return self._verdict(ended, record)
            responder = await self._responder(record, who)
            if not may_answer(record.answerers, responder.key, responder.authorising):
                return self._verdict(Outcome.NOT_ALLOWED, record)
            opened = self.store.record_event(record.id, "opened", user_id=who.user_id)
            await self._guard(opened, saves=False)  # an audit line, not the person's answer
        except Unavailable as unavailable:
            return self._unavailable(unavailable)
        return Verdict(Outcome.OPEN, record, None, show_final=False)

    @metrics.judged
    async def submit_form(self, ask_id: str, who: Caller, picks: Mapping[int, Picks]) -> Verdict:
        """A submitted form: ``picks`` by question index, checked against the stored question set
        (see :func:`check_picks`) and submitted in one store step (:meth:`Store.submit_form`);
        more only as :meth:`_judged` says."""
        try:
            store = self.store

            def send(
                responder: Responder, unknown: bool, verified: Verified | None
            ) -> Awaitable[SubmitResult]:
                return store.submit_form(
                    ask_id, responder, picks, groups_unknown=unknown, verified=verified, claim=True
                )

            result = await self._judged(who, send)
            if result.outcome is SubmitOutcome.INVALID and result.record is not None:
                problems = {i: _problem(p) for i, p in result.problems.items()}
                first = problems[min(problems)].text
                return Verdict(Outcome.INVALID, result.record, first, False, problems)
            return self._submitted(result, who.user_id)
        except Unavailable as unavailable:
            return self._unavailable(unavailable)

    async def _judged(
        self,
        who: Caller,
        send: Callable[[Responder, bool, Verified | None], Awaitable[SubmitResult]],
    ) -> SubmitResult:
        """A click's or form's store step, one round trip as a rule, and the rounds it may ask
        for: the person's groups (``GROUPS``, when the platform did not give them), then --
        when it would make an ask's K people agree -- each other person it would count, their
        authority as it is now (``VERIFY``): someone removed from the answering group since
        they submitted no longer approves (:meth:`Store.submit`). Lookups are the platform's
        (cached a minute); without one, submissions count as they were made."""
        unknown = who.groups is None and self.membership is not None
        responder = self._as_responder(who, who.groups or ())
        verified: Verified | None = {} if self.membership is not None else None
        result = await self._guard(send(responder, unknown, verified), saves=True)
        if result.outcome is SubmitOutcome.GROUPS and result.record is not None:
            responder = await self._responder(result.record, who)
            result = await self._guard(send(responder, False, verified), saves=True)
        for _ in range(VERIFY_ROUNDS):
            if result.outcome is not SubmitOutcome.VERIFY or verified is None:
                return result
            assert result.record is not None  # a VERIFY carries the ask as it stands
            for key in result.verify:
                verified[key] = await self._authority(result.record, key)
            result = await self._guard(send(responder, False, verified), saves=True)
        if result.outcome is SubmitOutcome.VERIFY:  # others kept arriving: nothing was recorded
            raise Unavailable("agreement kept changing while it was checked", maybe_saved=False)
        return result

    async def _authority(self, record: AskRecord, key: str) -> tuple[str, ...]:
        """The ids that authorise the person behind submission ``key`` now: their own (and,
        linked across platforms, their others), which the ask names or not, and their groups
        among its answerers as the platform says today (:meth:`Store.submit`'s ``verified``)."""
        held = next((s for s in record.submissions if s.key == key), None)
        if held is None:
            return ()
        ids = self.identities.linked_ids(key) or (held.user_id,)
        if not record.answerers or set(ids) & set(record.answerers) or self.membership is None:
            return ids
        lookup = self.membership.groups_of(held.user_id, record.answerers, record)
        return (*ids, *await self._guard(lookup, saves=False))

    def _unavailable(self, failure: Unavailable) -> Verdict:
        """The store (or a lookup) failed: the person is told nothing was saved only when that
        is certain, else that their answer may have been saved."""
        words = replies.MAYBE_SAVED if failure.maybe_saved else replies.TRY_AGAIN
        return Verdict(Outcome.UNAVAILABLE, None, words, show_final=False)

    def _submitted(self, result: SubmitResult, user_id: str) -> Verdict:
        """A submission's verdict; an ended ask's showing claimed in its step is the verdict's
        (every click's verdict is shown by its caller, :meth:`bridge.clicks.Clicks.show`, so
        :meth:`pick` and :meth:`submit_form` ask the store to claim it)."""
        outcome = Outcome(result.outcome.value)
        return self._verdict(outcome, result.record, user_id, claimed=result.claimed)

    def _verdict(
        self,
        outcome: Outcome,
        record: AskRecord | None,
        user_id: str | None = None,
        *,
        claimed: bool = False,
    ) -> Verdict:
        final = record is not None and record.status is not AskStatus.PENDING
        progress = outcome is Outcome.RECORDED and not final
        explain = self._explain(outcome, record, user_id)
        return Verdict(
            outcome, record, explain, final, show_progress=progress, claimed=claimed and final
        )

    def _invalid(self, record: AskRecord, text: str) -> Verdict:
        ended = record.status is not AskStatus.PENDING
        return Verdict(Outcome.INVALID, record, self.replies.ended(record) or text, ended)

    def _explain(
        self, outcome: Outcome, record: AskRecord | None, user_id: str | None = None
    ) -> str | None:
        if outcome in (Outcome.ACCEPTED, Outcome.OPEN):
            return None
        waiting = (
            record is not None
            and user_id is not None
            and record.status is AskStatus.PENDING
            and outcome in (Outcome.RECORDED, Outcome.REPEATED)
        )
        if waiting:
            assert record is not None and user_id is not None
            return self.replies.recorded(record, user_id, again=outcome is Outcome.REPEATED)
        if outcome in (Outcome.REPEATED, Outcome.RECORDED):
            return replies.RECORDED
        if record is None or outcome is Outcome.NOT_FOUND:
            return replies.GONE
        if outcome is Outcome.NOT_ALLOWED:
            return self.replies.not_allowed(record)
        return self.replies.ended(record) or replies.GONE

    async def _responder(self, record: AskRecord, who: Caller) -> Responder:
        """``who`` as the store records them, with the answerer groups they belong to (looked up
        only when the ask is restricted and they are not named directly)."""
        groups = who.groups or ()
        lookup = self.membership
        if who.groups is None and lookup is not None and record.answerers:
            named = {who.user_id, *self.identities.aliases(self.poster.platform, who.user_id)}
            if not named & set(record.answerers):
                groups = await self._guard(
                    lookup.groups_of(who.user_id, record.answerers, record), saves=False
                )
        return self._as_responder(who, groups)

    def _as_responder(self, who: Caller, groups: Sequence[str]) -> Responder:
        """The person behind ``who``: linked across platforms by the identity map, their
        submission is kept as the person's, and their other ids authorise them too."""
        platform = self.poster.platform
        return Responder(
            user_id=who.user_id,
            name=who.name,
            groups=tuple(groups),
            person=self.identities.person(platform, who.user_id),
            aliases=self.identities.aliases(platform, who.user_id),
        )

    async def _guard(self, op: Awaitable[T], *, saves: bool) -> T:
        """Run a store operation or lookup within ``store_timeout``; any failure means
        "unavailable", never a half-done click. The store gives up by the deadline itself
        (:func:`~bridge.store.base.giving_up_after`): an operation it never sent is withdrawn,
        so it cannot take effect once the person was told it did not; one it sent may have run.
        ``saves``: the operation records the person's answer (else, failing, it saved none)."""
        try:
            # asyncio.timeout, not wait_for: the operation runs in this task rather than one
            # made for it (on 3.11), a task less per store step of every click
            with giving_up_after(self.store_timeout):
                async with asyncio.timeout(self.store_timeout + BACKSTOP):
                    return await op
        except StoreUnavailable as exc:
            metrics.store_error("judge")
            log.warning("store unavailable while judging a click: %s", exc)
            raise Unavailable(str(exc), maybe_saved=saves and exc.maybe_saved) from exc
        except TimeoutError as exc:
            metrics.store_error("judge")
            log.warning("store unavailable while judging a click: no answer in time")
            raise Unavailable("timed out", maybe_saved=saves) from exc
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a lookup's own failure (a platform API error), or a bug
            from bridge.redis_acl import refusal  # or Redis refusing its user: no bug, no outage

            if (refused := refusal(exc)) is not None:
                log.error("a click could not be judged: %s", refused)
            else:
                log.warning("a click could not be judged", exc_info=True)
            raise Unavailable(str(exc), maybe_saved=saves) from exc


_WORDS = {
    FormProblem.NO_SUCH_QUESTION: Problem(replies.NO_SUCH_QUESTION),
    FormProblem.NO_SUCH_OPTION: Problem(replies.NO_SUCH_OPTION),
    FormProblem.TOO_LONG: Problem(replies.TOO_LONG.format(limit=MAX_TYPED), typed=True),
    FormProblem.NEED_ANSWER: Problem(replies.NEED_ANSWER),
    FormProblem.ONE_ONLY: Problem(replies.ONE_ONLY),
    FormProblem.NOT_BOTH: Problem(replies.NOT_BOTH, typed=True),
}


def _problem(found: FormProblem) -> Problem:
    """A store's :class:`FormProblem` in the person's words."""
    return _WORDS[found]


def check_picks(questions: QuestionSet, picks: Mapping[int, Picks]) -> dict[int, Problem]:
    """What is wrong with a submitted form, by question index; empty when it answers every
    question completely and nothing else (the store judges the same, :func:`form_problems`)."""
    return {i: _problem(p) for i, p in form_problems(questions, picks).items()}
