"""Slack's own ids: modal callback and block ids, and what a modal carries in ``private_metadata``.

Buttons carry the platform-neutral routing ids of :mod:`bridge.routing` as their ``action_id``;
this module holds only what Slack's modals add. Like the routing ids, they carry the ask id and
indices, never visible text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from bridge import routing

ACTION_PATTERN = re.compile(rf"^{re.escape(routing.PREFIX)}:")
"""Every action id of ours: matched after each kind's own template
(:data:`bridge.routing.TEMPLATES`), it takes the malformed ones, so a forged or stale one is
explained."""
FORM_CALLBACK = "askb:form"
OTHER_CALLBACK = "askb:other"

# Block and action ids inside our modals; state.values is keyed by these.
PICK_ACTION = "pick"
TEXT_ACTION = "text"

_QUESTION_BLOCK = re.compile(r"^q([0-9]{1,2})(?:\.|$)")


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
        if not isinstance(data, dict) or not routing.ASK_ID.match(str(data.get("a", ""))):
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
