"""Where an ask goes, and what follows it there: its :class:`Destination`, and the reminders and
escalation of its :class:`FollowUps` -- when each is due, and where an escalation goes.

Both are fields of the ask record (:class:`bridge.record.AskRecord`; :mod:`bridge.record` hands
them on, where callers import them from). They are defined here, below the record, so that the
rule of when a step is due (:func:`next_step`, which every store applies) needs nothing else.

An ask created with :class:`FollowUps` gets, while it is pending,

* reminders: a reply in its message's thread mentioning who may answer (or the channel's people
  when anyone may), the first ``remind_after`` seconds after it was created, each next one
  ``remind_after`` seconds after the previous one was posted (so a sweeper that was down does not
  fire a burst), at most ``remind_times``;
* an escalation: ``escalate_after`` seconds after it was created, the same ask posted to
  ``escalate_to`` (another channel, a person's DM, possibly on another platform). Either message
  answers it, and both show the final state once it ends. Who may answer does not change.

The shared sweeper fires them (:class:`bridge.sweeper.Sweeper`) from the store's due-time index
(:meth:`bridge.store.base.Store.claim_timers`), each exactly once across replicas. Nothing is due
at or after the ask's expiry. A step is claimed only while the ask is pending, so the one race
left is harmless: an ask that ends between a reminder's claim and its post gets that reminder
after its end (the message shows it ended); an escalation posted then is recorded and shown
ended (:meth:`~bridge.store.base.Store.timer_done`). ``next_step`` in
``bridge/store/redis/lua/lib/followups.lua`` spells the same rule.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

_PLATFORM = re.compile(r"^([a-z][a-z0-9_-]{0,31}):(.+)$")
USER_PREFIX = "user:"
MAX_ID = 64
"""Longest channel or user id an escalation may name (Slack ids have about 11 characters,
Discord snowflakes at most 20): a longer one is a mistake, kept out of every record."""


class Destination(BaseModel):
    """Where the question set is posted: a platform's channel, optionally a thread or a DM user."""

    model_config = ConfigDict(frozen=True)

    platform: str
    channel: str | None = None
    thread: str | None = None
    user: str | None = None


class FollowUps(BaseModel):
    """What the sweeper does while an ask waits: remind the answerers in
    the message's thread every ``remind_after`` seconds, at most ``remind_times`` times, and
    post the ask to ``escalate_to`` once ``escalate_after`` seconds after it was created.
    Both are finite: JSON (a networked store's record) has no infinity, and an infinite delay
    would be written as ``null`` -- no reminders, or an escalation without its delay, which no
    process could read back."""

    model_config = ConfigDict(frozen=True)

    remind_after: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    remind_times: int = Field(default=3, ge=1, le=100)
    escalate_after: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    escalate_to: Destination | None = None

    @model_validator(mode="after")
    def _paired(self) -> FollowUps:
        if (self.escalate_after is None) != (self.escalate_to is None):
            raise ValueError("escalate_after and escalate_to go together: give both or neither")
        return self


def next_step(
    follow: FollowUps | None,
    created_at: float,
    *,
    reminded: int,
    reminded_at: float | None,
    escalated: bool,
    unposted: bool = False,
) -> tuple[str, float] | None:
    """The next step not yet done and when it is due: ``("escalate", t)`` or
    ``("remind:<n>", t)``; ``None`` when nothing is left. The earlier one wins (the escalation
    on a tie). ``unposted``: nothing yet -- no message to reply to, and an ask whose post never
    got recorded may be one whose caller was told it failed (the platform or the store refused):
    escalating it would show questions the agent gave up on, so follow-ups wait for the post."""
    if follow is None or unposted:
        return None
    best: tuple[str, float] | None = None
    if follow.escalate_after is not None and not escalated:
        best = ("escalate", created_at + follow.escalate_after)
    if follow.remind_after is not None and reminded < follow.remind_times:
        at = (created_at if reminded_at is None else reminded_at) + follow.remind_after
        if best is None or at < best[1]:
            best = (f"remind:{reminded + 1}", at)
    return best


def parse_destination(text: str, platform: str) -> Destination:
    """Where ``--escalate-to`` points: ``[PLATFORM:]ID`` or ``[PLATFORM:]user:ID``.

    ``ID`` (ASCII letters, digits, ``-`` and ``_``, at most :data:`MAX_ID`) is a channel
    (Slack: ``C…``; a Slack user id ``U…`` posts to the app's DM with that person, as a channel
    would); ``user:ID`` is a person's DM on any platform (Discord needs it:
    its user and channel ids look alike). ``PLATFORM`` defaults to the ask's own ``platform``.
    ``ValueError`` with a clear message for anything else."""
    rest = text.strip()
    where = platform
    found = _PLATFORM.match(rest)
    if found and found.group(1) + ":" != USER_PREFIX:
        where, rest = found.group(1), found.group(2)
    user = rest.startswith(USER_PREFIX)
    ident = rest.removeprefix(USER_PREFIX) if user else rest
    if (
        not ident
        or len(ident) > MAX_ID
        or not ident.isascii()
        or not ident.replace("-", "").replace("_", "").isalnum()
    ):
        raise ValueError(
            f"escalate to {text[:60]!r}: give a channel id or user:ID, optionally after a "
            "platform and a colon (e.g. C0MANAGERS, slack:user:U0BOSS, discord:123456)"
        )
    if user:
        return Destination(platform=where, user=ident)
    return Destination(platform=where, channel=ident)


def follow_ups(
    *,
    platform: str,
    remind_after: float | None = None,
    remind_times: int = 3,
    escalate_after: float | None = None,
    escalate_to: Destination | str | None = None,
) -> FollowUps | None:
    """The :class:`FollowUps` of an ask on ``platform`` (``None`` when there are none), the
    escalation's destination parsed (:func:`parse_destination`) if given as text."""
    if remind_after is None and escalate_after is None and escalate_to is None:
        return None
    if isinstance(escalate_to, str):
        escalate_to = parse_destination(escalate_to, platform)
    return FollowUps(
        remind_after=remind_after,
        remind_times=remind_times,
        escalate_after=escalate_after,
        escalate_to=escalate_to,
    )
