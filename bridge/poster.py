"""The interface a chat platform implements to show asks to people.

The engine calls :meth:`Poster.post` once per ask and :meth:`Poster.update` whenever the ask ends
(answered, expired, cancelled) so the message shows the outcome and no live controls -- and, for an
ask that needs several people, whenever a submission is recorded, so the pending message lists
them. Clicks come back the other way: the platform's interaction handler calls the store directly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from bridge.record import AskRecord, MessageRef


class Poster(ABC):
    platform: str

    @abstractmethod
    async def post(self, record: AskRecord) -> MessageRef:
        """Show the question set at ``record.destination``; return where it went."""

    @abstractmethod
    async def update(self, record: AskRecord) -> None:
        """Re-render the posted message for the record's current status (final, or pending with
        the submissions of an ask that needs several people)."""

    def individual(self, answerer: str) -> bool:
        """Whether ``answerer`` (an id of ``AskPolicy.answerers``) names one person on this
        platform, not a group. An ask naming only individuals, fewer than it requires to agree,
        could never be answered, and is refused before it is posted. ``False`` (the default)
        when the platform cannot tell."""
        return False
