"""The store contract: what every pending-ask store guarantees, whichever backend holds the state.

Two implementations pass one contract test suite: ``MemoryStore`` (the embedded default, one
process) and ``RedisStore`` (any number of processes against one Redis, Sentinel or Cluster).
Every state change that must happen once -- the first complete answer, an expiry, a cancel -- is a
single atomic step in the backend, so replicas can race freely.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from bridge.models import Answer, QuestionSet
from bridge.record import AskRecord, AskStatus, MessageRef, Responder
from bridge.text import typed

DEFAULT_RETENTION = 30 * 86400.0
"""Seconds a finished ask (record, audit trail, feed entry) is kept."""
DEFAULT_LEASE_TTL = 30.0
"""Seconds a waiting call's lease outlives its last sign of life."""
DEFAULT_RENDER_INTERVAL = 10.0
"""Seconds between two claims to show an ended ask's final state (:meth:`Store.claim_render`):
late clicks on an answered ask cost at most one message update per interval across replicas, and
the sweeper re-renders a final state nobody showed no sooner than this after the ask ended."""
RENDER_TRIES = 5
"""Claims to show a final state after which the sweeper gives up on a message that cannot be
updated (deleted, channel archived): it would otherwise retry it every interval until retention."""
DEFAULT_TIMER_RETRY = 60.0
"""Seconds after which a reminder or escalation a sweeper claimed but never marked done (its
process died, or posting failed) may be claimed again (:meth:`Store.claim_timers`). Longer than
any post takes, so a slow post is not doubled by another replica."""
TIMER_TRIES = 5
"""Claims of one reminder or escalation after which it is given up (logged with ``gave_up``), so
a destination that refuses every post does not hold back the next step."""
SWEEP_BATCH = 500
"""Asks one step of a sweep expires (:meth:`Store.sweep_batches`): one round trip to a networked
store, and the records a sweeper holds at once."""
DEFAULT_ENDED_IDLE = 300.0
"""Seconds an ended-ask delivery may sit unacknowledged and unkept at one consumer before another
consumer takes it over (:meth:`Store.ended`): that consumer is taken to have died."""
DEFAULT_NOISE_CAP = 500
"""Noise events (:data:`NOISE_KINDS`) an ask's audit trail keeps; older ones are counted only."""
NOISE_KINDS = frozenset({"refused", "late", "opened", "resubmitted"})
"""Events anyone who sees the message can cause at will. They are kept apart from the lifecycle
events and capped, so a flood of clicks never pushes ``created`` or ``answered`` out of the trail.
``resubmitted`` is a person changing their submission to an ask needing several people: their
first one is logged ``submitted`` (lifecycle), each change after it is noise, so one person
flipping their answer thousands of times keeps the trail bounded (their current submission is
always on the record). (``ask.lua`` spells the same set.)"""
NO_LONGER_ALLOWED = "no longer allowed to answer"
"""The ``reason`` of a ``withdrawn`` event: the person lost the authority that admitted their
submission (removed from the answering group or role) before it would have counted."""
NOISE_DROPPED = "noise_dropped"
"""Kind of the one event :meth:`Store.history` adds where older noise events were dropped; its
``detail`` is ``{"dropped": <how many>}``."""
CREATION_FIELDS = frozenset(
    {
        *("id", "questions", "destination", "context", "answerers", "required"),
        *("follow_ups", "notify"),
        *("created_at", "expires_at", "deferred", "tell_model_who"),
    }
)
"""The fields of a record fixed by :meth:`Store.create` (``deferred`` as created): a repeated
create with equal values is the same ask, one with other values a :class:`DuplicateAsk`."""

FEED_OBSERVERS: list[Callable[[AskRecord | str], None]] = []
"""Called with every ask this process puts on the answers feed: its record, or only its id where
the backend holds no more (Redis hands an ask over by id). A hand-off is decided inside a backend
(the memory store's lock, ``ask.lua``), so the store tells it as it happens instead of returning
it through every operation that may cause it (submit, close, release, a sweep); and it tells it
here, importing nothing above it: :mod:`bridge.metrics` subscribes its ``handed_to_feed`` log
line when it is imported, as it is by every module that drives asks (asking, answering, sweeper,
runtime)."""

_KIND = re.compile(r"^[a-z][a-z_]{0,31}$")


def tell_handed_to_feed(ask: AskRecord | str) -> None:
    """Tell each of :data:`FEED_OBSERVERS` that ``ask`` was put on the answers feed: called by a
    backend right where it puts it there, so each hand-off is told once, by the process that made
    it."""
    for observe in FEED_OBSERVERS:
        observe(ask)


