"""What people are told: refusals sent privately, the outcome line an ended message shows, and
reminders.

The words are the same on every platform; only how a user or group is mentioned, and how text
from the model or a teammate is made safe, differ, so a platform builds one :class:`Replies` with
its ``mention`` (Slack ``<@U…>`` / ``<!subteam^S…>``, Discord ``<@…>`` / ``<@&…>``) and its
``text``. ``mention`` must return markup that is safe on its platform for any id (an id that does
not look like one is shown as inert text); ``text`` must escape and bound any text.

Asks that need several people (``required`` K >= 2) also show, while pending, how many must agree
and the latest submissions (:meth:`Replies.approvals`), and tell each person privately what was
recorded and how many more agreeing people are needed (:meth:`Replies.recorded`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bridge.models import Answer
from bridge.record import AskRecord, AskStatus, Submission

MAX_ANSWERERS_SHOWN = 10
"""Answerers named on a message or in a refusal; the rest are counted or left out."""
MAX_SUBMISSIONS_SHOWN = 10
"""Submissions a pending message lists (the latest); the earlier ones are counted."""
TYPED_NEVER_COUNTS = "typed answers are shown but never count toward agreement"
WITHDRAWN = "withdrawn: no longer allowed to answer"
"""How a submission shows once its person lost the authority that admitted it."""

TRY_AGAIN = (
    "The bridge can't reach its store right now, so nothing was saved: try again in a moment."
)
"""Only when that is certain: the store operation never reached the store, and never will."""
MAYBE_SAVED = (
    "The bridge lost touch with its store while saving this, so your answer may have been "
    "saved: look at the message before you answer again."
)
"""When the operation was sent and no reply came: it may have run."""
GONE = "This question is no longer open."
RECORDED = "Your answer is already recorded."
NEED_ANSWER = "Choose an option or type your own answer."
NOT_BOTH = (
    "Choose an option or type your own answer, not both: clear this field to keep your choice."
)
ONE_ONLY = "Choose only one option for this question."
NO_SUCH_OPTION = "That option is not one of this question's options: choose one of those shown."
NO_SUCH_QUESTION = "That is not one of the questions asked: answer the questions shown."
TOO_LONG = "Your answer is too long: keep it under {limit} characters."
BAD_CONTROL = "That control does not belong to this question; reopen the question."
NOT_OPENED = "The form could not be opened: click the button again."
"""The platform refused to show the form for this click (Slack's ``trigger_id`` or Discord's
interaction expired, or already used): the button still works, and a new click is a new chance."""


def to_remind(record: AskRecord) -> tuple[str, ...]:
    """The answerers a reminder mentions: all of them, but on an ask several people must agree on
    (``required`` K >= 2) not the people named who have already submitted -- their submission
    stands, and what is missing is the others'.

    A group stays mentioned even when some of its members have submitted: the bridge cannot tell
    which of its members have not (that would take a membership lookup per reminder, and Discord
    roles need a privileged intent to list), and those who have not are the very people the
    reminder is for; the members who submitted are nudged once more, which is the lesser harm.
    Empty when every person named has submitted and no group is named: then nobody is nudged by
    name (the ask still waits on one of them changing their answer)."""
    submitted = {s.user_id for s in record.submissions}
    return tuple(a for a in record.answerers if a not in submitted)


def asker(record: AskRecord) -> str:
    """Who asks, as the message names them: the context's ``asker`` or ``agent``, on one line
    (raw: each platform fits and escapes it)."""
    name = record.context.get("asker") or record.context.get("agent") or "An agent"
    return " ".join(str(name).split())


@dataclass(frozen=True)
class Replies:
    """Refusal and outcome texts, with the platform's way of mentioning an answerer."""

    mention: Callable[[str], str]
    text: Callable[[str], str]
    """Text from the model or a teammate (labels, typed answers) made safe on the platform: one
    line, escaped, bounded."""

    def not_allowed(self, record: AskRecord) -> str:
        shown = record.answerers[:MAX_ANSWERERS_SHOWN]
        names = ", ".join(self.mention(a) for a in shown)
        more = len(record.answerers) - len(shown)
        if more > 0:
            names += f" and {more} more"
        return f"Sorry, you can't answer this one: it is for {names}."

    def answered_by(self, record: AskRecord) -> str:
        """``answered by <mention>`` (``answered`` when nobody is recorded; with K >= 2, every
        agreeing person): the ended message's outcome line and the explanation a late click gets
        say it the same way."""
        who = [s.user_id for s in record.who_answered()]
        if not who:
            return "answered"
        return "answered by " + self._names(who)

    def _names(self, user_ids: list[str]) -> str:
        shown = [self.mention(u) for u in user_ids[:MAX_ANSWERERS_SHOWN]]
        more = len(user_ids) - len(shown)
        if more > 0:
            return ", ".join(shown) + f" and {more} more"
        return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]

    # -- asks that need several people ---------------------------------------------------------

    def choice(self, answers: tuple[Answer, ...]) -> str:
        """What a submission chose, on one line: each question's labels (``, ``) and typed text
        (quoted), questions apart with ``; ``; made safe by :attr:`text`."""
        parts = []
        for a in answers:
            part = ", ".join(a.selected)
            if a.other_text is not None:
                typed = f"“{' '.join(a.other_text.split())}”"
                part = f"{part} + {typed}" if part else typed
            parts.append(part or "—")
        return self.text("; ".join(parts))

    def needs(self, record: AskRecord) -> str:
        """The pending message's rule line."""
        k = record.required
        return f"Needs {k} approvals: the same choice from {k} people ({TYPED_NEVER_COUNTS})."

    def submission(self, record: AskRecord, sub: Submission) -> str:
        """One submission as the pending message lists it: ``1 of 2: <mention> chose <labels>``
        (how many agree with it of how many are needed), or a typed or withdrawn one, which
        never counts."""
        who = self.mention(sub.user_id)
        if sub.withdrawn:
            return f"{who} chose {self.choice(sub.answers)} ({WITHDRAWN})"
        if sub.typed:
            return f"{who} answered {self.choice(sub.answers)} (typed: doesn't count)"
        agree = len(record.agreeing(sub.answers))
        return f"{agree} of {record.required}: {who} chose {self.choice(sub.answers)}"

    def approvals(self, record: AskRecord) -> list[str]:
        """The lines a pending ask needing several people shows: the rule, then the latest
        :data:`MAX_SUBMISSIONS_SHOWN` submissions (oldest first) after a count of earlier ones.
        Empty for a one-person ask."""
        if record.required < 2:
            return []
        lines = [self.needs(record)]
        subs = record.submissions
        earlier = len(subs) - MAX_SUBMISSIONS_SHOWN
        if earlier > 0:
            lines.append(f"… and {earlier} earlier submission{'s' if earlier > 1 else ''}")
        lines += [self.submission(record, s) for s in subs[-MAX_SUBMISSIONS_SHOWN:]]
        return lines

    def recorded(self, record: AskRecord, user_id: str, *, again: bool = False) -> str:
        """What a person is told privately once their submission to a pending ask needing
        several people is recorded (``again``: it already was): what they chose, and how many
        more agreeing people are needed."""
        mine = next((s for s in record.submissions if s.user_id == user_id), None)
        first = "Your answer is already recorded" if again else "Your answer is recorded"
        if mine is None:
            return first + "."
        k = record.required
        if mine.typed:
            return (
                f"{first}: {self.choice(mine.answers)}. It is shown, but {TYPED_NEVER_COUNTS}: "
                f"choose options (without typing) for it to count toward the {k} approvals needed."
            )
        agree = len(record.agreeing(mine.answers))
        return (
            f"{first}: {self.choice(mine.answers)}. So far {agree} of {k} agree on it: "
            f"{k - agree} more needed."
        )

    def ended(self, record: AskRecord) -> str | None:
        """Why an ask can no longer be answered, or ``None`` while it is pending."""
        if record.status is AskStatus.ANSWERED:
            return f"This was already {self.answered_by(record)}."
        if record.status is AskStatus.EXPIRED:
            return "This question expired before anyone answered it."
        if record.status is AskStatus.CANCELLED:
            return "This question was cancelled."
        return None

    def reminder(self, record: AskRecord, n: int, *, asker: str, since: str, here: str) -> str:
        """Reminder ``n`` (:mod:`bridge.followups`): who may answer and has not yet
        (:func:`to_remind`; nobody once every person named has submitted) -- or ``here``, the
        platform's way to reach the channel's people, when anyone may answer (may be empty) --
        and that the question from ``asker`` (already escaped by the platform) still waits,
        ``since`` when (the platform's timestamp markup)."""
        named = to_remind(record)
        shown = named[:MAX_ANSWERERS_SHOWN]
        if shown:
            who = ", ".join(self.mention(a) for a in shown)
        else:
            who = "" if record.answerers else here
        more = len(named) - len(shown)
        if more > 0:
            who += f" and {more} more"
        times = record.follow_ups.remind_times if record.follow_ups is not None else 1
        count = f" (reminder {n} of {times})" if times > 1 else ""
        lead = f"{who}: the" if who else "The"
        return f"⏰ {lead} question from {asker} still waits for an answer, since {since}.{count}"

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
