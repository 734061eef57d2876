"""The terms of the store contract (:class:`~bridge.store.base.Store`): the settings' defaults
and limits, the verdicts and records its operations return, the audit trail's events, the
sweeper's pages and follow-up claims, and its errors and deadlines -- the values and pure
functions every backend and every caller share, apart from the contract's operations.

:mod:`bridge.store.base` re-exports each of them, where callers have imported them from.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, Field

from bridge.judging import FormProblem
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, MessageRef, Responder

DEFAULT_RETENTION = 30 * 86400.0
"""Seconds a finished ask (record, audit trail, feed entry) is kept."""
DEFAULT_LEASE_TTL = 30.0
"""Seconds a waiting call's lease outlives its last sign of life."""
DEFAULT_CLAIM_IDLE = 60.0
"""Seconds an answers-feed delivery may sit unacknowledged at one consumer before another
consumer takes it over (:meth:`Store.feed`)."""
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
always on the record). (``NOISE`` in ``bridge/store/redis/lua/lib/header.lua`` spells the same
set.)"""
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
(the memory store's lock, ``finish`` in ``bridge/store/redis/lua/lib/core.lua``), so the store
tells it as it happens instead of returning it through every operation that may cause it (submit,
close, release, a sweep); and it tells it here, importing nothing above it: :mod:`bridge.metrics`
subscribes its ``handed_to_feed`` log line when it is imported, as it is by every module that
drives asks (asking, answering, sweeper, runtime)."""

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


def check_batch_size(size: int) -> None:
    """Refuse a :meth:`Store.sweep_batches` batch that could visit nothing."""
    if size < 1:
        raise ValueError(f"size must be at least 1, not {size}")


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
        ensure_ascii=False,  # UTF-8 as is (a 3-byte character would take 6), as lua/ writes it
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


class SubmitResult:
    """How a submission was judged, and the ask as it stood after it.

    ``record`` is built when first read: a networked store keeps the stored fields until then,
    so a caller that needs only the outcome (an agent answering through the store, a bench)
    never builds a record, and one that reads it builds it once."""

    __slots__ = ("_build", "_record", "claimed", "outcome", "problems", "verify")

    def __init__(
        self,
        outcome: SubmitOutcome,
        record: AskRecord | None,
        problems: Mapping[int, FormProblem] | None = None,
        *,
        build: Callable[[], AskRecord] | None = None,
        verify: tuple[str, ...] = (),
        claimed: bool = False,
    ) -> None:
        self.outcome = outcome
        self.problems: Mapping[int, FormProblem] = problems or {}
        """``INVALID`` forms (:meth:`Store.submit_form`): what is wrong with each question."""
        self.verify = verify
        """``VERIFY``: the keys (:attr:`~bridge.record.Submission.key`) of the submissions whose
        people's authority the caller must re-check before this one may make K agree."""
        self.claimed = claimed
        """The submission found the ask ended and, as its caller asked (``claim``), claimed
        the showing of its final state in the same step (:meth:`Store.claim_render`): the
        caller shows ``record`` without claiming again."""
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


@dataclass(frozen=True)
class PageQuery:
    """What :meth:`Store.pending_page` was asked for, checked, its cursor read."""

    limit: int
    after: tuple[float, str] | None
    """The position the cursor names (:func:`page_key`); ``None``: from the newest ask."""
    channel: str | None
    created_after: float | None
    created_before: float | None

    def matches(self, record: AskRecord) -> bool:
        """Whether a pending ask passes the filters."""
        where = record.destination
        if self.channel is not None and self.channel not in (where.channel, where.user):
            return False
        if self.created_after is not None and record.created_at < self.created_after:
            return False
        return self.created_before is None or record.created_at <= self.created_before


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


class StoreSettings(TypedDict, total=False):
    """The settings every store takes (:class:`Store`'s keyword arguments), for a backend that
    adds its own arguments and passes these on: ``**settings: Unpack[StoreSettings]``."""

    retention: float
    lease_ttl: float
    claim_idle: float
    noise_cap: int
    render_interval: float
    timer_retry: float
    ended_idle: float


@dataclass(frozen=True)
class Submitting:
    """One submission as every way of answering (:meth:`Store.submit`, :meth:`Store.pick`,
    :meth:`Store.submit_form`) hands it to the backend: who, when, under which attempt token,
    with what re-checked authority. :meth:`of` fills in the defaults, once for every backend."""

    who: Responder
    now: float
    """The time the atomic step runs at (it decides expiry, and stamps the submission)."""
    attempt: str
    """Names this submission: a retry of the very same attempt gets the verdict it got."""
    verified: Mapping[str, Sequence[str]] | None
    """Submission keys to their people's authorising ids as they are now (:meth:`Store.submit`);
    ``None``: the caller cannot re-check."""
    groups_unknown: bool = False
    """The caller can look up the person's groups (:meth:`Store.pick`)."""
    claim: bool = False
    """The caller shows the ask's final state should the submission find it ended: the step
    claims that showing too (:attr:`SubmitResult.claimed`)."""

    @classmethod
    def of(
        cls,
        who: Responder,
        now: float | None,
        attempt: str | None,
        verified: Mapping[str, Sequence[str]] | None,
        groups_unknown: bool = False,
        claim: bool = False,
    ) -> Submitting:
        """The submission a caller described: ``now`` defaults to the clock, ``attempt`` to a
        fresh random token (a networked client's re-send of the call carries the same one)."""
        return cls(
            who,
            time.time() if now is None else now,
            secrets.token_hex(8) if attempt is None else attempt,
            verified,
            groups_unknown,
            claim,
        )
