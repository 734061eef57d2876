"""Claude Agent SDK: answer Claude's built-in ``AskUserQuestion`` through any bridge handler.

Claude Code ships its own question tool, ``AskUserQuestion``, with the same 1-4 question shape as
``ask_user``. The SDK routes it to the host's ``can_use_tool`` callback; the host shows the
questions and allows the call with the original input plus ``answers``: a mapping from question
text to the answer string (the chosen label; several labels joined with ``", "``; the person's own
text as it is). :func:`can_use_tool` builds that callback on top of a bridge handler, so the
questions go to Slack, Discord or the terminal like any ``ask_user`` call::

    options = ClaudeAgentOptions(can_use_tool=can_use_tool(chat_handler))

The SDK cannot defer: the call must be answered or refused while Claude waits. A handler that
defers (or fails, or gets a malformed question set) is reported as a denial whose message Claude
reads -- for a deferral, the instructions to end the turn and wait for the answers in the next
message. Every other tool goes to ``fallback`` (default: allow unchanged).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from claude_agent_sdk import (
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)
from claude_agent_sdk.types import CanUseTool, PermissionResult

from bridge.errors import ToolRejected
from bridge.models import Answer
from bridge.tool import AskUserTool, tools_interactive

ASK_USER_QUESTION = "AskUserQuestion"
"""The name of Claude's built-in question tool."""

MULTI_SEPARATOR = ", "

Callback = Callable[..., Any]

_QUESTION_KEYS = ("question", "header", "options", "multiSelect")
_OPTION_KEYS = ("label", "description")


def _contract_view(questions: Any) -> Any:
    """The question set as ``ask_user`` knows it: fields Claude may add beyond the shared shape
    (previews, metadata) are dropped so they cannot fail validation; anything malformed is kept
    as it is for the validator to name."""
    if not isinstance(questions, list):
        return questions
    view: list[Any] = []
    for q in questions:
        if not isinstance(q, Mapping):
            view.append(q)
            continue
        item = {k: q[k] for k in _QUESTION_KEYS if k in q}
        options = item.get("options")
        if isinstance(options, list):
            item["options"] = [
                {k: o[k] for k in _OPTION_KEYS if k in o} if isinstance(o, Mapping) else o
                for o in options
            ]
        view.append(item)
    return view


def answer_text(answer: Answer) -> str:
    """One answer as ``AskUserQuestion`` expects it: labels joined by ``", "``, then own text."""
    parts = list(answer.selected)
    if answer.other_text:
        parts.append(answer.other_text)
    return MULTI_SEPARATOR.join(parts)


def answers_input(
    tool_input: Mapping[str, Any], answers: tuple[Answer, ...] | list[Answer]
) -> dict[str, Any]:
    """``updated_input`` for an answered ``AskUserQuestion``: the original input plus
    ``answers`` keyed by question text (questions left unanswered are left out)."""
    mapped = {a.question: text for a in answers if (text := answer_text(a))}
    return {**tool_input, "answers": mapped}


async def answer_ask_user_question(
    tool: AskUserTool, tool_input: Mapping[str, Any]
) -> PermissionResult:
    """Ask ``AskUserQuestion``'s questions through ``tool``'s handler and build the SDK result."""
    try:
        outcome = await tool.ainvoke(_contract_view(tool_input.get("questions")))
    except ToolRejected as exc:
        return PermissionResultDeny(message=exc.message)
    if outcome.deferred is not None:
        return PermissionResultDeny(message=outcome.deferred.instructions)
    return PermissionResultAllow(updated_input=answers_input(tool_input, outcome.answers or ()))


def can_use_tool(
    handler: AskUserTool | Callback | None = None,
    *,
    fallback: CanUseTool | None = None,
    context: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
) -> CanUseTool:
    """A ``can_use_tool`` callback that answers ``AskUserQuestion`` through a bridge handler.

    ``handler`` is a core ``ask_user`` tool (from :func:`bridge.tools_interactive`) or a handler
    callback (a ``ChatHandler``, a function); ``None`` uses the process-wide chain. Other tools go
    to ``fallback``, or are allowed unchanged.
    """
    tool = handler if isinstance(handler, AskUserTool) else tools_interactive(handler, context)[0]

    async def decide(
        tool_name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext
    ) -> PermissionResult:
        if tool_name == ASK_USER_QUESTION:
            return await answer_ask_user_question(tool, tool_input)
        if fallback is not None:
            return await fallback(tool_name, tool_input, ctx)
        return PermissionResultAllow()

    return decide


__all__ = [
    "ASK_USER_QUESTION",
    "answer_ask_user_question",
    "answer_text",
    "answers_input",
    "can_use_tool",
]