def check_event_kind(kind: str) -> None:
    """Refuse an audit-trail kind that is not lower_snake_case of at most 32 characters."""
    if not _KIND.match(kind):
        raise ValueError(f"event kind must be lower_snake_case, at most 32 chars: {kind!r}")


def check_close_status(status: AskStatus) -> None:
    """Refuse a :meth:`Store.close` to anything but expired or cancelled."""
    if status not in (AskStatus.EXPIRED, AskStatus.CANCELLED):
        raise ValueError(f"close() ends an ask as expired or cancelled, not {status}")


def creation_text(record: AskRecord) -> str:
    """Canonical JSON of the :data:`CREATION_FIELDS` of ``record``: equal records, equal text."""
    return record.model_dump_json(include=set(CREATION_FIELDS))


def merge_history(
    lifecycle: Sequence[tuple[int, HistoryEvent]],
    noise: Sequence[tuple[int, HistoryEvent]],
    dropped: int,
) -> list[HistoryEvent]:
    """The audit trail in the order things happened, from its two parts (events numbered in one
    sequence per ask), with one :data:`NOISE_DROPPED` event where dropped noise would have been."""
    if dropped and noise:
        first_seq, first = noise[0]
        summary = HistoryEvent(at=first.at, kind=NOISE_DROPPED, detail={"dropped": dropped})
        noise = [(first_seq, summary), *noise]
    elif dropped:
        summary = HistoryEvent(at=0.0, kind=NOISE_DROPPED, detail={"dropped": dropped})
        noise = [(0, summary)]
    merged = sorted(
        [(seq, 0, e) for seq, e in lifecycle] + [(seq, 1, e) for seq, e in noise],
        key=lambda item: (item[0], item[1]),
    )
    return [e for _, _, e in merged]


def dump_answers(answers: Sequence[Answer]) -> tuple[list[dict[str, Any]], str]:
    """The answers as JSON-ready dicts for the audit trail, and their canonical text: equal
    answers give equal text, which is how a repeated submission is recognised.

    The audit trail's answers leave out the question texts (answer ``i`` answers question ``i``
    of the record): each refused or late click would otherwise store every question again."""
    canonical = json.dumps(
        [a.model_dump(mode="json") for a in answers],
        separators=(",", ":"),
        sort_keys=True,
        ensure_ascii=False,  # UTF-8 as is (a 3-byte character would take 6), as ask.lua writes it
    )
    return [a.model_dump(mode="json", exclude={"question"}) for a in answers], canonical


class SubmitOutcome(StrEnum):
    """How a submission was judged. ``ACCEPTED``, ``REPEATED`` and ``RECORDED`` mean "your
    submission stands"; only ``ACCEPTED``, and ``REPEATED`` of an answered ask, mean it is the
    ask's answer."""

    ACCEPTED = "accepted"  # this submission answered the ask (with required K: it made K agree)
    REPEATED = "repeated"  # the same person sent the same answer again: idempotent success
    # (of an answered ask: their answer is among the accepted; pending: their submission stands)
    RECORDED = "recorded"  # required K >= 2: this submission is recorded (new, or replacing the
    # person's earlier one) but fewer than K agree yet; record.submissions holds it
    ALREADY_ANSWERED = "already_answered"  # someone answered first; see record.answered_by
    CLOSED = "closed"  # the ask expired or was cancelled -- perhaps by this very submission
    # (it was past expires_at): then nobody else re-renders it, the caller must (Store.submit)
    NOT_ALLOWED = "not_allowed"  # the person is not among the ask's answerers; nothing changed
    NOT_FOUND = "not_found"  # no such ask (never existed, or past its retention)
    # only from Store.pick and Store.submit_form, with nothing changed:
    INVALID = "invalid"  # not a one-click ask, or no such question or option; a form's problems
    GROUPS = "groups"  # look up the person's groups among record.answerers, then pick again
    # only with ``verified`` given (required K >= 2), with nothing changed:
    VERIFY = "verify"  # this would make K agree: re-check SubmitResult.verify's people, retry


MAX_TYPED = 2000
"""Longest typed answer accepted (Slack's text input allows 3000, Discord's 4000)."""


@dataclass(frozen=True)
class Picks:
    """One question's part of a submitted form: chosen option indices and typed text."""

    selected: tuple[int, ...] = ()
    text: str | None = None


