"""The store contract: what every pending-ask store guarantees, whichever backend holds the state.

Two implementations pass one contract test suite: ``MemoryStore`` (the embedded default, one
process) and ``RedisStore`` (any number of processes against one Redis, Sentinel or Cluster).
Every state change that must happen once -- the first complete answer, an expiry, a cancel -- is a
single atomic step in the backend, so replicas can race freely.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from bridge.ask import AskRecord, AskStatus, MessageRef, Responder
from bridge.models import Answer

DEFAULT_RETENTION = 30 * 86400.0
"""Seconds a finished ask (record, audit trail, feed entry) is kept."""
DEFAULT_LEASE_TTL = 30.0
"""Seconds a waiting call's lease outlives its last sign of life."""

_KIND = re.compile(r"^[a-z][a-z_]{0,31}$")


def check_event_kind(kind: str) -> None:
    """Refuse an audit-trail kind that is not lower_snake_case of at most 32 characters."""
    if not _KIND.match(kind):
        raise ValueError(f"event kind must be lower_snake_case, at most 32 chars: {kind!r}")


def check_close_status(status: AskStatus) -> None:
    """Refuse a :meth:`Store.close` to anything but expired or cancelled."""
    if status not in (AskStatus.EXPIRED, AskStatus.CANCELLED):
        raise ValueError(f"close() ends an ask as expired or cancelled, not {status}")


def dump_answers(answers: Sequence[Answer]) -> tuple[list[dict[str, Any]], str]:
    """The answers as JSON-ready dicts (for the audit trail) and their canonical text: equal
    answers give equal text, which is how a repeated submission is recognised."""
    dumped = [a.model_dump(mode="json") for a in answers]
    return dumped, json.dumps(dumped, separators=(",", ":"), sort_keys=True)


class SubmitOutcome(StrEnum):
    """How a submission was judged. Only ``ACCEPTED`` and ``REPEATED`` mean "your answer stands"."""

    ACCEPTED = "accepted"  # this submission answered the ask
    REPEATED = "repeated"  # the same person sent the same answer again: idempotent success
    ALREADY_ANSWERED = "already_answered"  # someone answered first; see record.answered_by
    CLOSED = "closed"  # the ask expired or was cancelled -- perhaps by this very submission
    # (it was past expires_at): then nobody else re-renders it, the caller must (Store.submit)
    NOT_ALLOWED = "not_allowed"  # the person is not among the ask's answerers; nothing changed
    NOT_FOUND = "not_found"  # no such ask (never existed, or past its retention)


@dataclass(frozen=True)
class SubmitResult:
    outcome: SubmitOutcome
    record: AskRecord | None

    @property
    def ok(self) -> bool:
        return self.outcome in (SubmitOutcome.ACCEPTED, SubmitOutcome.REPEATED)


class HistoryEvent(BaseModel):
    """One line of an ask's audit trail."""

    at: float
    kind: str
    """What happened. The stores record created, posted, deferred, refused, late, answered,
    expired, cancelled and handed_to_feed; callers add their own through
    :meth:`Store.record_event` (the chat handler post_failed, the Slack app opened)."""
    user_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Delivery:
    """An answer handed out by the answers feed; ack it once the next turn has been started."""

    delivery_id: str
    record: AskRecord


class StoreUnavailable(Exception):
    """The store could not be reached or did not answer (connection refused or reset, timeout,
    failover in progress, cluster down).

    Callers treat it as "nothing is known to have changed": the operation may or may not have
    taken effect, and retrying it is safe. Only a networked store raises it; ``MemoryStore``
    never does.
    """


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

        Raises :class:`DuplicateAsk` if an ask with that id exists (within its retention).
        """

    @abstractmethod
    async def get(self, ask_id: str) -> AskRecord | None:
        """The record, or ``None`` if unknown or past retention."""

    @abstractmethod
    async def set_message(self, ask_id: str, message: MessageRef) -> AskRecord | None:
        """Remember where the question set was posted (and log ``posted``)."""

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
    ) -> SubmitResult:
        """Record a complete answer exactly once; see :class:`SubmitOutcome` for the verdicts.

        Expiry is enforced here too, not only by a sweep: an ask still ``pending`` past its
        ``expires_at`` is expired by this very step, exactly as :meth:`sweep` would (status,
        ``closed_at``, ``expired`` event, hand-off, waiters woken, due index), and the verdict is
        ``CLOSED``. No sweep will return that ask, so *the caller* re-renders it as ended.
        ``now`` (default: the clock) is the time the step runs at, like :meth:`sweep`'s.
        """

    @abstractmethod
    async def close(
        self, ask_id: str, status: AskStatus, *, by: str | None = None
    ) -> AskRecord | None:
        """Move a *pending* ask to ``expired`` or ``cancelled``; ``None`` if it was not pending."""

    @abstractmethod
    async def wait(self, ask_id: str, timeout: float) -> AskRecord | None:  # noqa: ASYNC109
        """Block until the ask is no longer pending (pushed, not polled); ``None`` on timeout.

        The waiting call takes the answer: it will not also go to the feed. If the answer went to
        the feed instead (nobody held the ask's lease when it arrived), the record comes back with
        ``deferred=True``. Also ``None`` for an unknown ask.
        """

    @abstractmethod
    async def release(self, ask_id: str) -> None:
        """The waiting call is gone (cancelled) without returning an answer: it goes to the feed.

        That covers an answer the call was due to take and one it already took (the store's
        take ran) but never returned, because the cancellation landed before the reply was read.
        Only the cancelled call's own cleanup may call this: a call that returned the answers
        must not, or the answer would also reach the feed.
        """

    @abstractmethod
    async def record_event(
        self, ask_id: str, kind: str, *, user_id: str | None = None, **detail: Any
    ) -> None:
        """Append to the audit trail."""

    @abstractmethod
    async def history(self, ask_id: str) -> list[HistoryEvent]:
        """The audit trail, oldest first."""

    @abstractmethod
    async def list_pending(self) -> list[AskRecord]:
        """Every pending ask."""

    @abstractmethod
    async def sweep(self, now: float | None = None) -> list[AskRecord]:
        """Expire every pending ask past ``expires_at``; each is returned by exactly one sweeper."""

    @abstractmethod
    def feed(self, consumer: str) -> AsyncIterator[Delivery]:
        """Answers of deferred asks, delivered at least once until acknowledged."""

    @abstractmethod
    async def ack(self, delivery: Delivery) -> None:
        """Acknowledge a delivery so it is not handed out again."""

    async def aclose(self) -> None:  # noqa: B027 (optional hook: most stores hold nothing)
        """Release connections."""
