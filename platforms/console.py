"""The terminal prompt: ask the person at the keyboard, the handler of last resort.

``bridge`` finds this through the ``ask_bridge.platforms`` entry point ``console`` when no handler
is configured and stdin and stdout are a TTY. It reads the real terminal (``sys.stdin``) and is a
plain sync handler, so the tool runs it in a worker thread when called from async code and the
event loop keeps running while the person thinks.

Per question: header and question, numbered options with descriptions, and a hint. A number (or,
for multiSelect, numbers separated by commas) selects options; a number that matches no option, or
a line that shows nothing (empty, spaces, only invisible characters: :func:`bridge.text.blank`),
asks again; any other text is the person's own answer (``other_text``), kept as
:func:`bridge.text.typed` keeps a typed answer in a chat.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import unicodedata
from typing import Any, TextIO

from bridge.models import Answer, Question
from bridge.text import typed

HINT_SINGLE = "enter a number, or type your own answer"
HINT_MULTI = "enter numbers separated by commas, or type your own answer"

_NUMBERS = re.compile(r"[+-]?\d+(?:\s*[,\s]\s*[+-]?\d+)*")
"""A number or a list of them, signs allowed: "-1" is a number matching no option (ask again),
not the person's own answer."""


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
        while True:
            out.flush()
            line = typed(self._read(f"{hint[0].upper()}{hint[1:]}: "))
            if line is None:
                out.write(f"Please answer: {hint}.\n")
                continue
            if not _NUMBERS.fullmatch(line):
                return Answer(question=q.question, other_text=line)
            numbers = sorted({int(n) for n in re.split(r"[,\s]+", line)})
            wrong = [n for n in numbers if not 1 <= n <= len(q.options)]
            if wrong:
                listed = ", ".join(map(str, wrong))
                out.write(
                    f"There is no option {listed}: choose from 1 to {len(q.options)}, or type "
                    "your own answer.\n"
                )
                continue
            if len(numbers) > 1 and not q.multiSelect:
                out.write("This question takes one option: enter a single number.\n")
                continue
            selected = tuple(q.options[n - 1].label for n in numbers)
            return Answer(question=q.question, selected=selected)

    @staticmethod
    def _read(prompt: str) -> str:
        try:
            return input(prompt)
        except EOFError:
            raise RuntimeError("the terminal closed before the person answered") from None


platform = ConsolePlatform()
"""The entry point ``ask_bridge.platforms: console``."""
