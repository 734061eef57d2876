"""Claude Agent SDK: the ``can_use_tool`` helper maps AskUserQuestion onto a bridge handler.

Called directly with the SDK's real types (no CLI): the callback receives what Claude Code sends
for AskUserQuestion and must return the SDK's permission result with ``answers`` keyed by question
text, as the SDK documents (labels; several joined with ", "; typed text as it is).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)

from bridge import Answer, AskUserDeferred, Question, tools_interactive
from bridge.frameworks.claude_agent_sdk import can_use_tool

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "claude_agent_permissions.py"
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


# -- every other tool: a permission question through the same handler ---------------------------


class Approver:
    """A handler that answers permission questions with ``reply`` and records what it saw."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.seen: list[list[Question]] = []

    def __call__(self, questions: list[Question], context: dict[str, Any]) -> Any:
        self.seen.append(questions)
        return self.reply if not callable(self.reply) else self.reply(questions)


async def test_other_tools_are_asked_through_the_same_handler_as_allow_or_deny() -> None:
    approver = Approver(lambda qs: {qs[0].question: "Allow"})
    result = await can_use_tool(approver)("Bash", {"command": "rm -rf build/"}, CTX)
    assert isinstance(result, PermissionResultAllow)
    assert result.updated_input is None  # runs with Claude's input unchanged

    [[question]] = approver.seen
    assert question.header == "Permission"
    assert not question.multiSelect
    assert question.option_labels() == ["Allow", "Deny"]
    assert "Bash" in question.question
    assert '{"command": "rm -rf build/"}' in question.question


async def test_deny_is_a_denial_claude_reads() -> None:
    result = await can_use_tool(Approver(lambda qs: {qs[0].question: "Deny"}))(
        "Write", {"file_path": "/etc/hosts"}, CTX
    )
    assert isinstance(result, PermissionResultDeny)
    assert "The person denied permission to use Write" in result.message
    assert result.interrupt is False


@pytest.mark.parametrize("labels", [[], ["Deny"], ["Allow"]])
async def test_typed_text_denies_and_carries_the_persons_words(labels: list[str]) -> None:
    """Only a plain "Allow" approves; typed words (even next to Allow) go back to Claude."""
    words = "not on main, use a branch"
    reply = Approver(lambda qs: {qs[0].question: [*labels, words]})
    result = await can_use_tool(reply)("Bash", {"command": "git push"}, CTX)
    assert isinstance(result, PermissionResultDeny)
    assert "Bash was not run" in result.message
    assert words in result.message


async def test_no_answer_deferral_or_handler_error_denies() -> None:
    unanswered = await can_use_tool(Approver({}))("Bash", {"command": "ls"}, CTX)
    assert isinstance(unanswered, PermissionResultDeny)
    assert "Bash was not run" in unanswered.message

    deferred = await can_use_tool(Approver(AskUserDeferred(extra={"ask_id": "a1"})))(
        "Bash", {"command": "ls"}, CTX
    )
    assert isinstance(deferred, PermissionResultDeny)
    assert "has not answered the permission request yet" in deferred.message

    def broken(qs: Any, ctx: Any) -> Any:
        raise ConnectionError("Slack unreachable")

    failed = await can_use_tool(broken)("Bash", {"command": "ls"}, CTX)
    assert isinstance(failed, PermissionResultDeny)
    assert "Bash was not run" in failed.message
    assert "Slack unreachable" in failed.message


async def test_the_permission_preview_is_bounded_and_escaped() -> None:
    approver = Approver(lambda qs: {qs[0].question: "Deny"})
    hostile = {"content": "\x1b[2J\u202e" + "x" * 100_000, "path": "a\nb"}
    await can_use_tool(approver)("Write\x07" + "W" * 1000, hostile, CTX)
    [[question]] = approver.seen
    text = question.question
    assert len(text) < 1_000
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "\\u001b[2J" in text and "\\u202e" in text  # shown escaped, not acting
    assert text.count("x") < 600


async def test_fallback_still_decides_other_tools() -> None:
    calls: list[tuple[str, dict[str, Any]]] = []

    async def fallback(name: str, data: dict[str, Any], ctx: ToolPermissionContext) -> Any:
        calls.append((name, data))
        return PermissionResultAllow()

    approver = Approver({})
    allowed = await can_use_tool(approver, fallback=fallback)("Write", {"p": 1}, CTX)
    assert isinstance(allowed, PermissionResultAllow)
    assert calls == [("Write", {"p": 1})]
    assert approver.seen == []


async def test_options_hold_a_callback_asking_both_kinds_through_one_handler() -> None:
    def handler(questions: list[Question], context: dict[str, Any]) -> Any:
        return {q.question: q.options[0].label for q in questions}  # first option: "Allow"

    options = ClaudeAgentOptions(can_use_tool=can_use_tool(handler))
    assert options.can_use_tool is not None
    answered = await options.can_use_tool("AskUserQuestion", INPUT, CTX)
    assert isinstance(answered, PermissionResultAllow)
    assert answered.updated_input is not None
    assert answered.updated_input["answers"]["Which database?"] == "Postgres"
    assert isinstance(await options.can_use_tool("Bash", {}, CTX), PermissionResultAllow)


async def test_example_runs() -> None:
    spec = importlib.util.spec_from_file_location("claude_agent_sdk_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    updated = await module.demo()
    assert updated["answers"] == {"Which database should the service use?": "Postgres"}
