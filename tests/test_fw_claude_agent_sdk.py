"""Claude Agent SDK: the ``can_use_tool`` helper maps AskUserQuestion onto a bridge handler.

Called directly with the SDK's real types (no CLI): the callback receives what Claude Code sends
for AskUserQuestion and must return the SDK's permission result with ``answers`` keyed by question
text, as the SDK documents (labels; several joined with ", "; typed text as it is).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from bridge import Answer, AskUserDeferred, Question, tools_interactive
from bridge.frameworks.claude_agent_sdk import can_use_tool

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "claude_agent_sdk.py"
CTX = ToolPermissionContext(tool_use_id="toolu_01")

INPUT: dict[str, Any] = {
    "questions": [
        {
            "question": "Which database?",
            "header": "Database",
            "options": [
                {"label": "Postgres", "description": "Relational", "preview": "extra"},
                {"label": "SQLite", "description": "One file"},
            ],
            "multiSelect": False,
        },
        {
            "question": "Which extras?",
            "header": "Extras",
            "options": [
                {"label": "Auth", "description": "Login"},
                {"label": "Cache", "description": "Redis cache"},
                {"label": "Metrics", "description": "Prometheus"},
            ],
            "multiSelect": True,
        },
        {
            "question": "Deploy where?",
            "header": "Deploy",
            "options": [
                {"label": "Fly", "description": "Fly.io"},
                {"label": "AWS", "description": "Amazon"},
            ],
            "multiSelect": False,
        },
    ],
    "metadata": {"source": "claude"},
}


async def test_answers_keyed_by_question_text() -> None:
    seen: list[list[Question]] = []

    async def handler(questions: list[Question], context: dict[str, Any]) -> Any:
        seen.append(questions)
        return {
            "Which database?": "SQLite",
            "Which extras?": ["Metrics", "Auth", "and tracing"],
            "Deploy where?": "my own servers",
        }

    decide = can_use_tool(handler)
    result = await decide("AskUserQuestion", INPUT, CTX)

    assert isinstance(result, PermissionResultAllow)
    assert result.updated_input == {
        **INPUT,
        "answers": {
            "Which database?": "SQLite",
            "Which extras?": "Auth, Metrics, and tracing",
            "Deploy where?": "my own servers",
        },
    }
    # The handler saw the shared shape, with Claude-only fields dropped.
    assert [q.question for q in seen[0]] == ["Which database?", "Which extras?", "Deploy where?"]
    assert seen[0][1].multiSelect is True


async def test_unanswered_question_is_left_out() -> None:
    decide = can_use_tool(
        lambda qs, ctx: [Answer(question="Which database?", selected=("Postgres",))]
    )
    result = await decide("AskUserQuestion", INPUT, CTX)
    assert isinstance(result, PermissionResultAllow)
    assert result.updated_input is not None
    assert result.updated_input["answers"] == {"Which database?": "Postgres"}


async def test_accepts_a_bridge_tool() -> None:
    tool = tools_interactive(lambda qs, ctx: {q.question: q.options[1].label for q in qs})[0]
    result = await can_use_tool(tool)("AskUserQuestion", INPUT, CTX)
    assert isinstance(result, PermissionResultAllow)
    assert result.updated_input is not None
    assert result.updated_input["answers"] == {
        "Which database?": "SQLite",
        "Which extras?": "Cache",
        "Deploy where?": "AWS",
    }


async def test_malformed_questions_are_denied_with_the_fix_message() -> None:
    bad = {"questions": [{"question": "Q?", "header": "A header far too long", "options": []}]}
    result = await can_use_tool(lambda qs, ctx: {})("AskUserQuestion", bad, CTX)
    assert isinstance(result, PermissionResultDeny)
    assert "ask_user call was rejected" in result.message
    assert "questions[0].header" in result.message
    assert result.interrupt is False


async def test_handler_failure_is_denied_readably() -> None:
    def handler(qs: Any, ctx: Any) -> Any:
        raise ConnectionError("Slack unreachable")

    result = await can_use_tool(handler)("AskUserQuestion", INPUT, CTX)
    assert isinstance(result, PermissionResultDeny)
    assert result.message == "could not get the person's answer: Slack unreachable"


async def test_deferral_is_denied_with_the_instructions() -> None:
    deferred = AskUserDeferred(instructions="Wait: answers come later.", extra={"ask_id": "a1"})
    result = await can_use_tool(lambda qs, ctx: deferred)("AskUserQuestion", INPUT, CTX)
    assert isinstance(result, PermissionResultDeny)
    assert result.message == "Wait: answers come later."


async def test_other_tools_allowed_or_sent_to_fallback() -> None:
    decide = can_use_tool(lambda qs, ctx: {})
    allowed = await decide("Bash", {"command": "ls"}, CTX)
    assert isinstance(allowed, PermissionResultAllow)
    assert allowed.updated_input is None

    calls: list[tuple[str, dict[str, Any]]] = []

    async def fallback(name: str, data: dict[str, Any], ctx: ToolPermissionContext) -> Any:
        calls.append((name, data))
        return PermissionResultDeny(message="not here")

    denied = await can_use_tool(lambda qs, ctx: {}, fallback=fallback)("Write", {"p": 1}, CTX)
    assert isinstance(denied, PermissionResultDeny)
    assert calls == [("Write", {"p": 1})]


def test_plugs_into_claude_agent_options() -> None:
    options = ClaudeAgentOptions(can_use_tool=can_use_tool(lambda qs, ctx: {}))
    assert options.can_use_tool is not None


async def test_example_runs() -> None:
    spec = importlib.util.spec_from_file_location("claude_agent_sdk_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    updated = await module.demo()
    assert updated["answers"] == {"Which database should the service use?": "Postgres"}