class FormProblem(StrEnum):
    """Why a form's answer to one question cannot be taken (:meth:`Store.submit_form`); the
    answering layer words it for the person."""

    NO_SUCH_QUESTION = "no_such_question"
    NO_SUCH_OPTION = "no_such_option"
    TOO_LONG = "too_long"  # the typed text is longer than MAX_TYPED
    NEED_ANSWER = "need_answer"
    ONE_ONLY = "one_only"  # several options of a single-select question
    NOT_BOTH = "not_both"  # an option and typed text for a single-select question


def typed_text(picks: Picks) -> tuple[str | None, bool]:
    """A question's typed text as it is judged and kept: :func:`bridge.text.typed` (what the
    person sees of it, trimmed; ``None`` when they would see nothing, so a text of only spaces
    or only zero-width characters answers nothing), at most :data:`MAX_TYPED` characters, and
    whether it was longer than that. Lone surrogates (a JSON escape in a platform's payload)
    become U+FFFD, so the text can be stored.

    Both stores judge a form by this one function: :meth:`Store.submit_form` here, and the
    networked store before its script runs (``ask.lua`` takes the text as this gives it and
    only tells text from ``null``), so no second rule for "blank" lives in Lua."""
    text = typed(picks.text or "") or ""
    return text[:MAX_TYPED] or None, len(text) > MAX_TYPED


def form_problems(questions: QuestionSet, picks: Mapping[int, Picks]) -> dict[int, FormProblem]:
    """What is wrong with a submitted form, by question index; empty when it answers every
    question completely and nothing else. (``ask.lua``'s ``form`` op judges the same way.)"""
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


class SubmitResult:
    """How a submission was judged, and the ask as it stood after it.

    ``record`` is built when first read: a networked store keeps the stored fields until then,
    so a caller that needs only the outcome (an agent answering through the store, a bench)
    never builds a record, and one that reads it builds it once."""

    __slots__ = ("_build", "_record", "outcome", "problems", "verify")

    def __init__(
        self,
        outcome: SubmitOutcome,
        record: AskRecord | None,
        problems: Mapping[int, FormProblem] | None = None,
        *,
        build: Callable[[], AskRecord] | None = None,
        verify: tuple[str, ...] = (),
    ) -> None:
        self.outcome = outcome
        self.problems: Mapping[int, FormProblem] = problems or {}
        """``INVALID`` forms (:meth:`Store.submit_form`): what is wrong with each question."""
        self.verify = verify
        """``VERIFY``: the keys (:attr:`~bridge.record.Submission.key`) of the submissions whose
        people's authority the caller must re-check before this one may make K agree."""
        self._record = record
        self._build = build

    @property
    def record(self) -> AskRecord | None:
        """The ask after the submission (``None``: not found)."""
        if self._build is not None:
            self._record, self._build = self._build(), None
        return self._record

    @property
    def ok(self) -> bool:
        return self.outcome in (
            SubmitOutcome.ACCEPTED,
            SubmitOutcome.REPEATED,
            SubmitOutcome.RECORDED,
        )

    def __repr__(self) -> str:
        return f"SubmitResult({self.outcome!r}, {self.record!r}, {dict(self.problems)!r})"


class HistoryEvent(BaseModel):
    """One line of an ask's audit trail."""

    at: float
    kind: str
    """What happened. The stores record created, posted, deferred, refused, late, submitted
    (one of several people's submissions, recorded before they agree), answered,
    expired, cancelled, handed_to_feed, rendered, reminded (``{"n": ...}``) and escalated
    (``{"to": <destination>, "message": <message>}``; both with ``"gave_up": true`` instead when
    every try failed) (and :data:`NOISE_DROPPED` in
    :meth:`Store.history`); callers add their own through :meth:`Store.record_event` (the chat
    handler post_failed, the Slack app opened, the webhook worker webhook)."""
    user_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class TimerClaim:
    """A reminder or escalation claimed by :meth:`Store.claim_timers`: post it, then
    :meth:`Store.timer_done`. Nobody else posts it unless this claim is not marked done within
    the store's timer-retry interval."""

    ask_id: str
    kind: Literal["remind", "escalate"]
    n: int
    """Which reminder, from 1 (1 for the escalation)."""
    record: AskRecord
    """The ask as it stood when claimed (pending)."""

    @property
    def step(self) -> str:
        """The step's name in the store: ``escalate`` or ``remind:<n>``."""
        return "escalate" if self.kind == "escalate" else f"remind:{self.n}"


