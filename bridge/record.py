"""The ask record: one question set posted somewhere, waiting for (or holding) its answers.

This is what the store persists and what every process -- the waiting agent, whichever bot replica
receives the click, the sweeper, the CLI -- reads. It holds everything needed to re-render the
message or judge a click, so no process needs memory of its own.
"""

from __future__ import annotations

import secrets
import time
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Where an ask goes and what follows it there are defined with their rules in bridge.followups,
# below the record; handed on here, where callers (and users' handlers) import them from.
from bridge.followups import Destination as Destination
from bridge.followups import FollowUps as FollowUps
from bridge.models import Answer, QuestionSet, holds_typed
from bridge.text import encodable


def new_ask_id() -> str:
    """An unguessable URL-safe id: 128 random bits, 22 characters, safe in custom_ids/action_ids.

    Never starts with ``-``, so ``ask-bridge show ID`` cannot mistake an id for an option.
    """
    while True:
        ask_id = secrets.token_urlsafe(16)
        if not ask_id.startswith("-"):
            return ask_id


class AskStatus(StrEnum):
    PENDING = "pending"
    ANSWERED = "answered"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class MessageRef(BaseModel):
    """The posted message, as the platform identifies it (Slack: channel + ts; Discord: ids)."""

    model_config = ConfigDict(frozen=True)

    platform: str
    channel: str
    message_id: str
    extra: dict[str, str] = Field(default_factory=dict)


class Responder(BaseModel):
    """Who answered (or tried to): platform user id, display name, and resolved group ids.

    ``person`` and ``aliases`` come from the operator's identity map (:mod:`bridge.identities`)
    for a user linked across platforms: the person's key, under which their submission is kept
    whichever platform it came from (so one human counts once toward ``required``), and their
    ids on the other platforms, which authorise them as their own id would."""

    model_config = ConfigDict(frozen=True)

    user_id: str
    name: str | None = None
    groups: tuple[str, ...] = ()
    person: str | None = None
    aliases: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Whose submission this is: the linked person, else the platform user."""
        return self.person or self.user_id

    @property
    def authorising(self) -> tuple[str, ...]:
        """The ids besides :attr:`key` that may name this person among an ask's answerers:
        their groups, their ids on other platforms, and their own id when the key is not it."""
        own = (self.user_id,) if self.person else ()
        return (*own, *self.aliases, *self.groups)

    @field_validator("name")
    @classmethod
    def _encodable(cls, name: str | None) -> str | None:
        """A platform's display name is untrusted text: a lone surrogate in it (a JSON escape)
        would make the record unstorable."""
        return None if name is None else encodable(name)


MAX_EXPIRES = 10 * 365 * 86400.0
"""Longest an ask may take answers (``AskPolicy.expires``), in seconds: ten years, far past any
real use, and well within what a networked store can keep as a time to live (an expiry of
1e300 seconds overflowed it)."""
MAX_REQUIRED = 50
"""Most agreeing people an ask may require (``required``): an approval, not a poll."""


class Submission(BaseModel):
    """One person's current answer to an ask that needs several people to agree (``required`` of
    2 or more): who, when, and what they chose. A newer submission by the same person replaces
    theirs; it counts toward agreement only without typed text (see :attr:`AskRecord.required`)."""

    model_config = ConfigDict(frozen=True)

    user_id: str
    name: str | None = None
    at: float
    answers: tuple[Answer, ...]
    person: str | None = None
    """The linked person it was submitted as (:attr:`Responder.person`), if any."""
    withdrawn: bool = False
    """Its person no longer had the authority to answer when it would have counted (removed
    from the answering group or role since): shown as withdrawn, never counted."""

    @property
    def key(self) -> str:
        """Whose submission this is: one per person (or per platform user, when unlinked)."""
        return self.person or self.user_id

    @property
    def typed(self) -> bool:
        """Whether any answer holds typed ("Other") text: then it never counts toward agreement."""
        return holds_typed(self.answers)


class AskRecord(BaseModel):
    """The durable state of one ask. ``answerers`` empty means anyone may answer.

    ``required`` (K, default 1) is how many distinct authorised people must submit the same
    answer. With K = 1 the first complete answer answers the ask, typed text included (and
    ``submissions`` stays empty). With K >= 2 every submission is recorded in ``submissions``
    (one per person: a newer one replaces theirs), and the ask is answered when K of them are
    *equal* -- the same options for every question -- and hold no typed text: a typed answer is
    recorded and shown but never counts, so K people can only agree on options. ``answers`` are
    then the agreed answers and ``answered_by``/``answered_at`` the person and time that made K.
    """

    id: str = Field(default_factory=new_ask_id)
    questions: QuestionSet
    destination: Destination
    context: dict[str, Any] = Field(default_factory=dict)
    answerers: tuple[str, ...] = ()
    required: int = Field(default=1, ge=1, le=MAX_REQUIRED)
    tell_model_who: bool = False
    """Whether the model's result names who answered (``answered_by``); the host always can."""
    created_at: float = Field(default_factory=time.time)
    expires_at: float
    status: AskStatus = AskStatus.PENDING
    deferred: bool = False
    message: MessageRef | None = None
    """The first message the ask was posted as (see :attr:`messages` for all of them)."""
    follow_ups: FollowUps | None = None
    notify: tuple[str, ...] = ()
    """Webhook URLs told of the outcome when the ask ends, besides ``ASK_BRIDGE_WEBHOOK_URL``
    (:mod:`bridge.webhooks`)."""
    reminded: int = 0
    """Reminders posted so far (``follow_ups.remind_after``)."""
    escalations: tuple[MessageRef, ...] = ()
    """Where the ask was posted again when it escalated (``follow_ups.escalate_to``)."""
    answers: tuple[Answer, ...] | None = None
    answered_by: Responder | None = None
    answered_at: float | None = None
    closed_at: float | None = None
    submissions: tuple[Submission, ...] = ()
    """With ``required`` >= 2: each person's current submission, oldest first."""

    @property
    def messages(self) -> tuple[MessageRef, ...]:
        """Every message the ask was posted as: the first, then each escalation's. Each shows the
        same question set, each answers it, and each shows the final state once it ends."""
        first = () if self.message is None else (self.message,)
        return (*first, *self.escalations)

    def agreeing(self, answers: tuple[Answer, ...] | None = None) -> list[Submission]:
        """The submissions that agree with ``answers`` (default: the ask's answers) and count
        toward ``required``: equal answers and no typed text."""
        target = self.answers if answers is None else answers
        return [
            s for s in self.submissions if not s.typed and not s.withdrawn and s.answers == target
        ]

    def who_answered(self) -> list[Submission]:
        """Who answered an answered ask, as submissions: the agreeing people (K >= 2), or the one
        person whose answer was taken (K = 1). Empty while nobody has answered."""
        if self.answers is None:
            return []
        agreed = self.agreeing()
        if agreed:
            return agreed
        if self.answered_by is None:
            return []
        by = self.answered_by
        return [
            Submission(
                user_id=by.user_id, name=by.name, at=self.answered_at or 0.0, answers=self.answers
            )
        ]
