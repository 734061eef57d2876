"""Routing ids: how a click or a modal finds its ask, question and option.

Only the ask id and indices travel in ``action_id``, ``value``, ``callback_id`` and
``private_metadata``, never visible text: labels may be cut for display, while the answer is built
from the stored question set by index and keeps the full label. Every id fits Slack's 255 limit.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal, cast

PREFIX = "askb"

ActionKind = Literal["pick", "other", "answer"]
INDICES: dict[ActionKind, int] = {"pick": 2, "other": 1, "answer": 0}
"""Every action kind, and how many indices follow the ask id in its action id: ``pick``
(question, option) answers with one click, ``other`` (question) and ``answer`` open a modal."""

ACTION_PATTERN = re.compile(rf"^{PREFIX}:({'|'.join(INDICES)}):")
FORM_CALLBACK = "askb:form"
OTHER_CALLBACK = "askb:other"

# Block and action ids inside our modals; state.values is keyed by these.
PICK_ACTION = "pick"
TEXT_ACTION = "text"

_ASK_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_QUESTION_BLOCK = re.compile(r"^q([0-9]+)(?:\.|$)")


def pick_action(ask_id: str, question: int, option: int) -> str:
    return f"{PREFIX}:pick:{ask_id}:{question}:{option}"


def other_action(ask_id: str, question: int) -> str:
    return f"{PREFIX}:other:{ask_id}:{question}"


def answer_action(ask_id: str) -> str:
    return f"{PREFIX}:answer:{ask_id}"


def header_block(question: int) -> str:
    return f"q{question}.text"


def pick_block(question: int) -> str:
    return f"q{question}.pick"


def text_block(question: int) -> str:
    return f"q{question}.other"


def block_question(block_id: str) -> int | None:
    """The question index of one of our modal blocks (``q{i}.…``), or ``None``."""
    found = _QUESTION_BLOCK.match(block_id)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Route:
    kind: ActionKind
    ask_id: str
    question: int = 0
    option: int = 0


def parse_action(action_id: str) -> Route | None:
    """The route an action id encodes, or ``None`` if it is not one of ours or is malformed."""
    parts = action_id.split(":")
    if len(parts) < 3 or parts[0] != PREFIX or not _ASK_ID.match(parts[2]):
        return None
    kind, ask_id, rest = cast(ActionKind, parts[1]), parts[2], parts[3:]
    if INDICES.get(kind) != len(rest) or not all(
        p.isascii() and p.isdigit() and len(p) < 3 for p in rest
    ):
        return None
    return Route(kind, ask_id, *(int(p) for p in rest))


@dataclass(frozen=True)
class ModalMeta:
    """What a modal carries in ``private_metadata``: the ask, where to reply, which question.

    The channel and thread let the bridge explain a refusal with an ephemeral message even when
    the store is unreachable.
    """

    ask_id: str
    channel: str | None = None
    thread: str | None = None
    question: int | None = None

    def dump(self) -> str:
        data = {"a": self.ask_id, "c": self.channel, "t": self.thread, "q": self.question}
        return json.dumps({k: v for k, v in data.items() if v is not None}, separators=(",", ":"))

    @classmethod
    def load(cls, raw: str | None) -> ModalMeta | None:
        try:
            data = json.loads(raw or "")
        except ValueError:
            return None
        if not isinstance(data, dict) or not _ASK_ID.match(str(data.get("a", ""))):
            return None
        question = data.get("q")
        return cls(
            ask_id=str(data["a"]),
            channel=_str_or_none(data.get("c")),
            thread=_str_or_none(data.get("t")),
            question=question if isinstance(question, int) else None,
        )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None
