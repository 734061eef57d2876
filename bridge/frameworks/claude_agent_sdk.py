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
message.

Every other tool's permission request (Bash, Write, ...) is asked through the *same* handler, as
one two-option question -- "Allow" / "Deny", header "Permission", naming the tool and showing a
bounded, escaped preview of its input -- so a Slack approval flow gets Claude's permission prompts
too. Only a plain "Allow" lets the call run; "Deny", typed words (passed on to Claude), no answer,
a deferral or a failing handler refuse it. Nothing is approved without a person, unless a
``fallback`` is given: then it decides every other tool instead.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any

from claude_agent_sdk import (
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)
from claude_agent_sdk.types import CanUseTool, PermissionResult

from bridge.errors import ToolRejected
from bridge.models import Answer
from bridge.tool import AskContext, AskUserCallback, AskUserTool, as_tool
from bridge.validation import OPTION_FIELDS, QUESTION_FIELDS, shorten

ASK_USER_QUESTION = "AskUserQuestion"
"""The name of Claude's built-in question tool."""

MULTI_SEPARATOR = ", "

PERMISSION_HEADER = "Permission"
ALLOW = "Allow"
DENY = "Deny"
MAX_PREVIEW = 500
"""Characters of a tool's input (as JSON) shown in a permission question."""
MAX_TOOL_NAME = 100


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
        item = {k: q[k] for k in QUESTION_FIELDS if k in q}
        options = item.get("options")
        if isinstance(options, list):
            item["options"] = [
                {k: o[k] for k in OPTION_FIELDS if k in o} if isinstance(o, Mapping) else o
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


def _escaped(text: str) -> str:
    """Control and format characters (escape sequences, bidi overrides) shown escaped."""
    return "".join(
        ch.encode("unicode_escape").decode("ascii")
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")
        else ch
        for ch in text
    )


def _tool_label(tool_name: str) -> str:
    return shorten(_escaped(tool_name), MAX_TOOL_NAME) or "(unnamed tool)"


def _input_preview(tool_input: Mapping[str, Any]) -> str:
    try:
        shown = json.dumps(tool_input, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # circular or absurdly deep: not worth showing
        shown = "(input too deeply nested to show)"
    return shorten(_escaped(shown), MAX_PREVIEW)


def permission_question(tool_name: str, tool_input: Mapping[str, Any]) -> dict[str, Any]:
    """The question asking a person whether Claude may run ``tool_name`` with ``tool_input``."""
    return {
        "question": (
            f"Claude wants to use the tool {_tool_label(tool_name)} with this input:\n"
            f"{_input_preview(tool_input)}\nAllow it?"
        ),
        "header": PERMISSION_HEADER,
        "options": [
            {"label": ALLOW, "description": "Let this tool call run"},
            {"label": DENY, "description": "Refuse it; Claude is told and carries on"},
        ],
        "multiSelect": False,
    }


async def ask_permission(
    tool: AskUserTool, tool_name: str, tool_input: Mapping[str, Any]
) -> PermissionResult:
    """Ask through ``tool``'s handler whether Claude may run ``tool_name``; only a plain "Allow"
    allows, anything else is a denial whose message says why (with the person's own words)."""
    name = _tool_label(tool_name)
    try:
        outcome = await tool.ainvoke([permission_question(tool_name, tool_input)])
    except ToolRejected as exc:
        return PermissionResultDeny(message=f"{name} was not run: {exc.message}")
    if outcome.deferred is not None:
        return PermissionResultDeny(
            message=f"{name} was not run: the person has not answered the permission request "
            "yet. Carry on without it, or end your turn and ask again later."
        )
    answers = outcome.answers or ()  # one answer per question, so one here
    selected = answers[0].selected if answers else ()
    typed = answers[0].other_text if answers else None
    if selected == (ALLOW,) and not typed:
        return PermissionResultAllow()
    if typed:
        return PermissionResultDeny(
            message=f"{name} was not run. The person answered the permission request with: {typed}"
        )
    if selected == (DENY,):
        return PermissionResultDeny(message=f"The person denied permission to use {name}.")
    return PermissionResultDeny(message=f"{name} was not run: the person gave no permission.")


def can_use_tool(
    handler: AskUserTool | AskUserCallback | None = None,
    *,
    fallback: CanUseTool | None = None,
    context: AskContext = None,
) -> CanUseTool:
    """A ``can_use_tool`` callback that answers ``AskUserQuestion`` through a bridge handler.

    ``handler`` is a core ``ask_user`` tool (from :func:`bridge.tools_interactive`) or a handler
    callback (a ``ChatHandler``, a function); ``None`` uses the process-wide chain. Every other
    tool goes to ``fallback`` if given, else is asked as an Allow / Deny question through the
    same handler (see :func:`ask_permission`).
    """
    tool = as_tool(handler, context)

    async def decide(
        tool_name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext
    ) -> PermissionResult:
        if tool_name == ASK_USER_QUESTION:
            return await answer_ask_user_question(tool, tool_input)
        if fallback is not None:
            return await fallback(tool_name, tool_input, ctx)
        return await ask_permission(tool, tool_name, tool_input)

    return decide


__all__ = [
    "ALLOW",
    "ASK_USER_QUESTION",
    "DENY",
    "PERMISSION_HEADER",
    "answer_ask_user_question",
    "answer_text",
    "answers_input",
    "ask_permission",
    "can_use_tool",
    "permission_question",
]