def parse_step(ask_id: str, step: str, record: AskRecord) -> TimerClaim:
    """The :class:`TimerClaim` for a store's step name (see :attr:`TimerClaim.step`)."""
    if step == "escalate":
        return TimerClaim(ask_id, "escalate", 1, record)
    return TimerClaim(ask_id, "remind", int(step.removeprefix("remind:")), record)


def timer_detail(claim: TimerClaim, message: MessageRef | None) -> dict[str, Any]:
    """The audit-trail detail of a step done: ``reminded`` names its number, ``escalated``
    where it went."""
    if claim.kind == "remind":
        return {"n": claim.n}
    follow = claim.record.follow_ups
    to = follow.escalate_to if follow is not None else None
    return {
        "to": to.model_dump(mode="json") if to is not None else None,
        "message": message.model_dump(mode="json") if message is not None else None,
    }


@dataclass(frozen=True)
class Ended:
    """An ask a sweep says should be shown now (:meth:`Store.sweep_batches`): what a sweeper
    needs to pick the poster for it; the record comes with the claim to show it."""

    ask_id: str
    platform: str
    expired: bool = False
    """This very sweep expired it (so the sweeper counts the expiry once)."""


@dataclass(frozen=True)
class PendingPage:
    """One page of pending asks (:meth:`Store.pending_page`)."""

    asks: list[AskRecord]
    cursor: str | None
    """Pass to the next call for the next page; ``None``: there is none."""


def page_key(record: AskRecord) -> tuple[float, str]:
    """Where an ask sits in the pending pages: newest first, then id (descending)."""
    return (record.created_at, record.id)


def page_cursor(created_at: float, ask_id: str) -> str:
    """The cursor after the ask at ``(created_at, ask_id)`` (opaque to callers)."""
    return f"{created_at!r}/{ask_id}"


def parse_cursor(cursor: str) -> tuple[float, str]:
    """A cursor's position; ``ValueError`` (a clear one) for anything else."""
    score, sep, ask_id = cursor.partition("/")
    try:
        if not sep or not ask_id:
            raise ValueError
        return float(score), ask_id
    except ValueError:
        raise ValueError(f"not a cursor this store gave out: {cursor!r}") from None


def page_matches(
    record: AskRecord,
    channel: str | None,
    created_after: float | None,
    created_before: float | None,
) -> bool:
    """Whether a pending ask passes :meth:`Store.pending_page`'s filters."""
    where = record.destination
    if channel is not None and channel not in (where.channel, where.user):
        return False
    if created_after is not None and record.created_at < created_after:
        return False
    return created_before is None or record.created_at <= created_before


@dataclass(frozen=True)
class Delivery:
    """An answer handed out by the answers feed; ack it once the next turn has been started."""

    delivery_id: str
    record: AskRecord


class StoreUnavailable(Exception):
    """The store could not be reached or did not answer (connection refused or reset, timeout,
    failover in progress, cluster down).

    Retrying the operation is safe. ``maybe_saved`` says whether it may have taken effect: it is
    ``False`` only when that is certain -- the operation never reached the store, and never
    will, its caller having given up (:func:`giving_up_after`) -- so a person may be told
    "nothing was saved" only then. Only a networked store raises it; ``MemoryStore`` never does.
    """

    def __init__(self, message: str, *, maybe_saved: bool = True) -> None:
        super().__init__(message)
        self.maybe_saved = maybe_saved


_give_up_at: ContextVar[float | None] = ContextVar("ask_bridge_give_up_at", default=None)


@contextlib.contextmanager
def giving_up_after(seconds: float) -> Iterator[None]:
    """Store operations started in this block stop waiting ``seconds`` from now, raising
    :class:`StoreUnavailable`: ``maybe_saved=False`` for one that never reached the store (it is
    withdrawn: it will not take effect later, when the store is back), else ``True``.

    For callers that must answer someone in time (a click is judged within seconds), and then
    say truthfully what happened. Without it an operation waits as long as the store's own
    retries last. Nested, the earlier deadline holds."""
    outer = _give_up_at.get()
    token = _give_up_at.set(min(time.monotonic() + seconds, outer or math.inf))
    try:
        yield
    finally:
        _give_up_at.reset(token)


def give_up_at() -> float | None:
    """The deadline (``time.monotonic()``, the event loop's clock) of :func:`giving_up_after`
    around the current operation, if any."""
    return _give_up_at.get()


class DuplicateAsk(ValueError):
    """:meth:`Store.create` of an id that already exists; the existing ask is unchanged."""


