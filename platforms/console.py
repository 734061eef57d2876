"""The terminal prompt: ask the person at the keyboard, the handler of last resort.

``bridge`` finds this through the ``ask_bridge.platforms`` entry point ``console`` when no handler
is configured and stdin and stdout are a TTY. It reads the real terminal (``sys.stdin``) and is a
plain sync handler, so the tool runs it in a worker thread when called from async code and the
event loop keeps running while the person thinks.

Like every platform it is a payload parser and markup over bridge's rules, and holds no rule of
its own. The payload is a typed line: :func:`parse` makes it the question's
:class:`~bridge.judging.Picks` -- a number (or, for multiSelect, numbers separated by commas or
spaces, signs allowed) picks options, any other line is the person's own answer
(``other_text``). :func:`bridge.judging.form_problems` judges the picks exactly as it judges a
chat's form (a line that shows nothing, a number that matches no option, several numbers for a
single-select question, a typed answer over :data:`~bridge.judging.MAX_TYPED` characters), the
console words the problem and asks again, and :func:`bridge.judging.form_answers` builds the
answer, so labels and typed text (:func:`bridge.text.typed`) are kept as in a chat. The markup
is the printed prompt: header and question, numbered options with descriptions, and a hint.

It does not go through :mod:`bridge.clicks`: that protocol exists for a click that arrives
later, in a platform's event loop, about an ask held in a store (timing, acks, late telling,
showing the new state on a message). Here nothing is stored and nothing arrives later: the
process that asks reads the answer from its own terminal and returns it to the waiting call.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import unicodedata
from typing import Any, TextIO

from bridge.judging import MAX_TYPED, FormProblem, Picks, form_answers, form_problems
from bridge.models import Answer, Question, QuestionSet
from bridge.text import typed

HINT_SINGLE = "enter a number, or type your own answer"
HINT_MULTI = "enter numbers separated by commas, or type your own answer"

_NUMBERS = re.compile(r"[+-]?\d+(?:\s*[,\s]\s*[+-]?\d+)*")
"""A number or a list of them, signs allowed: "-1" is a number matching no option (ask again),
not the person's own answer."""


def parse(line: str) -> Picks:
    """A typed line as one question's picks: the options its numbers name (from 1 on the
    screen, so index ``n - 1``, as typed: judging finds the ones that match no option), or, when
    it is not a list of numbers, the line itself as typed text (judged and kept by
    :func:`bridge.judging.typed_text`, which also finds a line that shows nothing). Numbers are
    read from what the person saw (:func:`bridge.text.typed`): "2" followed by a zero-width
    space is the number 2."""
    shown = typed(line)
    if shown is not None and _NUMBERS.fullmatch(shown):
        return Picks(selected=tuple(int(n) - 1 for n in re.split(r"[,\s]+", shown)))
    return Picks(text=line)


def clean(text: str) -> str:
    """Model text made safe for a terminal: control and format characters (escape sequences,
    bidi overrides) are shown escaped instead of acting on the terminal."""
    return "".join(
        ch
        if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf")
        else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


def _styled(stream: TextIO) -> bool:
    return (
        stream.isatty()
        and "NO_COLOR" not in os.environ
        and os.environ.get("TERM", "dumb") != "dumb"
    )


class ConsolePlatform:
    """The terminal as a platform: :attr:`callback` asks at the keyboard. It has no chat channel,
    so it is not a :class:`bridge.platform.Platform` (no poster, no serve loop): ``ask`` and
    ``serve`` refuse it by name."""

    name = "console"

    def __init__(self) -> None:
        # One prompt at a time: concurrent asks in one process wait their turn for the keyboard.
        self._lock = threading.Lock()

    def callback(self, questions: list[Question], context: dict[str, Any]) -> list[Answer]:
        """The handler: ask every question on the terminal and return the answers."""
        with self._lock:
            out = sys.stdout
            count = len(questions)
            noun = "a question" if count == 1 else f"{count} questions"
            out.write(f"\nThe agent has {noun} for you.\n")
            return [self._ask(q, i, count, out) for i, q in enumerate(questions, 1)]

    def _ask(self, q: Question, index: int, count: int, out: TextIO) -> Answer:
        bold, dim, reset = ("\033[1m", "\033[2m", "\033[0m") if _styled(out) else ("", "", "")
        place = f" ({index} of {count})" if count > 1 else ""
        kind = ", choose any" if q.multiSelect else ""
        out.write(f"\n{bold}[{clean(q.header)}]{reset}{dim}{place}{kind}{reset}\n")
        out.write(f"{bold}{clean(q.question)}{reset}\n")
        width = len(str(len(q.options)))
        for n, option in enumerate(q.options, 1):
            out.write(f"  {n:>{width}}. {clean(option.label)}{dim} - {clean(option.description)}")
            out.write(f"{reset}\n")
        hint = HINT_MULTI if q.multiSelect else HINT_SINGLE
        one = QuestionSet(questions=(q,))
        while True:
            out.flush()
            picks = parse(self._read(f"{hint[0].upper()}{hint[1:]}: "))
            problem = form_problems(one, {0: picks}).get(0)
            if problem is None:
                return form_answers(one, {0: picks})[0]
            out.write(_words(problem, q, picks, hint) + "\n")

    @staticmethod
    def _read(prompt: str) -> str:
        try:
            return input(prompt)
        except EOFError:
            raise RuntimeError("the terminal closed before the person answered") from None


def _words(problem: FormProblem, q: Question, picks: Picks, hint: str) -> str:
    """A problem judging found with a typed line, in the console's words (the numbers as the
    person typed them, from 1), and what to do instead."""
    match problem:
        case FormProblem.NEED_ANSWER:
            return f"Please answer: {hint}."
        case FormProblem.NO_SUCH_OPTION:
            wrong = sorted({o + 1 for o in picks.selected if not 0 <= o < len(q.options)})
            listed = ", ".join(map(str, wrong))
            return (
                f"There is no option {listed}: choose from 1 to {len(q.options)}, or type your "
                "own answer."
            )
        case FormProblem.ONE_ONLY:
            return "This question takes one option: enter a single number."
        case FormProblem.TOO_LONG:
            number = "numbers" if q.multiSelect else "a number"
            return f"Your answer is too long: keep it to {MAX_TYPED} characters, or enter {number}."
        case FormProblem.NO_SUCH_QUESTION | FormProblem.NOT_BOTH:
            # parse() gives one question's options or its text, never both, and the console
            # judges one question at a time: neither can be found.
            raise AssertionError(f"judging found {problem} in a typed line")


platform = ConsolePlatform()
"""The entry point ``ask_bridge.platforms: console``."""
