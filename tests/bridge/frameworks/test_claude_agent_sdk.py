"""Claude Agent SDK: the ``can_use_tool`` helper maps AskUserQuestion onto a bridge handler.

Called directly with the SDK's real types (no CLI): the callback receives what Claude Code sends
for AskUserQuestion and must return the SDK's permission result with ``answers`` keyed by question
text, as the SDK documents (labels; several joined with ", "; typed text as it is).

Deferral through ``defer_hooks``: the SDK's ``query()`` / ``ClaudeSDKClient`` run end to end over
its control protocol against the scripted Claude Code of ``scripted_claude.py`` (no CLI, no
model): "defer" stops the run, and resuming the session replays the call. The same against the
real CLI: ``tests/platforms/slack/test_agents_claude.py`` and the examples' runs.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookContext,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    ToolPermissionContext,
    query,
)

from bridge import Answer, AskUserDeferred, Question, QuestionSet, tools_interactive
from bridge.asking import AskPolicy, ChatHandler
from bridge.frameworks.claude_agent_sdk import (
    ONE_CALL_A_TURN,
    ask_ids,
    can_use_tool,
    defer_hooks,
    resume_options,
)
from bridge.memory_poster import MemoryPoster
from bridge.record import AskRecord, AskStatus, Destination, Responder
from bridge.store.base import Delivery
from bridge.store.memory import MemoryStore
from tests.support.scripted_claude import ASKED, QUESTION, ScriptedClaudeCode

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


# -- deferral the SDK's way: a PreToolUse hook answering "defer", resumed from the feed ---------

HOOK_CTX: HookContext = {"signal": None}


def pre_tool_use(tool_input: dict[str, Any], tool_name: str = "AskUserQuestion") -> Any:
    return {
        "hook_event_name": "PreToolUse", "session_id": "s1", "transcript_path": "", "cwd": "",
        "tool_name": tool_name, "tool_input": tool_input, "tool_use_id": "toolu_9",
    }  # fmt: skip


def the_hook(options: ClaudeAgentOptions) -> Any:
    assert options.hooks is not None
    [matcher] = options.hooks["PreToolUse"]
    assert matcher.matcher == "AskUserQuestion"
    [hook] = matcher.hooks
    return hook


async def run_to_result(claude: Any, options: ClaudeAgentOptions) -> ResultMessage:
    messages = [m async for m in query(prompt="Plan.", options=options, transport=claude(options))]
    assert isinstance(messages[-1], ResultMessage)
    return messages[-1]


async def resume_to_result(claude: Any, options: ClaudeAgentOptions) -> ResultMessage:
    async with ClaudeSDKClient(options, transport=claude(options)) as client:
        messages = [m async for m in client.receive_response()]
    assert isinstance(messages[-1], ResultMessage)
    return messages[-1]


async def test_defer_stops_the_run_and_the_feed_resumes_the_same_session() -> None:
    """ChatHandler in defer mode posts the question; the hook answers "defer", so the run stops
    with the call in deferred_tool_use; a teammate answers through the store; the feed's delivery
    resumes the same session, the replayed call is allowed with the answers, and Claude goes on."""
    claude = ScriptedClaudeCode()
    store, poster = MemoryStore(), MemoryPoster()
    handler = ChatHandler(
        poster, store, Destination(platform="memory", channel="C1"), AskPolicy(mode="defer")
    )
    options = ClaudeAgentOptions(hooks=defer_hooks(handler))

    stopped = await run_to_result(claude, options)
    assert stopped.stop_reason == "tool_deferred" and stopped.result == ""
    assert stopped.deferred_tool_use is not None
    assert stopped.deferred_tool_use.id == "toolu_1"
    assert claude.decisions == [{"hookEventName": "PreToolUse", "permissionDecision": "defer"}]
    posted = await poster.next_post()
    assert ask_ids(options, stopped) == {posted.id: "toolu_1"}

    question = QUESTION["question"]
    answer = Answer(question=question, selected=("Summary",))
    assert (await store.submit(posted.id, Responder(user_id="U1"), [answer])).ok
    feed = store.feed("agent")
    assert isinstance(feed, AsyncGenerator)
    delivery = await asyncio.wait_for(anext(feed), timeout=10)
    assert delivery.record.id == posted.id

    resumed = resume_options(options, stopped, delivery)
    assert resumed.resume == stopped.session_id and options.resume is None
    done = await resume_to_result(claude, resumed)
    await store.ack(delivery)
    await feed.aclose()
    assert done.session_id == stopped.session_id  # the same session, not a new one
    assert done.result == "Writing them as: Summary"
    assert claude.decisions[1] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "allow",
        "updatedInput": {**ASKED, "answers": {question: "Summary"}},
    }
    assert len(poster.posts) == 1  # asked once; the replay did not ask again


def _record(status: AskStatus, answers: tuple[Answer, ...] | None, ask_id: str) -> AskRecord:
    return AskRecord(
        id=ask_id,
        questions=QuestionSet.model_validate(ASKED),
        destination=Destination(platform="memory"),
        expires_at=time.time() + 60,
        status=status,
        deferred=True,
        answers=answers,
    )


def deferring(ask_id: str) -> Any:
    return lambda qs, ctx: AskUserDeferred(extra={"ask_id": ask_id})


async def test_resumed_in_another_process_and_an_expired_ask_is_denied_with_the_reason() -> None:
    claude = ScriptedClaudeCode()
    first = ClaudeAgentOptions(hooks=defer_hooks(deferring("ask-9")))
    stopped = await run_to_result(claude, first)
    kept = ask_ids(first, stopped)
    assert kept == {"ask-9": "toolu_1"}

    fresh = ClaudeAgentOptions(hooks=defer_hooks(deferring("never-asked-again")))  # a restart
    expired = Delivery(delivery_id="1", record=_record(AskStatus.EXPIRED, None, "ask-9"))
    with pytest.raises(LookupError, match="ask id 'ask-9' is not the deferred call's"):
        resume_options(fresh, stopped, expired)  # the ask ids were not kept
    done = await resume_to_result(claude, resume_options(fresh, stopped, expired, calls=kept))
    assert claude.decisions[1]["permissionDecision"] == "deny"
    reason = json.loads(claude.decisions[1]["permissionDecisionReason"])
    assert reason["status"] == "expired"
    assert reason["error"] == "nobody answered before the questions expired"
    assert done.result is not None and done.result.startswith("Not asked: ")


async def test_a_replay_before_the_answer_defers_again_without_asking_again() -> None:
    asked: list[list[Question]] = []

    def handler(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
        asked.append(questions)
        return AskUserDeferred(extra={"ask_id": "ask-3"})

    claude = ScriptedClaudeCode()
    options = ClaudeAgentOptions(hooks=defer_hooks(handler))
    stopped = await run_to_result(claude, options)
    again = await resume_to_result(claude, replace(options, resume=stopped.session_id))
    assert again.stop_reason == "tool_deferred"
    assert [d["permissionDecision"] for d in claude.decisions] == ["defer", "defer"]
    assert len(asked) == 1
    assert ask_ids(options, again) == {"ask-3": "toolu_1"}


async def test_resume_options_refuses_what_it_cannot_resume() -> None:
    claude = ScriptedClaudeCode()
    options = ClaudeAgentOptions(hooks=defer_hooks(deferring("ask-2")))
    stopped = await run_to_result(claude, options)
    other = _record(AskStatus.ANSWERED, (Answer(question="Q", other_text="x"),), "other")
    with pytest.raises(LookupError, match=r"ask id 'other' is not the deferred call's.*ask-2"):
        resume_options(options, stopped, other)
    with pytest.raises(LookupError, match="have no defer_hooks"):
        resume_options(ClaudeAgentOptions(), stopped)

    answered = await run_to_result(claude, ClaudeAgentOptions(hooks=defer_hooks(answer_first)))
    assert answered.stop_reason is None and answered.deferred_tool_use is None
    assert ask_ids(options, answered) == {}
    with pytest.raises(LookupError, match="did not stop on a deferred call"):
        resume_options(options, answered)


def answer_first(questions: list[Question], context: dict[str, Any]) -> dict[str, str]:
    return {q.question: q.options[0].label for q in questions}


async def test_the_hook_decides_answers_fixes_and_failures_like_can_use_tool() -> None:
    answered = await the_hook(ClaudeAgentOptions(hooks=defer_hooks(answer_first)))(
        pre_tool_use(INPUT), "toolu_9", HOOK_CTX
    )
    assert answered["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert answered["hookSpecificOutput"]["updatedInput"]["answers"] == {
        "Which database?": "Postgres",
        "Which extras?": "Auth",
        "Deploy where?": "Fly",
    }

    bad = {"questions": [{"question": "Q?", "header": "A header far too long", "options": []}]}
    hook = the_hook(ClaudeAgentOptions(hooks=defer_hooks(answer_first)))
    fix = (await hook(pre_tool_use(bad), "toolu_9", HOOK_CTX))["hookSpecificOutput"]
    assert fix["permissionDecision"] == "deny"
    assert "questions[0].header" in fix["permissionDecisionReason"]

    def broken(qs: Any, ctx: Any) -> Any:
        raise ConnectionError("Slack unreachable")

    failed = await the_hook(ClaudeAgentOptions(hooks=defer_hooks(broken)))(
        pre_tool_use(INPUT), "toolu_9", HOOK_CTX
    )
    assert failed["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "could not get the person's answer: Slack unreachable",
    }
    # Another tool is none of its business (the matcher already keeps them away).
    assert await hook(pre_tool_use({"command": "ls"}, "Bash"), "toolu_9", HOOK_CTX) == {}


# -- one deferred AskUserQuestion call a turn ---------------------------------------------------


def turn_call(call_id: str, prompt_id: str | None, session_id: str = "s1") -> Any:
    """A PreToolUse input for ``call_id`` in the turn of ``session_id`` and ``prompt_id`` (a
    replayed call comes with no prompt id)."""
    hook_input = {
        **pre_tool_use({"questions": [{**QUESTION, "question": f"Question {call_id}?"}]}),
        "session_id": session_id,
        "tool_use_id": call_id,
    }
    return hook_input if prompt_id is None else {**hook_input, "prompt_id": prompt_id}


async def test_once_a_turns_call_defers_its_later_calls_are_refused_unasked() -> None:
    """The calls of a turn reach the hook at once; each waits for the earlier ones' decisions,
    and once one deferred the rest are refused without asking. Other turns -- another prompt,
    another session -- are none of its business."""
    asked: list[str] = []

    async def slow_to_defer(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
        asked.append(questions[0].question)
        await asyncio.sleep(0.05)
        return AskUserDeferred(extra={"ask_id": f"ask-{len(asked)}"})

    options = ClaudeAgentOptions(hooks=defer_hooks(slow_to_defer))
    hook = the_hook(options)
    calls = [("a", "p1", "s1"), ("b", "p1", "s1"), ("c", "p1", "s1"), ("d", "p2", "s1")]
    outputs = await asyncio.gather(
        *(hook(turn_call(*call), call[0], HOOK_CTX) for call in calls),
        hook(turn_call("e", "p1", "s2"), "e", HOOK_CTX),
    )
    decisions = [o["hookSpecificOutput"] for o in outputs]
    refused = {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": ONE_CALL_A_TURN,
    }
    deferred = {"hookEventName": "PreToolUse", "permissionDecision": "defer"}
    assert decisions == [deferred, refused, refused, deferred, deferred]
    assert asked == ["Question a?", "Question d?", "Question e?"]
    assert set(hook.deferred) == {"a", "d", "e"}


async def test_a_turns_later_call_is_asked_when_the_earlier_one_did_not_defer() -> None:
    """Only a deferral holds the turn: after an answered call (or one refused with the fix) the
    next call of the same turn is asked as usual."""

    def answer_then_defer(questions: list[Question], context: dict[str, Any]) -> Any:
        if questions[0].question == "Question a?":
            return {"Question a?": QUESTION["options"][0]["label"]}
        return AskUserDeferred(extra={"ask_id": "ask-b"})

    hook = the_hook(ClaudeAgentOptions(hooks=defer_hooks(answer_then_defer)))
    bad = {**turn_call("x", "p1"), "tool_input": {"questions": []}}
    fix = (await hook(bad, "x", HOOK_CTX))["hookSpecificOutput"]
    first = (await hook(turn_call("a", "p1"), "a", HOOK_CTX))["hookSpecificOutput"]
    second = (await hook(turn_call("b", "p1"), "b", HOOK_CTX))["hookSpecificOutput"]
    assert fix["permissionDecision"] == "deny"
    assert fix["permissionDecisionReason"] != ONE_CALL_A_TURN
    assert first["permissionDecision"] == "allow"
    assert second == {"hookEventName": "PreToolUse", "permissionDecision": "defer"}


async def test_a_replay_ends_the_turn_of_its_deferral() -> None:
    """A deferred call replayed in a later run (answered, or still waiting) ends its turn: a turn
    with no prompt id (a scripted CLI sends none) does not refuse the calls of later runs."""
    hook = the_hook(ClaudeAgentOptions(hooks=defer_hooks(deferring("ask-1"))))
    assert (await hook(turn_call("a", None), "a", HOOK_CTX))["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "defer",
    }
    second = await hook(turn_call("b", None), "b", HOOK_CTX)
    assert second["hookSpecificOutput"]["permissionDecisionReason"] == ONE_CALL_A_TURN
    replayed = await hook(turn_call("a", None), "a", HOOK_CTX)  # no answer yet: waits again
    assert replayed["hookSpecificOutput"]["permissionDecision"] == "defer"
    later = await hook(turn_call("c", None), "c", HOOK_CTX)
    assert later["hookSpecificOutput"]["permissionDecision"] == "defer"
    assert hook.waiting == {("s1", None): "c"}
