"""Routing ids: how a click finds its ask, question and option, on every platform.

A control's id (Slack ``action_id``, Discord ``custom_id``) carries only the ask id and indices,
never visible text: labels may be cut for display, while the answer is built from the stored
question set by index and keeps the full label. Every id fits in :data:`MAX_ID` characters
(Discord's ``custom_id`` limit; Slack allows 255), so one encoding serves both.

``askb:pick:<ask>:<question>:<option>``  one click answers a single-select question
``askb:other:<ask>:<question>``          opens the typed-answer form for one question
``askb:answer:<ask>``                    opens the form for the whole question set
``askb:next:<ask>:<choices>``            the next step of a form in several steps
``askb:web:<ask>``                       gives the person their own link to answer in the browser

A form that takes several steps (Discord's modals hold five components, so three or four questions
take two) carries the person's choices so far from one step to the next in the ``next`` id,
instead of any process or the store keeping them: ``<choices>`` has one character per question, a
base-32 digit whose bits 0-3 are the chosen option indices and bit 4 a wish to type an answer as
well. So a step works after a restart and on any replica.

:data:`TEMPLATES` are the same formats as patterns, one per kind of control, and
:data:`MALFORMED` every other id in our namespace: a platform that dispatches by pattern (Bolt's
action matchers, discord.py's dynamic items) routes each kind to its own handler and a forged or
stale id to one that explains it, and each id matches exactly one of them. :func:`parse` reads
the id itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bridge.models import MAX_OPTIONS

PREFIX = "askb"
MAX_ID = 100
"""Longest id any platform accepts (Discord ``custom_id``)."""

Kind = Literal["pick", "other", "answer", "web"]
INDICES: dict[Kind, int] = {"pick": 2, "other": 1, "answer": 0, "web": 0}
"""Every kind of control, and how many indices follow the ask id in its id."""

_ASK = "[A-Za-z0-9_-]{1,64}"
_NUMBER = "[0-9]{1,2}"
ASK_ID = re.compile(rf"^{_ASK}$")
"""What an ask id may look like (``new_ask_id`` makes 22 such characters)."""
_INDEX = re.compile(rf"^{_NUMBER}$")


class BadRoute(ValueError):
    """An id in our namespace (``askb:``) that does not parse: forged, truncated or from a
    version of the bridge that encoded it differently. The person is told; nothing changes."""


@dataclass(frozen=True)
class Route:
    kind: Kind
    ask_id: str
    question: int = 0
    option: int = 0


def pick_id(ask_id: str, question: int, option: int) -> str:
    return _checked(f"{PREFIX}:pick:{ask_id}:{question}:{option}")


def other_id(ask_id: str, question: int) -> str:
    return _checked(f"{PREFIX}:other:{ask_id}:{question}")


def answer_id(ask_id: str) -> str:
    return _checked(f"{PREFIX}:answer:{ask_id}")


def web_id(ask_id: str) -> str:
    return _checked(f"{PREFIX}:web:{ask_id}")


def is_ours(control_id: str) -> bool:
    return control_id.startswith(f"{PREFIX}:")


@dataclass(frozen=True)
class Choice:
    """One question's part of a form in progress: chosen option indices, and whether the person
    still wants to type an answer (``Other…``)."""

    selected: frozenset[int] = frozenset()
    typed: bool = False


@dataclass(frozen=True)
class Step:
    """A ``next`` id: the ask and the person's choices so far, one per question."""

    ask_id: str
    choices: tuple[Choice, ...]


_DIGITS = "0123456789abcdefghijklmnopqrstuv"
_TYPED = 1 << MAX_OPTIONS


def next_id(ask_id: str, choices: tuple[Choice, ...]) -> str:
    digits = "".join(_DIGITS[_mask(c)] for c in choices)
    return _checked(f"{PREFIX}:next:{ask_id}:{digits}")


def _mask(choice: Choice) -> int:
    bits = sum(1 << o for o in choice.selected if 0 <= o < MAX_OPTIONS)
    return bits | (_TYPED if choice.typed else 0)


def _choice(mask: int) -> Choice:
    selected = frozenset(o for o in range(MAX_OPTIONS) if mask & (1 << o))
    return Choice(selected, typed=bool(mask & _TYPED))


def parse(control_id: str) -> Route | Step | None:
    """The route or form step ``control_id`` encodes; ``None`` if it is not one of ours.

    Raises :class:`BadRoute` for an id of ours that is malformed (unknown kind, bad ask id,
    missing, extra, negative or non-ASCII indices, bad choices)."""
    if not is_ours(control_id):
        return None
    parts = control_id.split(":")
    if len(parts) >= 2 and parts[1] == "next":
        return _step(control_id, parts)
    if len(parts) < 3 or parts[1] not in INDICES or not ASK_ID.match(parts[2]):
        raise BadRoute(f"malformed control id {control_id[:MAX_ID]!r}")
    kind = next(k for k in INDICES if k == parts[1])
    ask_id, rest = parts[2], parts[3:]
    if INDICES[kind] != len(rest) or not all(_INDEX.match(p) for p in rest):
        raise BadRoute(f"malformed control id {control_id[:MAX_ID]!r}")
    return Route(kind, ask_id, *(int(p) for p in rest))


def _step(control_id: str, parts: list[str]) -> Step:
    if len(parts) != 4 or not ASK_ID.match(parts[2]):
        raise BadRoute(f"malformed control id {control_id[:MAX_ID]!r}")
    digits = parts[3]
    if not 1 <= len(digits) <= 4 or any(d not in _DIGITS for d in digits):
        raise BadRoute(f"malformed control id {control_id[:MAX_ID]!r}")
    return Step(parts[2], tuple(_choice(_DIGITS.index(d)) for d in digits))


TEMPLATES: dict[str, re.Pattern[str]] = {
    "pick": re.compile(rf"{PREFIX}:pick:(?P<ask>{_ASK}):(?P<q>{_NUMBER}):(?P<o>{_NUMBER})"),
    "other": re.compile(rf"{PREFIX}:other:(?P<ask>{_ASK}):(?P<q>{_NUMBER})"),
    "answer": re.compile(rf"{PREFIX}:answer:(?P<ask>{_ASK})"),
    "next": re.compile(rf"{PREFIX}:next:(?P<ask>{_ASK}):(?P<choices>[{_DIGITS}]{{1,4}})"),
    "web": re.compile(rf"{PREFIX}:web:(?P<ask>{_ASK})"),
}
"""Each kind of control's id, whole (for ``re.fullmatch``), by kind."""
_ANY = "|".join(re.sub(r"\(\?P<\w+>", "(?:", t.pattern) for t in TEMPLATES.values())
MALFORMED = re.compile(rf"(?!(?:{_ANY})\Z){PREFIX}:.*", re.DOTALL)
"""Every id of ours that no template matches whole: forged, truncated, or from another
version of the bridge (for ``re.fullmatch``)."""


def whole(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """``pattern`` anchored at both ends, for a matcher that searches (Bolt's)."""
    return re.compile(rf"\A(?:{pattern.pattern})\Z", pattern.flags)


def index(value: object) -> int:
    """A form field's option index as sent (a string of one or two ASCII digits); anything else
    becomes ``-1``, which judging refuses as out of range."""
    text = value if isinstance(value, str) else ""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 3 else -1


def _checked(control_id: str) -> str:
    if len(control_id) > MAX_ID:  # only a foreign, overlong ask id can get here
        raise ValueError(f"control id longer than {MAX_ID} characters: {control_id!r}")
    return control_id
