"""The chat handler: an ``ask_user`` callback that asks people in a chat and waits (or defers).

The first step of ask -> post -> click -> resolve -> show: this module creates the ask in the
store and posts it (:mod:`bridge.poster`); a click is answered by :mod:`bridge.clicks` and judged
by :mod:`bridge.answering`, the store resolves it and wakes the call waiting here, and
:mod:`bridge.showing` shows the ask's new state on its messages.

``ChatHandler(poster, store, destination, policy)`` is an async callable with the callback
signature ``(questions, context) -> AskUserAnswered | AskUserDeferred`` (the answers with who gave
them; see :class:`AskPolicy` for asks several people must agree on); pass it to
``tools_interactive(callback=...)`` or ``set_ask_user_callback(...)``. Per call it creates a
durable ask, posts it, then:

* ``mode="defer"``: returns :class:`AskUserDeferred` at once; the answer arrives on the store's
  answers feed (render it with :func:`bridge.feed.render_delivery`).
* ``mode="block"``: waits up to ``wait`` seconds. Answered -> the answers. Nobody answered ->
  ``on_timeout="defer"`` keeps the ask open and defers; ``on_timeout="error"`` closes it as expired,
  shows it so, and tells the model nobody answered (:class:`~bridge.errors.NotAnswered`).
* A post the platform refuses -> :class:`~bridge.errors.PostFailed`; the ask is closed.
* The call cancelled anywhere once the ask may exist (creating it, posting, recording the
  message, waiting) -> the ask is closed as cancelled and shown so (an answer that beat the
  cancellation goes to the feed, even one the store had already handed to this call), and the
  cancellation propagates.

Who shows an ask's final state on its message: whoever made the change. The process whose
``store.submit`` returned ``ACCEPTED`` (the platform's click handler) shows the answered message;
the handler shows only what it closes itself (timeout error, cancellation); the sweeper shows what
it expires. An ask that ended before ``set_message`` recorded where it was posted (a click right
after the post) is shown by the handler, which alone knows the message then.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bridge import metrics
from bridge.deferred import AskUserDeferred
from bridge.errors import NotAnswered, PostFailed
from bridge.followups import follow_ups, parse_destination
from bridge.identities import IDENTITIES_ENV, Identities
from bridge.models import Option, Question, QuestionSet
from bridge.poster import Poster
from bridge.record import (
    MAX_EXPIRES,
    MAX_REQUIRED,
    AskRecord,
    AskStatus,
    Destination,
    FollowUps,
    MessageRef,
)
from bridge.result import AskUserAnswered, ToolOutcome, unanswered_text
from bridge.showing import show_final
from bridge.store.base import Store
from bridge.webhook_settings import check_notify

log = logging.getLogger(__name__)


class AskPolicy(BaseModel):
    """How long to wait for people, how long the ask stays open, who may answer, and how many
    of them must agree.

    ``required`` (K, 1 to :data:`~bridge.record.MAX_REQUIRED`): the ask is answered when K
    distinct authorised people have submitted the same answer -- the same options for every
    question and no typed text anywhere; a typed answer is recorded and shown but never counts.
    With K = 1 the first complete answer is taken, typed or not. ``tell_model_who``: the model's
    result also names who answered (``answered_by``: user id, name, time); the host always
    gets it (``ToolOutcome.answered``, the feed's record, ``ask-bridge show``).

    How to follow up while nobody answers (:mod:`bridge.followups`): reminders every
    ``remind_after`` seconds, at most ``remind_times``; the ask posted again at ``escalate_to``
    after ``escalate_after`` seconds -- a :class:`Destination`, or text such as ``C0MANAGERS``,
    ``user:U0BOSS`` or ``discord:123`` read by :func:`bridge.followups.parse_destination`."""

    model_config = ConfigDict(frozen=True)

    wait: float = Field(default=600.0, ge=0, description="seconds the tool call blocks")
    expires: float = Field(
        default=86400.0,
        gt=0,
        le=MAX_EXPIRES,
        allow_inf_nan=False,
        description="seconds the ask takes answers",
    )
    on_timeout: Literal["defer", "error"] = "defer"
    mode: Literal["block", "defer"] = "block"
    answerers: tuple[str, ...] = ()
    required: int = Field(
        default=1, ge=1, le=MAX_REQUIRED, description="people who must agree on one answer"
    )
    tell_model_who: bool = False
    remind_after: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    remind_times: int = Field(default=3, ge=1, le=100)
    escalate_after: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    escalate_to: Destination | str | None = None
    notify: tuple[str, ...] = ()
    """Webhook URLs (http or https) told of this ask's outcome when it ends, besides
    ``ASK_BRIDGE_WEBHOOK_URL``; delivered by ``serve`` (:mod:`bridge.webhooks`). Each must be
    under a prefix of ``ASK_BRIDGE_WEBHOOK_DESTINATIONS``, the operator's allow-list (checked
    here, from the environment: a URL nobody allowed is refused before anything is stored)."""

    @field_validator("answerers")
    @classmethod
    def _answerers(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        """Each id trimmed and named once, on any platform (``"U0A "`` is ``U0A``); the
        platform's own rules (case, what an id looks like) come with its poster, when a
        :class:`ChatHandler` takes the policy (:func:`check_required`)."""
        kept = tuple(dict.fromkeys(a.strip() for a in ids))
        if "" in kept:
            raise ValueError("an answerer id is empty: give a user or group id, or none for anyone")
        return kept

    @field_validator("notify")
    @classmethod
    def _notify(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        return check_notify(urls)

    @model_validator(mode="after")
    def _escalation(self) -> AskPolicy:
        if (self.escalate_after is None) != (self.escalate_to is None):
            raise ValueError("escalate_after and escalate_to go together: give both or neither")
        if isinstance(self.escalate_to, str):
            parse_destination(self.escalate_to, "any")  # a clear error now, not at ask time
        return self

    def follow_ups(self, platform: str) -> FollowUps | None:
        """The reminders and escalation of an ask posted on ``platform``, if any."""
        return follow_ups(
            platform=platform,
            remind_after=self.remind_after,
            remind_times=self.remind_times,
            escalate_after=self.escalate_after,
            escalate_to=self.escalate_to,
        )


def check_required(
    policy: AskPolicy,
    poster: Poster,
    destination: Destination | None = None,
    posters: Mapping[str, Poster] | None = None,
    *,
    identities: Identities | None = None,
) -> AskPolicy:
    """The policy as an ask posted by ``poster`` takes it: its answerers in the platform's own
    form, each once (:func:`platform_answerers`). Refuses (``ValueError``, one clear line) a
    policy that could never be answered: an answerer id that cannot be anyone's there; only
    individual people named as answerers, fewer distinct ones than it requires to agree; or
    several people required but the ask goes to one person's DM (``destination.user``, no
    channel) with no escalation to show it to anyone else. ``posters``: those of other
    platforms, by name (an escalation's, whose ids may be named too).

    Also refused: several people required and an escalation to another platform, unless every
    answerer is linked on both by ``identities`` (:mod:`bridge.identities`): otherwise one
    person answering on each would count as two."""
    links = identities or Identities()
    answerers = platform_answerers(policy, poster, posters or {})
    _check_people_across(policy, poster.platform, answerers, links)
    if (
        policy.required > 1
        and destination is not None
        and destination.user is not None
        and destination.channel is None
        and policy.escalate_to is None
    ):
        raise ValueError(
            f"{policy.required} people must agree but the ask goes to one person's DM "
            f"({destination.user}): post it in a channel, escalate it, or require 1"
        )
    if policy.required > 1 and answerers and all(poster.individual(a) for a in answerers):
        people = {links.person_named(a) or a for a in answerers}  # linked ids: one person
        if len(people) < policy.required:
            raise ValueError(
                f"{policy.required} people must agree but only {len(people)} may answer "
                f"({', '.join(sorted(answerers))}): name more answerers (or a group), or require "
                "fewer"
            )
    if answerers == policy.answerers:
        return policy
    return policy.model_copy(update={"answerers": answerers})


def _check_people_across(
    policy: AskPolicy, platform: str, answerers: tuple[str, ...], links: Identities
) -> None:
    """An ask several people must agree on, escalated to another platform, needs each answerer
    linked on both (``ASK_BRIDGE_IDENTITIES``): a click on each platform by one person would
    count twice otherwise, and nobody could tell. Raises ``ValueError`` in one line."""
    follow = policy.follow_ups(platform)
    if policy.required < 2 or follow is None or follow.escalate_to is None:
        return
    there = follow.escalate_to.platform
    if there == platform:
        return
    if not answerers:
        raise ValueError(
            f"{policy.required} people must agree and the ask escalates from {platform} to "
            f"{there}: with anyone allowed to answer, one person answering on both would count "
            f"twice. Name the answerers and link each one's {platform} and {there} ids in "
            f"{IDENTITIES_ENV}, or require 1"
        )
    unlinked = links.unlinked(answerers, (platform, there))
    if unlinked:
        shown = ", ".join(unlinked[:_MAX_NAMED_IDS])
        more = (
            f" and {len(unlinked) - _MAX_NAMED_IDS} more" if len(unlinked) > _MAX_NAMED_IDS else ""
        )
        raise ValueError(
            f"{policy.required} people must agree and the ask escalates from {platform} to "
            f"{there}, but {shown}{more} {'is' if len(unlinked) == 1 else 'are'} not linked to "
            f"one person on both in {IDENTITIES_ENV} (a group never is): link them, name "
            "linked people, or require 1"
        )


_MAX_NAMED_IDS = 5
"""Refused answerer ids a refusal names; the rest are counted."""


def platform_answerers(
    policy: AskPolicy, poster: Poster, posters: Mapping[str, Poster]
) -> tuple[str, ...]:
    """The policy's answerers in the form of the platform they are ids of (:meth:`Poster.answerer`:
    ``u0alice`` is Slack's ``U0ALICE``), each once; ``ValueError`` naming, in one line, those
    that cannot be anyone's.

    An ask escalated to another platform (``escalate_to``) may also name that platform's people,
    since who may answer does not change: an id ``poster`` refuses is judged by that platform's
    poster (from ``posters``), and kept as given when there is none to ask."""
    follow = policy.follow_ups(poster.platform)
    there = follow.escalate_to.platform if follow and follow.escalate_to else poster.platform
    other = posters.get(there) if there != poster.platform else None
    untold = there != poster.platform and other is None
    kept: list[str] = []
    bad: list[str] = []
    for raw in policy.answerers:
        found = poster.answerer(raw)
        if found is None and other is not None:
            found = other.answerer(raw)
        if found is None and untold:
            found = raw.strip() or None
        if found is None:
            bad.append(raw)
        else:
            kept.append(found)
    if bad:
        raise ValueError(_refused_ids(bad, [poster, *([other] if other else [])]))
    return tuple(dict.fromkeys(kept))


def _refused_ids(bad: list[str], judges: list[Poster]) -> str:
    """One line naming the answerer ids no platform of the ask takes, and what theirs look like."""
    names = ", ".join(repr(b[:40]) for b in bad[:_MAX_NAMED_IDS])
    if len(bad) > _MAX_NAMED_IDS:
        names += f" and {len(bad) - _MAX_NAMED_IDS} more"
    one = len(bad) == 1
    subject = f"answerer {names} is not an id" if one else f"answerers {names} are not ids"
    where = " or ".join(j.platform for j in judges)
    rules = "; ".join(j.answerer_rule for j in judges if j.answerer_rule)
    return f"{subject} of anyone who may answer on {where}" + (f": {rules}" if rules else "")


@dataclass(slots=True)
class _Asking:
    """One call's ask: its record until it is posted, then only what the rest of the call
    needs -- a person may take hours, and the store hands the record back with the outcome --
    and where it was posted until the store recorded that (the store may not know yet when a
    cancellation lands)."""

    ask_id: str
    record: AskRecord | None
    message: MessageRef | None = None
    kept: bytes = b""
    """Once posted, the record in a compact form, for the one path that needs it without the
    store: the store lost it (:meth:`ChatHandler._vanished` still shows the message ended)."""

    def pack(self) -> None:
        """From now on hold the record and its message only packed (:func:`_pack`): a small
        fraction of their size as models. Done as soon as it is posted, before the message is
        recorded: a wave of calls recording their messages at once would otherwise hold all
        their question sets through that round trip, and the memory they freed after it stays
        in the process, scattered between the waiting calls' own (about 0.9 KB a waiting call
        of four questions, at 10,000 calls started 1,000 at a time)."""
        assert self.record is not None
        self.kept = _pack(self.record, self.message)
        self.record = None

    def vanished(self, destination: Destination) -> AskRecord:
        """The record as this call created it, with its message if posted (the store lost its
        copy)."""
        if self.record is not None:
            return self.record.model_copy(update={"message": self.message})
        return _unpack(self.kept, destination)


def _pack(record: AskRecord, message: MessageRef | None) -> bytes:
    """What :func:`_unpack` needs, as JSON arrays without keys where it can, deflated: 100,000
    waiting calls each keep one for the whole wait, and read it back only if the store lost the
    ask, so its bytes matter and its CPU (tens of microseconds, once) does not. Deflated, it is
    about half the JSON for prose, less for the repetitive option texts of a typical ask; kept as
    JSON text it was the largest thing a waiting call held (1.8-2 KB of its 4.9 KB for four
    questions)."""
    questions = [
        [
            q.question,
            q.header,
            q.multiSelect,
            *(x for o in q.options for x in (o.label, o.description)),
        ]
        for q in record.questions.questions
    ]
    rest = record.model_dump(
        mode="json", exclude={"questions", "destination"}, exclude_defaults=True
    )
    if message is not None:
        rest["message"] = message.model_dump(mode="json")
    text = json.dumps([rest, questions], ensure_ascii=False, separators=(",", ":"))
    return zlib.compress(text.encode(), 9, wbits=-15)  # raw deflate: no header, no checksum


def _unpack(kept: bytes, destination: Destination) -> AskRecord:
    rest, questions = json.loads(zlib.decompress(kept, wbits=-15))
    asked = QuestionSet(
        questions=tuple(
            Question(
                question=q[0],
                header=q[1],
                multiSelect=q[2],
                options=tuple(
                    Option(label=label, description=about)
                    for label, about in zip(q[3::2], q[4::2], strict=True)
                ),
            )
            for q in questions
        )
    )
    return AskRecord.model_validate({**rest, "questions": asked, "destination": destination})


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        n, unit = int(seconds // 3600), "hour"
    elif seconds >= 60 and seconds % 60 == 0:
        n, unit = int(seconds // 60), "minute"
    else:
        return f"{seconds:g} second{'' if seconds == 1 else 's'}"
    return f"{n} {unit}{'' if n == 1 else 's'}"


class ChatHandler:
    """Ask through ``poster`` at ``destination``, keep state in ``store``, follow ``policy``."""

    def __init__(
        self,
        poster: Poster,
        store: Store,
        destination: Destination,
        policy: AskPolicy | None = None,
        *,
        posters: Mapping[str, Poster] | None = None,
        identities: Identities | None = None,
    ) -> None:
        self.poster = poster
        self.store = store
        self.destination = destination
        self.posters = {**(posters or {}), poster.platform: poster}
        """Every platform this handler shows an ask ending on when it ends the ask itself (a
        timeout, a cancellation): its own, and ``posters`` given for an escalation's platform;
        a message on any other is shown ended by a sweeper holding that platform's poster."""
        links = Identities.from_env() if identities is None else identities
        links = links.normalised({name: p.answerer for name, p in self.posters.items()})
        self.policy = check_required(
            policy or AskPolicy(), poster, destination, self.posters, identities=links
        )
        """The policy given, its answerers in the platform's own form (refused here, before
        anything is posted, if it could never be answered)."""

    async def __call__(
        self, questions: Sequence[Question], context: Mapping[str, Any]
    ) -> AskUserAnswered | AskUserDeferred:
        outcome = await self.ask_outcome(list(questions), dict(context))
        if outcome.answered is not None:
            return outcome.answered
        assert outcome.deferred is not None
        return outcome.deferred

    async def ask_outcome(self, questions: list[Question], context: dict[str, Any]) -> ToolOutcome:
        """Ask, and return the outcome with the question set as the store hands it back (the
        :class:`~bridge.tool.ReadsBack` protocol: the tool holds no copy while this waits)."""
        policy = self.policy
        now = time.time()
        record = AskRecord(
            questions=QuestionSet(questions=tuple(questions)),
            destination=self.destination,
            context=context,
            answerers=policy.answerers,
            required=policy.required,
            tell_model_who=policy.tell_model_who,
            follow_ups=policy.follow_ups(self.destination.platform),
            notify=policy.notify,
            created_at=now,
            expires_at=now + policy.expires,
            deferred=policy.mode == "defer",
        )
        del questions, context  # held by the record until the wait starts, then by nothing here
        ask = _Asking(record.id, record)
        await self._create(ask, record)
        metrics.created(record)
        try:
            # one frame from here to the end (a waiting call keeps it for hours)
            ask.message = await self._post(record)
            metrics.posted(record, ask.message)
            if policy.mode == "defer":
                await self._message_posted(record.id, ask.message)
                return self._deferred(record, ask.message)
            ask.pack()  # from here on only the id: the store hands the record back
            del record
            await self._message_posted(ask.ask_id, ask.message)
            ask.message = None  # the store has it: it was recorded
            done = await self.store.wait(ask.ask_id, policy.wait)
            if done is None:
                done = await self._timed_out(ask)
            if done.status is not AskStatus.PENDING:
                await self._show_across_platforms(done)
            if done.status is AskStatus.ANSWERED and done.answers is not None and not done.deferred:
                # taken above: tell the store it is returned (a cancellation landing here releases
                # it to the feed; should this process die first, the sweeper feeds it)
                await self.store.confirm(ask.ask_id)
                metrics.resumed(done)
                answered = AskUserAnswered(
                    answers=done.answers,
                    who=tuple(done.who_answered()),
                    submissions=done.submissions,
                    tell_model=done.tell_model_who,
                    extra={"ask_id": done.id},
                )
                return ToolOutcome(done.questions, done.answers, answered=answered)
        except asyncio.CancelledError:
            # wherever it lands after create -- posting, recording the message, showing,
            # waiting -- the ask must not stay pending with live controls
            await self._cancelled(ask)
            raise
        if done.status is AskStatus.ANSWERED or done.deferred:
            return self._deferred(done, done.message)
        raise NotAnswered(unanswered_text(done.status is AskStatus.EXPIRED), done)

    async def _create(self, ask: _Asking, record: AskRecord) -> None:
        """Store the new ask. A cancellation landing meanwhile (Ctrl-C right after the call
        began) may find the ask already stored, its reply unread: what it made is closed as
        cancelled like any later cancellation, never left pending (the create went out before
        the close does, so the store has it by then; if it never ran, there is nothing to close)."""
        try:
            await self.store.create(record)
        except asyncio.CancelledError:
            await self._cancelled(ask)
            raise

    async def _post(self, record: AskRecord) -> MessageRef:
        """Post the question set; a refusal closes the ask and says so (:class:`PostFailed`)."""
        try:
            return await self.poster.post(record)
        except Exception as exc:
            await self.store.record_event(record.id, "post_failed", error=repr(exc)[:500])
            closed = await self.store.close(record.id, AskStatus.CANCELLED)
            metrics.post_failed(record)
            raise PostFailed(
                f"could not show the questions in {self.destination.platform}: {exc}. "
                "Nobody saw them; continue without the answers or try again later.",
                closed or record,
            ) from exc

    async def _message_posted(self, ask_id: str, message: MessageRef) -> None:
        """Record where the ask was posted. A click right after the post, racing this call,
        found no message to show its effect on, so this process shows it: the final state of
        an ask it ended, or the submissions so far of one several people must agree on (the
        click handler shows every later one itself)."""
        beaten = await self.store.message_posted(ask_id, message)
        if beaten is None:
            return
        if beaten.status is not AskStatus.PENDING:
            await self._show_final(beaten)
            return
        try:
            await self.poster.update(beaten)
        except Exception:
            log.warning("could not show the submissions of ask %s", ask_id, exc_info=True)

    async def _timed_out(self, ask: _Asking) -> AskRecord:
        """The wait ran out: defer (keeping the ask open) or close it as expired."""
        if self.policy.on_timeout == "error":
            closed = await self.store.close(ask.ask_id, AskStatus.EXPIRED)
            if closed is not None:
                metrics.ended(closed)
                await self._show_final(closed)
                raise NotAnswered(
                    f"nobody answered within {_duration(self.policy.wait)}; the questions are "
                    "closed. Continue without the answers, or ask again later if you must.",
                    closed,
                )
        # defer() is atomic with submit: an answer that just landed comes back, taken by us
        current = await self.store.defer(ask.ask_id)
        if current is None:
            await self._vanished(ask)
        if current.status is AskStatus.PENDING:
            return current.model_copy(update={"deferred": True})
        return current

    async def _cancelled(self, ask: _Asking) -> None:
        """Close the ask as cancelled; if it was answered meanwhile, hand the answer to the feed.

        This call returns nothing, so an answer the store already handed to it -- even one its
        ``wait``/``defer`` took just before the cancellation landed, reply unread -- would be lost
        unless released: ``release`` moves it to the feed (only this cleanup calls it, so a call
        that returned the answers never also feeds them). A cancellation that landed before the
        store recorded the message still shows it, from the reference this call holds.
        """
        closed = await self.store.close(ask.ask_id, AskStatus.CANCELLED)
        if closed is None:
            await self.store.release(ask.ask_id)
            return
        metrics.ended(closed)
        if closed.message is None and ask.message is not None:
            closed = closed.model_copy(update={"message": ask.message})
        if closed.message is not None:  # never shown (cancelled while posting): nothing to update
            await self._show_final(closed)

    async def _vanished(self, ask: _Asking) -> NoReturn:
        """The store no longer knows a pending ask this call posted: it lost its data (a Redis
        restarted without persistence, or flushed). Nobody's click can answer it any more, so
        the message this call knows is shown as ended, and the model and the log say why."""
        record = ask.vanished(self.destination)
        log.error(
            "ask %s vanished from the store before anyone answered: the store lost its data "
            "(was Redis restarted without persistence? check appendonly/save)",
            record.id,
        )
        if record.message is not None:
            ended = record.model_copy(update={"status": AskStatus.CANCELLED})
            try:  # not show_final: the store holds nothing to claim
                await self.poster.update(ended)
            except Exception:
                log.warning("could not re-render lost ask %s", record.id, exc_info=True)
        raise NotAnswered(
            "nobody can answer: the bridge's store lost these questions before anyone answered "
            "(its operator should check that Redis keeps its data: appendonly or save). "
            "Continue without the answers, or ask again.",
            record.model_copy(update={"status": AskStatus.CANCELLED}),
        )

    async def _show_across_platforms(self, record: AskRecord) -> None:
        """An ask escalated to another platform ended: the click handler that ended it holds its
        own platform's poster only, and the sweeper shows the rest a render interval later --
        if this process still runs one (without a shared store it stops once the ask ends). So
        this call shows the ending on every message it holds a poster for, unclaimed (the same
        final state again is harmless). Failures are logged: the outcome stands."""
        if len({m.platform for m in record.messages}) < 2:
            return
        for message in record.messages:
            poster = self.posters.get(message.platform)
            if poster is None:
                continue
            try:
                await poster.update(record.model_copy(update={"message": message}))
            except Exception:
                log.warning("could not show ask %s ended in %s", record.id, message.platform)

    async def _show_final(self, record: AskRecord) -> None:
        """Show the final state (once across replicas; failures logged: the outcome stands)."""
        await show_final(self.store, self.posters, record)

    def _deferred(self, record: AskRecord, message: MessageRef | None) -> ToolOutcome:
        metrics.deferred(record)
        extra: dict[str, Any] = {"ask_id": record.id, "expires_at": record.expires_at}
        if record.required > 1:  # the feed's record will hold every submission
            extra["required"] = record.required
        if message is not None:
            extra["message"] = message.model_dump(mode="json")
        return ToolOutcome(questions=record.questions, deferred=AskUserDeferred(extra=extra))
