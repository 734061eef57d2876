"""The interface a chat platform implements to show asks to people: the post step of
ask -> post -> click -> resolve -> show (:mod:`bridge.asking` posts; :mod:`bridge.showing` shows
an ask's new state again through :meth:`Poster.update`).

The engine calls :meth:`Poster.post` once per ask (and once more at an escalation's destination)
and :meth:`Poster.update` on each of its messages whenever the ask ends (answered, expired,
cancelled) so every message shows the outcome and no live controls -- and, for an ask that needs
several people, whenever a submission is recorded, so the pending message lists them. The sweeper
calls :meth:`Poster.remind` for each reminder (:mod:`bridge.followups`). Clicks come back the other
way: the platform's receiver parses them and hands them to :mod:`bridge.clicks`.

A platform may still refuse a rendering its markup believes fits (a limit nobody documents,
such as the size of a Slack message's blocks): :meth:`Poster.tightening` is the one rule for
that, shared by every platform -- one line in the log naming the platform's error, one more try
at the tightest level of cuts, then the failure as before (the asker is told nobody saw it).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from bridge.record import AskRecord, MessageRef
from bridge.text import one_line

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class AnswererIds:
    """How a platform writes the ids of the people and groups who may answer an ask."""

    own_form: Callable[[str], str | None]
    """An id as given, in the platform's own form (trimmed, cased as the platform writes it),
    or ``None`` when it cannot be one (:meth:`Poster.answerer`)."""
    individual: Callable[[str], bool]
    """Whether an id (in its own form) names one person, not a group (:meth:`Poster.individual`)."""


class Poster(ABC):
    platform: str

    def refusal(self, error: Exception) -> str | None:
        """The platform's own words when ``error`` is its refusal of a rendering's shape or size
        (Slack's ``invalid_blocks``, Discord's 400 "Invalid Form Body"); ``None`` for anything
        else (a network failure, a missing permission), which a tighter rendering cannot mend.
        This default, for a platform that cannot tell, recognises none."""
        return None

    async def tightening(
        self, record: AskRecord, what: str, attempt: Callable[[bool], Awaitable[T]]
    ) -> T:
        """``attempt(False)`` -- a rendering at the most generous level that fits -- and, if the
        platform refuses it (:meth:`refusal`), one line in the log and ``attempt(True)``, the
        tightest level, once. A refusal of that one too is raised as any failure is, so a post
        ends as "nobody saw the questions" and an update is left for the sweeper to retry.
        Only a refusal is retried: nothing was shown, so a second try cannot show it twice."""
        try:
            return await attempt(False)
        except Exception as exc:
            why = self.refusal(exc)
            if why is None:
                raise
        log.warning(
            "ask %s: %s refused its %s (%s); trying once more at the tightest cuts",
            record.id,
            self.platform,
            what,
            one_line(why)[:300],
        )
        return await attempt(True)

    @abstractmethod
    async def post(self, record: AskRecord) -> MessageRef:
        """Show the question set at ``record.destination``; return where it went."""

    @abstractmethod
    async def update(self, record: AskRecord) -> None:
        """Show the record's current status on its posted message ``record.message``
        (final, or pending with the submissions of an ask that needs several people); the caller
        passes a copy naming each message of the ask in turn."""

    answerer_rule: str = ""
    """What this platform's answerer ids look like, in words, for a refusal of one that is not
    (:meth:`answerer`); empty when it cannot tell."""

    answerer_ids: ClassVar[AnswererIds | None] = None
    """How this platform writes its answerer ids, when it can tell (:meth:`answerer` and
    :meth:`individual` follow it)."""

    def answerer(self, answerer: str) -> str | None:
        """``answerer`` (an id given for ``AskPolicy.answerers``) in this platform's own form --
        trimmed, cased as the platform writes its ids -- or ``None`` when it cannot be the id of
        a person or group here. Two spellings of one id become one, so an ask counts the people
        it names (``required``), lets them answer (the platform's clicks carry its own form) and
        reminds each once. This default, for a platform that cannot tell (no
        :attr:`answerer_ids`), only trims."""
        if self.answerer_ids is not None:
            return self.answerer_ids.own_form(answerer)
        return answerer.strip() or None

    def individual(self, answerer: str) -> bool:
        """Whether ``answerer`` (an id of ``AskPolicy.answerers``) names one person on this
        platform, not a group. An ask naming only individuals, fewer than it requires to agree,
        could never be answered, and is refused before it is posted. ``False`` (the default)
        when the platform cannot tell (no :attr:`answerer_ids`)."""
        return self.answerer_ids is not None and self.answerer_ids.individual(answerer)

    async def remind(self, record: AskRecord, n: int) -> None:
        """Post reminder ``n`` as a reply to ``record.message`` (in its thread): it mentions who
        may answer and has not yet (:func:`bridge.replies.to_remind`) -- or the channel's people
        when anyone may -- and says the question still waits, and since when
        (:meth:`bridge.replies.Replies.reminder`), notifying nobody else. A platform that cannot
        reply raises ``NotImplementedError`` (the sweeper logs it)."""
        raise NotImplementedError(f"{self.platform} cannot post reminders")
