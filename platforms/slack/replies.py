"""What a person is told, privately, when their click does not (or cannot) answer the ask."""

from __future__ import annotations

from bridge.ask import AskRecord, AskStatus
from bridge.store.base import SubmitOutcome
from platforms.slack.render import MAX_ANSWERERS_SHOWN, answered_by
from platforms.slack.text import mention

TRY_AGAIN = (
    "The bridge can't reach its store right now, so nothing was saved: try again in a moment."
)
GONE = "This question is no longer open."
RECORDED = "Your answer is already recorded."
NEED_ANSWER = "Choose an option or type your own answer."
NOT_BOTH = (
    "Choose an option or type your own answer, not both: clear this field to keep your choice."
)


def refusal(outcome: SubmitOutcome, record: AskRecord | None) -> str | None:
    """The explanation for a submission that did not answer the ask; ``None`` if it did."""
    if outcome is SubmitOutcome.ACCEPTED:
        return None
    if outcome is SubmitOutcome.REPEATED:
        return RECORDED
    if record is None or outcome is SubmitOutcome.NOT_FOUND:
        return GONE
    if outcome is SubmitOutcome.NOT_ALLOWED:
        return not_allowed(record)
    return ended(record) or GONE


def ended(record: AskRecord) -> str | None:
    """Why an ask can no longer be answered, or ``None`` while it is pending."""
    if record.status is AskStatus.ANSWERED:
        return f"This was already {answered_by(record)}."
    if record.status is AskStatus.EXPIRED:
        return "This question expired before anyone answered it."
    if record.status is AskStatus.CANCELLED:
        return "This question was cancelled."
    return None


def not_allowed(record: AskRecord) -> str:
    names = ", ".join(mention(a) for a in record.answerers[:MAX_ANSWERERS_SHOWN])
    return f"Sorry, you can't answer this one: it is for {names}."
