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

from pydantic import BaseModel, ConfigDict, Field

from bridge.models import Answer, QuestionSet


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


class Destination(BaseModel):
    """Where the question set is posted: a platform's channel, optionally a thread or a DM user."""

    model_config = ConfigDict(frozen=True)

    platform: str
    channel: str | None = None
    thread: str | None = None
    user: str | None = None


class MessageRef(BaseModel):
    """The posted message, as the platform identifies it (Slack: channel + ts; Discord: ids)."""

    model_config = ConfigDict(frozen=True)

    platform: str
    channel: str
    message_id: str
    extra: dict[str, str] = Field(default_factory=dict)


class Responder(BaseModel):
    """Who answered (or tried to): platform user id, display name, and resolved group ids."""

    model_config = ConfigDict(frozen=True)

    user_id: str
    name: str | None = None
    groups: tuple[str, ...] = ()


class AskRecord(BaseModel):
    """The durable state of one ask. ``answerers`` empty means anyone may answer."""

    id: str = Field(default_factory=new_ask_id)
    questions: QuestionSet
    destination: Destination
    context: dict[str, Any] = Field(default_factory=dict)
    answerers: tuple[str, ...] = ()
    created_at: float = Field(default_factory=time.time)
    expires_at: float
    status: AskStatus = AskStatus.PENDING
    deferred: bool = False
    message: MessageRef | None = None
    answers: tuple[Answer, ...] | None = None
    answered_by: Responder | None = None
    answered_at: float | None = None
    closed_at: float | None = None

    def may_answer(self, who: Responder) -> bool:
        if not self.answerers:
            return True
        allowed = set(self.answerers)
        return who.user_id in allowed or any(g in allowed for g in who.groups)
