"""What an ask's message shows, on every platform: the rules, once; each platform adds its markup.

A platform's markup (``platforms/slack/markup.py``, ``platforms/discord/markup.py``) decides only
how things look -- Block Kit or embeds, its escaping, its limits and the numbers that keep a message
within them. What goes into the message, and how it is shrunk until it fits, is decided here; when
a posted message is shown again is :mod:`bridge.showing`'s:

* **What shows per status** (:class:`Shown`): while pending, each question with its options and
  their descriptions, the answerers named (:data:`~bridge.replies.MAX_ANSWERERS_SHOWN` and a count
  of the rest), the controls, and for an ask several people must agree on its approvals so far;
  once answered, each question with the chosen labels and the typed answer instead of its options;
  once ended any other way, the options without descriptions (the store drops them once settled).
  An ended message shows its outcome and no controls.
* **Levels of cuts** (:class:`Caps`, :func:`first_fit`): a message is built at the most generous
  of a platform's levels whose result the platform takes, and at its last level, which fits by
  arithmetic on the caps alone, when none before it does (or at once when asked, to retry after a
  refusal nobody documents). Every platform's levels keep the same order: descriptions (and on
  Slack typed answers) are cut first, then question texts and labels, a little more at each level;
  the tests hold each platform's levels to it.
* **Cutting one text** (:func:`longest_beginning`, :func:`shown_once`): the longest beginning of a
  text whose shown form fits a cap, by halving, on the text as shown -- cleaned once for the
  up to six levels a message may be tried at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from bridge.answering import one_click
from bridge.models import Answer, Question
from bridge.record import AskRecord, AskStatus
from bridge.replies import MAX_ANSWERERS_SHOWN, Replies
from bridge.text import one_line, shown

M = TypeVar("M")

NOTHING_CHOSEN = "—"
"""An answered question's answer that holds neither a choice nor typed text (shown, not empty)."""


@dataclass(frozen=True)
class Caps:
    """Display limits for one rendering attempt, each in the platform's own unit of text size
    (Slack: the cost of the escaped text in its JSON; Discord: UTF-16 units)."""

    question: int
    label: int
    description: int
    other: int
    """A typed answer's."""


def first_fit(
    levels: Sequence[Caps],
    build: Callable[[Caps], M],
    fits: Callable[[M], bool],
    *,
    tightest: bool = False,
) -> M:
    """``build`` at the first of ``levels`` whose result ``fits``; at the last level without
    asking -- the platform proves by arithmetic that it fits whatever the record -- when none
    before it does, or at once with ``tightest`` (a retry after the platform refused a
    rendering for a reason nobody documents)."""
    tried = levels[-1:] if tightest else levels
    for caps in tried[:-1]:
        built = build(caps)
        if fits(built):
            return built
    return build(tried[-1])


def longest_beginning(most: int, fits: Callable[[int], bool]) -> int:
    """The largest count of characters, ``most`` at most, for which ``fits(count)`` holds,
    found by halving: ``fits`` must hold for 0 and, once false, stay false for every larger count
    (the size of a text's beginning grows with it)."""
    kept, over = 0, most
    while kept < over:
        middle = (kept + over + 1) // 2
        if fits(middle):
            kept = middle
        else:
            over = middle - 1
    return kept


shown_once = lru_cache(maxsize=512)(shown)
"""What a platform shows of a text (:func:`bridge.text.shown`), kept for the texts seen last: a
message is tried at up to six levels of cuts, each fitting the same texts, and making one visible
takes a pass over its characters."""


@dataclass(frozen=True)
class Markup:
    """How a platform writes the texts of a question's part of a message."""

    cut: Callable[[str, int], str]
    """A text from the model or a teammate made safe for the platform and cut to a cap."""
    bold: str
    """What surrounds a bold label (``*`` in Slack's mrkdwn, ``**`` in Discord's Markdown)."""
    typed: str
    """A typed answer's line, ``{}`` standing for its cut text."""


@dataclass(frozen=True)
class Shown:
    """What the message of ``record`` shows in its current status, before any markup."""

    record: AskRecord

    @property
    def pending(self) -> bool:
        """Still answerable: options described, answerers named, controls and approvals shown."""
        return self.record.status is AskStatus.PENDING

    @property
    def verb(self) -> str:
        """How the asker is introduced: ``asks`` while pending, ``asked`` after."""
        return "asks" if self.pending else "asked"

    @property
    def one_click(self) -> bool:
        """Controls are one button per option (and ``Other…``) rather than an ``Answer`` form."""
        return self.pending and one_click(self.record.questions)

    @property
    def form(self) -> bool:
        """Controls are one ``Answer`` button opening a form."""
        return self.pending and not one_click(self.record.questions)

    def answerers(self, mention: Callable[[str], str]) -> str | None:
        """While pending, the answerers named -- the first
        :data:`~bridge.replies.MAX_ANSWERERS_SHOWN`, ``mention`` ed, and a count of the rest --
        or ``None`` (anyone may answer, or the ask has ended)."""
        answerers = self.record.answerers
        if not answerers or not self.pending:
            return None
        named = [mention(a) for a in answerers[:MAX_ANSWERERS_SHOWN]]
        more = len(answerers) - len(named)
        return ", ".join(named) + (f" and {more} more" if more > 0 else "")

    def body(self, index: int, caps: Caps, markup: Markup) -> str:
        """What follows question ``index``'s text: once answered its answer, else its options,
        described while pending."""
        answers = self.record.answers or ()
        if self.record.status is AskStatus.ANSWERED and index < len(answers):
            return answer_text(answers[index], caps, markup)
        question = self.record.questions.questions[index]
        return options_text(question, caps, markup, described=self.pending)

    def approvals(self, replies: Replies) -> list[str]:
        """While pending, the lines of an ask several people must agree on
        (:meth:`~bridge.replies.Replies.approvals`); none once ended."""
        return replies.approvals(self.record) if self.pending else []

    def outcome(self, replies: Replies) -> str | None:
        """Once ended, the outcome line (:meth:`~bridge.replies.Replies.outcome`); ``None`` while
        pending."""
        return None if self.pending else replies.outcome(self.record)


def options_text(question: Question, caps: Caps, markup: Markup, *, described: bool) -> str:
    """The options, a line each: the label in bold, with its description while the ask is
    pending (``described``; an ended ask is shown without them, and its store drops them once
    settled)."""
    b = markup.bold
    lines = []
    for o in question.options:
        line = f"• {b}{markup.cut(one_line(o.label), caps.label)}{b}"
        if described:
            line += f" — {markup.cut(one_line(o.description), caps.description)}"
        lines.append(line)
    return "\n".join(lines)


def answer_text(answer: Answer, caps: Caps, markup: Markup) -> str:
    """An answer: the chosen labels in bold on one line, the typed text on the next."""
    b = markup.bold
    lines = []
    if answer.selected:
        labels = ", ".join(f"{b}{markup.cut(one_line(s), caps.label)}{b}" for s in answer.selected)
        lines.append(f"✅ {labels}")
    if answer.other_text:
        lines.append(markup.typed.format(markup.cut(one_line(answer.other_text), caps.other)))
    return "\n".join(lines) or NOTHING_CHOSEN
