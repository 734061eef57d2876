"""What people are told: refusals sent privately, and the outcome line an ended message shows.

The words are the same on every platform; only how a user or group is mentioned differs, so a
platform builds one :class:`Replies` with its ``mention`` (Slack ``<@U…>`` / ``<!subteam^S…>``,
Discord ``<@…>`` / ``<@&…>``). ``mention`` must return markup that is safe on its platform for any
id (an id that does not look like one is shown as inert text).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bridge.record import AskRecord, AskStatus

MAX_ANSWERERS_SHOWN = 10
"""Answerers named on a message or in a refusal; the rest are counted or left out."""

TRY_AGAIN = (
    "The bridge can't reach its store right now, so nothing was saved: try again in a moment."
)
GONE = "This question is no longer open."
RECORDED = "Your answer is already recorded."
NEED_ANSWER = "Choose an option or type your own answer."
NOT_BOTH = (
    "Choose an option or type your own answer, not both: clear this field to keep your choice."
)
ONE_ONLY = "Choose only one option for this question."
NO_SUCH_OPTION = "That option is not one of this question's options; reopen the question."
NO_SUCH_QUESTION = "That is not one of the questions asked; reopen the question."
TOO_LONG = "Your answer is too long: keep it under {limit} characters."
BAD_CONTROL = "That control does not belong to this question; reopen the question."


def asker(record: AskRecord) -> str:
    """Who asks, as the message names them: the context's ``asker`` or ``agent``, on one line
    (raw: each platform fits and escapes it)."""
    name = record.context.get("asker") or record.context.get("agent") or "An agent"
    return " ".join(str(name).split())


@dataclass(frozen=True)
class Replies:
    """Refusal and outcome texts, with the platform's way of mentioning an answerer."""

    mention: Callable[[str], str]

    def not_allowed(self, record: AskRecord) -> str:
        shown = record.answerers[:MAX_ANSWERERS_SHOWN]
        names = ", ".join(self.mention(a) for a in shown)
        more = len(record.answerers) - len(shown)
        if more > 0:
            names += f" and {more} more"
        return f"Sorry, you can't answer this one: it is for {names}."

    def answered_by(self, record: AskRecord) -> str:
        """``answered by <mention>`` (``answered`` when nobody is recorded): the ended message's
        outcome line and the explanation a late click gets say it the same way."""
        who = record.answered_by.user_id if record.answered_by else None
        return f"answered by {self.mention(who)}" if who else "answered"

    def ended(self, record: AskRecord) -> str | None:
        """Why an ask can no longer be answered, or ``None`` while it is pending."""
        if record.status is AskStatus.ANSWERED:
            return f"This was already {self.answered_by(record)}."
        if record.status is AskStatus.EXPIRED:
            return "This question expired before anyone answered it."
        if record.status is AskStatus.CANCELLED:
            return "This question was cancelled."
        return None

    def outcome(self, record: AskRecord) -> str:
        """The line an ended message shows under its questions."""
        if record.status is AskStatus.ANSWERED:
            text = self.answered_by(record)
            return text[0].upper() + text[1:]
        if record.status is AskStatus.EXPIRED:
            return "⌛ Expired without an answer."
        if record.status is AskStatus.CANCELLED:
            return "🚫 Cancelled."
        return ""
