"""What the console prints: the console's markup.

An ask is announced once (:func:`announcement`, the poster's message); each question then shows
its header, its text and its numbered options with their descriptions (:func:`question`), just
before the line that reads its answer, whose prompt is the hint (:func:`prompt`). A question asked
again shows the same, with what was wrong in the bridge's words. An ended ask shows its outcome
line (:func:`outcome`, the bridge's :class:`~bridge.presentation.Shown`).

Text from the model reaches the terminal only through :func:`clean`: validation already refuses
control characters in a question set, and the format characters it accepts (bidi overrides,
isolates) are shown escaped instead of acting on the terminal.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from typing import TextIO

from bridge.models import Question
from bridge.presentation import Shown
from bridge.record import AskRecord
from bridge.replies import Replies
from bridge.text import one_line

HINT_SINGLE = "enter a number, or type your own answer"
HINT_MULTI = "enter numbers separated by commas, or type your own answer"

SHOWN_TEXT = 300
"""Characters of a label or typed answer an outcome line shows (:attr:`Replies.text`)."""


def clean(text: str) -> str:
    """Model text made safe for a terminal: control and format characters (escape sequences,
    bidi overrides) are shown escaped instead of acting on the terminal."""
    return "".join(
        ch
        if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf")
        else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


REPLIES = Replies(mention=lambda _: "you", text=lambda text: clean(one_line(text)[:SHOWN_TEXT]))
"""The bridge's words at the terminal: the only person who can answer is the one at the
keyboard, so every mention of them is "you"."""


@dataclass(frozen=True)
class Style:
    """Escape sequences for bold and dim text, empty where the terminal should not get them."""

    bold: str = ""
    dim: str = ""
    reset: str = ""

    @classmethod
    def of(cls, stream: TextIO) -> Style:
        """Styled on a terminal that takes it (not ``TERM=dumb``, no ``NO_COLOR``)."""
        styled = (
            stream.isatty()
            and "NO_COLOR" not in os.environ
            and os.environ.get("TERM", "dumb") != "dumb"
        )
        return cls("\033[1m", "\033[2m", "\033[0m") if styled else cls()


def announcement(record: AskRecord) -> str:
    """The ask's message: that questions wait, and how many."""
    count = len(record.questions.questions)
    noun = "a question" if count == 1 else f"{count} questions"
    return f"\nThe agent has {noun} for you.\n"


def question(q: Question, index: int, count: int, style: Style, problem: str | None) -> str:
    """Question ``index`` (from 0) of ``count``: its header, text and numbered options, and
    ``problem`` (the bridge's words for what was wrong with its last answer) when it is asked
    again."""
    bold, dim, reset = style.bold, style.dim, style.reset
    place = f" ({index + 1} of {count})" if count > 1 else ""
    kind = ", choose any" if q.multiSelect else ""
    lines = [
        "",
        f"{bold}[{clean(q.header)}]{reset}{dim}{place}{kind}{reset}",
        f"{bold}{clean(q.question)}{reset}",
    ]
    width = len(str(len(q.options)))
    for n, option in enumerate(q.options, 1):
        label, about = clean(option.label), clean(option.description)
        lines.append(f"  {n:>{width}}. {label}{dim} - {about}{reset}")
    if problem is not None:
        lines.append(problem)
    return "\n".join(lines) + "\n"


def prompt(q: Question) -> str:
    """What the line reading ``q``'s answer starts with: how to answer it at a keyboard."""
    hint = HINT_MULTI if q.multiSelect else HINT_SINGLE
    return f"{hint[0].upper()}{hint[1:]}: "


def outcome(record: AskRecord, style: Style) -> str | None:
    """An ended ask's outcome line; ``None`` while it is pending."""
    line = Shown(record).outcome(REPLIES)
    return None if line is None else f"\n{style.dim}{line}{style.reset}\n"
