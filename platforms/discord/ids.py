"""Discord's own ids: the form-step button, and the fields inside our modals.

Buttons on the ask message carry the platform-neutral routing ids of :mod:`bridge.routing`
(``pick``, ``other``, ``answer``). A form of three or four questions takes two steps (see
:mod:`platforms.discord.render`); between them the person's choices travel in the ``custom_id`` of
the ``Next`` / ``Submit`` button on an ephemeral message only they see::

    askb:next:<ask>:<choices>

``<choices>`` has one character per question, a base-32 digit: bits 0-3 are the chosen option
indices (at most 4 options), bit 4 asks for a typed answer (``Other…``) as well. Nothing is kept
in any process, so the step works after a restart and on any replica or shard.

A modal's ``custom_id`` is the id of the control that opened it, so a submission is routed the same
way: ``answer`` (the form), ``other`` (one typed answer), ``next`` (the typed-answer step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bridge import routing
from bridge.models import MAX_OPTIONS

CONTROL = re.compile(rf"{re.escape(routing.PREFIX)}:.*", re.DOTALL)
"""Every custom_id of ours, malformed ones included, so a forged or stale one is explained."""

_DIGITS = "0123456789abcdefghijklmnopqrstuv"
_TYPED = 1 << MAX_OPTIONS
TYPED_FOR = "typed"
"""The form's checkbox group: for which multiSelect questions to type an answer as well."""


def pick_field(question: int) -> str:
    return f"q{question}"


def text_field(question: int) -> str:
    return f"t{question}"


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


def next_id(ask_id: str, choices: tuple[Choice, ...]) -> str:
    digits = "".join(_DIGITS[_mask(c)] for c in choices)
    control_id = f"{routing.PREFIX}:next:{ask_id}:{digits}"
    if len(control_id) > routing.MAX_ID:  # only a foreign, overlong ask id can get here
        raise ValueError(f"control id longer than {routing.MAX_ID} characters: {control_id!r}")
    return control_id


def _mask(choice: Choice) -> int:
    bits = sum(1 << o for o in choice.selected if 0 <= o < MAX_OPTIONS)
    return bits | (_TYPED if choice.typed else 0)


def parse(custom_id: str) -> routing.Route | Step | None:
    """The route or step ``custom_id`` encodes; ``None`` if it is not ours. Raises
    :class:`~bridge.routing.BadRoute` for a malformed id of ours."""
    parts = custom_id.split(":")
    if len(parts) >= 2 and parts[0] == routing.PREFIX and parts[1] == "next":
        if len(parts) != 4 or not routing.ASK_ID.match(parts[2]):
            raise routing.BadRoute(f"malformed control id {custom_id[: routing.MAX_ID]!r}")
        digits = parts[3]
        if not 1 <= len(digits) <= 4 or any(d not in _DIGITS for d in digits):
            raise routing.BadRoute(f"malformed control id {custom_id[: routing.MAX_ID]!r}")
        return Step(parts[2], tuple(_choice(_DIGITS.index(d)) for d in digits))
    return routing.parse(custom_id)


def _choice(mask: int) -> Choice:
    selected = frozenset(o for o in range(MAX_OPTIONS) if mask & (1 << o))
    return Choice(selected, typed=bool(mask & _TYPED))
