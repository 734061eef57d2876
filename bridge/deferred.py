"""Deferral: the tool call returns at once and the answers arrive as the next user message."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

DEFAULT_INSTRUCTIONS = (
    "The questions are now shown to the person, who will answer them later. End your turn now "
    "with at most one short sentence saying you are waiting for their answers. Do not answer the "
    "questions yourself and do not assume any choice: the person's answers will arrive in the "
    "next message."
)


@dataclass(frozen=True)
class AskUserDeferred:
    """Returned by a handler to defer: the model ends its turn; answers come in the next message.

    ``instructions`` is what the model reads. ``extra`` is for the host only (an ask id, a message
    link): it never reaches the model's tool result. The host finds it on
    ``ToolOutcome.deferred.extra`` -- ``outcome = await tool.ainvoke(questions)`` (or sync
    ``tool.invoke``) -- and, through framework adapters, in each framework's own metadata slot.
    """

    instructions: str = DEFAULT_INSTRUCTIONS
    extra: Mapping[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise ValueError("AskUserDeferred.instructions must be a non-empty string")
        if self.extra is not None:
            object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))