class Store(ABC):
    """Durable pending-ask state shared by every process of a deployment.

    Every operation of a networked store may raise :class:`StoreUnavailable`; bad arguments raise
    ``ValueError``. Unknown or retention-expired asks are not errors: reads give ``None`` or empty.
    """

    @abstractmethod
    async def create(self, record: AskRecord) -> None:
        """Persist a new pending ask (and its ``created`` event), indexed for the sweeper.

        Safe to retry: a repeated create of the same record (equal :data:`CREATION_FIELDS`: the
        first attempt ran but its reply was lost) succeeds and changes nothing. Raises
        :class:`DuplicateAsk` only if the ask stored under that id differs (within its retention).
        """

    @abstractmethod
    async def get(self, ask_id: str) -> AskRecord | None:
        """The record, or ``None`` if unknown or past retention."""

    @abstractmethod
    async def set_message(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        """Remember where the question set was posted (and log ``posted``, once per message).

        Also for an ask that already ended (a click beat this call): then its final state is due
        to be shown, and the sweeper shows it if the caller does not (see :meth:`sweep`)."""

    async def message_posted(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        """:meth:`set_message` for the call that posted the ask, which needs the record only if
        a click beat it: the ask already ended (the call shows the final state), or it is
        pending with submissions (an ask several people must agree on: the call shows them,
        since the click's handler found no message to show them on). ``None`` otherwise, and a
        networked store then builds no record (100,000 calls posting at once would each build
        one, only to drop it)."""
        record = await self.set_message(ask_id, message)
        if record is None or (record.status is AskStatus.PENDING and not record.submissions):
            return None
        return record

    @abstractmethod
    async def defer(self, ask_id: str) -> AskRecord | None:
        """Mark the ask deferred: its answer goes to the answers feed, not a waiting call.

        Atomic with :meth:`submit`: if the ask was already answered, the answered record comes
        back and the caller should use the answer instead of deferring.
        """

    @abstractmethod
    async def submit(
        self,
        ask_id: str,
        who: Responder,
        answers: Sequence[Answer],
        *,
        now: float | None = None,
        attempt: str | None = None,
        verified: Mapping[str, Sequence[str]] | None = None,
    ) -> SubmitResult:
        """Record a complete answer exactly once; see :class:`SubmitOutcome` for the verdicts.

        An ask that needs ``required`` K >= 2 people (:class:`~bridge.record.AskRecord`) records
        the submission in ``submissions`` (replacing the person's earlier one) and is answered,
        in this same atomic step, by the submission that makes K equal untyped submissions:
        ``ACCEPTED``; fewer agree -> ``RECORDED``; the person's current submission sent again ->
        ``REPEATED`` (nothing changes). A person's first recorded submission logs ``submitted``,
        each change of it ``resubmitted`` (noise: capped, see :data:`NOISE_KINDS`); the one
        that makes K logs ``answered``, its detail naming the ``agreed`` user ids.

        ``attempt`` names this submission (default: a fresh random token per call). A retry of
        the very same attempt -- a networked store re-sends it when the reply was lost -- gets
        the verdict the attempt got, ``ACCEPTED`` (or ``RECORDED`` while the ask is pending), not
        ``REPEATED``; a separate submission of the same answer by the same person (another
        attempt) stays ``REPEATED``.

        Expiry is enforced here too, not only by a sweep: an ask still ``pending`` past its
        ``expires_at`` is expired by this very step, exactly as :meth:`sweep` would (status,
        ``closed_at``, ``expired`` event, hand-off, waiters woken, due index), and the verdict is
        ``CLOSED``. No sweep will return that ask, so *the caller* re-renders it as ended.
        ``now`` (default: the clock) is the time the step runs at, like :meth:`sweep`'s.

        Authority at the moment it counts: ``verified`` (a caller able to re-check who may
        answer, as :class:`~bridge.answering.Answering` is: group and role lookups cached a
        minute) maps submission keys to their people's authorising ids as they are now (user id,
        linked ids, current groups; :attr:`~bridge.record.Responder.authorising`); ``{}`` on a
        first try. When this submission would make K agree and one of the others it would count
        is not in ``verified``, nothing changes and the verdict is ``VERIFY``, naming them in
        :attr:`SubmitResult.verify`: re-check each, then submit again with them. A counted
        submission whose ids no longer authorise its person is withdrawn first (a ``withdrawn``
        event; shown, never counted: :attr:`~bridge.record.Submission.withdrawn`) -- someone
        removed from the answering group after submitting no longer approves. ``None``: the
        caller cannot re-check; submissions count as they were made.
        """

    async def pick(
        self,
        ask_id: str,
        who: Responder,
        question: int,
        option: int,
        *,
        groups_unknown: bool = False,
        now: float | None = None,
        attempt: str | None = None,
        verified: Mapping[str, Sequence[str]] | None = None,
    ) -> SubmitResult:
        """A one-click answer: option ``option`` of question ``question`` (from 0), built from the
        stored question set and submitted as :meth:`submit` would, in one step -- a click costs
        one round trip to a networked store, not a read and then a submission.

        ``INVALID`` (with the record) when the ask is not a one-click ask (one single-select
        question) or has no such question or option. ``groups_unknown``: the caller can look up
        the person's groups; a person not named among the answerers then gets ``GROUPS`` (with
        the record, whose ``answerers`` to look up) and should pick again with their groups.
        Neither records anything. This default reads, then submits; a networked store does both
        in one atomic step."""
        record = await self.get(ask_id)
        if record is None:
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        qs = record.questions.questions
        if (
            len(qs) != 1
            or qs[0].multiSelect
            or not 0 <= question < len(qs)
            or not 0 <= option < len(qs[question].options)
        ):
            return SubmitResult(SubmitOutcome.INVALID, record)
        if groups_unknown and not record.may_answer(who):
            return SubmitResult(SubmitOutcome.GROUPS, record)
        q = qs[question]
        answer = Answer(question=q.question, selected=(q.options[option].label,))
        return await self.submit(ask_id, who, [answer], now=now, attempt=attempt, verified=verified)

    async def submit_form(
        self,
        ask_id: str,
        who: Responder,
        picks: Mapping[int, Picks],
        *,
        groups_unknown: bool = False,
        now: float | None = None,
        attempt: str | None = None,
        verified: Mapping[str, Sequence[str]] | None = None,
    ) -> SubmitResult:
        """A submitted form: ``picks`` by question index, judged against the stored question set
        (:func:`form_problems`), its answers built from it (:func:`form_answers`) and submitted
        as :meth:`submit` would, in one step -- a form costs one round trip to a networked
        store, like a click (:meth:`pick`).

        ``INVALID`` (with the record and :attr:`SubmitResult.problems`) when a *pending* ask's
        form has problems; an ended ask is judged by :meth:`submit` whatever the form says (it
        knows a repeat). ``groups_unknown`` as for :meth:`pick`. Neither records anything. This
        default reads, then submits; a networked store does both in one atomic step."""
        record = await self.get(ask_id)
        if record is None:
            return SubmitResult(SubmitOutcome.NOT_FOUND, None)
        if record.status is AskStatus.PENDING:
            problems = form_problems(record.questions, picks)
            if problems:
                return SubmitResult(SubmitOutcome.INVALID, record, problems)
        if groups_unknown and not record.may_answer(who):
            return SubmitResult(SubmitOutcome.GROUPS, record)
        answers = form_answers(record.questions, picks)
        return await self.submit(ask_id, who, answers, now=now, attempt=attempt, verified=verified)

    @abstractmethod
    async def close(
        self, ask_id: str, status: AskStatus, *, by: str | None = None
    ) -> AskRecord | None:
        """Move a *pending* ask to ``expired`` or ``cancelled``.

        Returns the record when the ask is (now) in ``status`` -- closed by this call, or already
        in that status (a retry whose first reply was lost, or a sweep that expired it first) --
        so the caller can show that final state; ``None`` when it ended otherwise (answered, or
        the other status) or is unknown.
        """

    @abstractmethod
    async def wait(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Block until the ask is no longer pending (pushed, not polled); ``None`` on timeout.

        The waiting call takes the answer (hand-off ``taken``) and must :meth:`confirm` once it
        has returned it; until then this process keeps the ask's lease alive, and should it die
        first, the sweeper moves the answer to the feed when the lease lapses. If the answer went
        to the feed instead (nobody held the ask's lease when it arrived), the record comes back
        with ``deferred=True``. Also ``None`` for an unknown ask.
        """

    @abstractmethod
    async def observe(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Block until the ask is no longer pending (woken like :meth:`wait`, never polled) and
        return it as it ended; ``None`` on timeout or for an unknown ask.

        Unlike :meth:`wait` it takes nothing and holds no lease: the outcome still goes where it
        would have gone without this call (a waiting call, or the answers feed), so any number of
        observers (``ask-bridge wait``) can watch an ask that a pipeline deferred."""

    @abstractmethod
    async def confirm(self, ask_id: str) -> None:
        """The waiting call returned the answer it took (:meth:`wait` or :meth:`defer`): the
        hand-off is done (``taken`` -> ``confirmed``), the lease dropped, nothing goes to the
        feed, and the ask's option descriptions are dropped (the call's result echoed them).
        Safe to retry; a no-op for an answer that is not ``taken``. Should this fail, the
        lease is no longer kept alive, so the answer reaches the feed (at least once)."""

    @abstractmethod
    async def release(self, ask_id: str) -> None:
        """The waiting call is gone (cancelled) without returning an answer: it goes to the feed.

        That covers an answer the call was due to take and one it already took (the store's
        take ran, even its confirm) but never returned, because the cancellation landed before
        the reply was read.
        Only the cancelled call's own cleanup may call this: a call that returned the answers
        must not, or the answer would also reach the feed.
        """

    @abstractmethod
    async def record_event(
        self, ask_id: str, kind: str, *, user_id: str | None = None, **detail: Any
    ) -> None:
        """Append to the audit trail. Noise (:data:`NOISE_KINDS`) is capped apart from the
        lifecycle events, which are never dropped."""

    @abstractmethod
    async def history(self, ask_id: str) -> list[HistoryEvent]:
        """The audit trail, in the order things happened: every lifecycle event, the newest
        noise events, and one :data:`NOISE_DROPPED` event where older noise was dropped."""

    @abstractmethod
    async def list_pending(self) -> list[AskRecord]:
        """Every pending ask."""

    async def count_pending(self, platform: str | None = None) -> int:
        """How many asks are pending (those posted to ``platform`` only, if given): for a gauge,
        read once a minute by every ``serve`` replica, so it must not read the asks themselves.
        This default counts :meth:`list_pending`; both stores override it with a count they keep."""
        found = await self.list_pending()
        return sum(1 for r in found if platform is None or r.destination.platform == platform)

    async def pending_page(
        self,
        *,
        limit: int = 100,
        cursor: str | None = None,
        channel: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
    ) -> PendingPage:
        """Up to ``limit`` pending asks, newest first (by ``created_at``, then id), after
        ``cursor`` (from the previous page), only those posted to ``channel`` (a
        channel or DM user id) and created within the given bounds (seconds since the epoch).
        The page's cursor is ``None`` once nothing follows (it may also lead to an empty page,
        when what follows was filtered out or ended meanwhile).

        Reads only as far as the page needs, so an operator can look at 100,000 pending asks
        without reading them all. This default pages over :meth:`list_pending`, which a store in
        memory can afford; a networked store reads its index page by page."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        after = parse_cursor(cursor) if cursor is not None else None
        ordered = sorted(await self.list_pending(), key=page_key, reverse=True)
        found: list[AskRecord] = []
        for record in ordered:
            if after is not None and page_key(record) >= after:
                continue
            if page_matches(record, channel, created_after, created_before):
                found.append(record)
                if len(found) == limit:
                    more = record is not ordered[-1]
                    return PendingPage(found, page_cursor(*page_key(record)) if more else None)
        return PendingPage(found, None)

    async def sweep(self, now: float | None = None) -> list[AskRecord]:
        """Expire every pending ask past ``expires_at``, finish hand-offs a dead process left,
        and return the asks whose final state should be shown now:

        * each ask this sweep expired (exactly one sweeper expires it);
        * each ended ask with a message whose final state was never shown (:meth:`mark_rendered`)
          though it ended, and any claim to show it was made, at least the render interval before
          ``now`` -- its renderer died. Overlapping sweepers may both return it: show it through
          :meth:`claim_render` (``bridge.rendering.show_final``), so exactly one does.

        ``now`` (default: the clock) decides expiry and those intervals. All of
        :meth:`sweep_batches` in one list: fine for a test or a quiet deployment; a sweeper facing
        an expiry storm takes the batches as they come instead.
        """
        found: list[AskRecord] = []
        async for batch in self.sweep_batches(now):
            for ended in batch:
                record = await self.get(ended.ask_id)
                if record is not None:
                    found.append(record)
        return found

    @abstractmethod
    def sweep_batches(
        self, now: float | None = None, *, size: int = SWEEP_BATCH
    ) -> AsyncIterator[list[Ended]]:
        """:meth:`sweep`, one bounded batch (at most ``size`` asks visited) at a time, naming
        the asks to show rather than reading their records: each batch is expired (and its
        hand-offs finished) when it is yielded, and the rest is swept as the caller asks for more
        (a networked store sweeps a few batches at once) -- so a sweeper starts showing the first
        expiries while the store expires the rest, and a storm of 100,000 never builds 100,000
        records (showing one reads it anyway, through :meth:`claim_render`)."""

    @abstractmethod
    async def claim_render(
        self,
        ask_id: str,
        *,
        now: float | None = None,
        message: MessageRef | None = None,
        unshown: bool = False,
    ) -> AskRecord | None:
        """Claim the right to show the ask's final state on its message, atomically across
        replicas: the ask has ended, has a message, and nobody claimed it within the render
        interval -> the claim is recorded and the current record returned; else ``None``.
        ``now`` defaults to the clock. ``message``: where the ask was posted, recorded (and
        logged ``posted``) if the store does not know yet -- it ended before :meth:`set_message`,
        and only the caller knows. ``unshown``: refuse an ask already marked shown
        (:meth:`mark_rendered`) -- a sweep's claim, since the sweep may have named the ask just
        before its renderer marked it; a late click's claim re-renders a shown ask on purpose.

        Throttles re-renders (late clicks on an answered ask cost at most one update per interval)
        and keeps two replicas from rendering the same ending at once."""

    @abstractmethod
    async def mark_rendered(self, ask_id: str) -> None:
        """The final state is shown on every message of the ask (logs ``rendered`` the first
        time): the sweeper stops trying to show it. Safe to retry."""

    @abstractmethod
    async def claim_timers(self, now: float | None = None) -> list[TimerClaim]:
        """Claim every reminder and escalation due at ``now`` (default: the clock) among pending
        asks with follow-ups (:class:`~bridge.record.FollowUps`; :mod:`bridge.followups` says
        when each is due), at most one step per ask, atomically across replicas: a step is
        claimed only while its ask is pending and the step not done, and not again until the
        timer-retry interval has passed without :meth:`timer_done` (the claimant died, or its
        post failed) -- after :data:`TIMER_TRIES` claims the step is given up. Asks that ended,
        expired or have nothing left to do leave the index here."""

    @abstractmethod
    async def timer_done(
        self, claim: TimerClaim, message: MessageRef | None = None, *, now: float | None = None
    ) -> AskRecord | None:
        """The claimed step was posted at ``now`` (default: the clock; the next reminder is due
        ``remind_after`` seconds later): log ``reminded`` or ``escalated`` (once; safe to retry),
        record an escalation's ``message`` among the ask's :attr:`~AskRecord.escalations`, and
        schedule the next step. Also when the ask ended meanwhile: the escalation's message is
        then recorded and its final state is due to be shown again (through
        :meth:`claim_render`, by the caller or a sweep). The record after it; ``None`` if the
        ask is unknown."""

    @property
    def lost_data(self) -> bool:
        """Whether this store noticed that its backend lost its data (a networked store restarted
        without persistence) since this process began using it; it also logged one error line
        then. Always ``False`` for a store that lives in this process."""
        return False

    @abstractmethod
    def feed(self, consumer: str) -> AsyncIterator[Delivery]:
        """Answers of deferred asks, delivered at least once until acknowledged."""

    @abstractmethod
    async def ack(self, delivery: Delivery) -> None:
        """Acknowledge a delivery so it is not handed out again. Its reader has the outcome now,
        so the store drops the ask's option descriptions (``bridge.store.keys``, Retention); a
        delivery read before this still has them. Safe to retry."""

    @abstractmethod
    def ended(self, consumer: str) -> AsyncIterator[Delivery]:
        """Every ask that left ``pending`` (answered, expired or cancelled, deferred or not),
        delivered at least once until acknowledged (:meth:`ack_ended`), for the outcome
        notifications (``bridge.webhooks``). Consumers share one group: each ended ask goes to one
        of them; a consumer's unacknowledged deliveries go back to it when it comes back under the
        same name, and to another consumer once idle for the store's ``ended_idle`` seconds
        (unless kept with :meth:`keep_ended`). Written when the ask ends; should the writer die
        right then, a sweep writes it (so, rarely, twice: the second is dropped at delivery)."""

    @abstractmethod
    async def ack_ended(self, delivery: Delivery) -> None:
        """Acknowledge an ended-ask delivery: it is not handed out again."""

    @abstractmethod
    async def keep_ended(self, consumer: str, deliveries: Sequence[Delivery]) -> None:
        """These deliveries are still being worked on by ``consumer``, which got them (a receiver
        that keeps failing is retried for hours): reset their idle time, so no other consumer
        takes them over."""

    async def aclose(self) -> None:  # noqa: B027 (optional hook: most stores hold nothing)
        """Release connections. Leases this process kept alive (waits, taken answers not yet
        confirmed) are no longer refreshed: they lapse as if the process had died."""
