"""Claude Agent SDK: answer Claude's built-in ``AskUserQuestion`` through any bridge handler.

Claude Code ships its own question tool, ``AskUserQuestion``, with the same 1-4 question shape as
``ask_user``. The SDK routes it to the host's ``can_use_tool`` callback; the host shows the
questions and allows the call with the original input plus ``answers``: a mapping from question
text to the answer string (the chosen label; several labels joined with ``", "``; the person's own
text as it is). :func:`can_use_tool` builds that callback on top of a bridge handler, so the
questions go to Slack, Discord or the terminal like any ``ask_user`` call::

    options = ClaudeAgentOptions(can_use_tool=can_use_tool(chat_handler))

``can_use_tool`` must decide while Claude waits: a handler that defers there (or fails, or gets a
malformed question set) is reported as a denial whose message Claude reads -- for a deferral, the
instructions to end the turn and wait for the answers in the next message.

Deferral the SDK's own way is a ``PreToolUse`` hook: :func:`defer_hooks` asks ``AskUserQuestion``
through the handler there, and when the handler defers the hook answers ``permissionDecision:
"defer"``, so the run stops with ``ResultMessage(stop_reason="tool_deferred")`` and the call in
``deferred_tool_use`` (the model sees no deferral). :func:`ask_ids` maps the deferred ask id to its
tool use id. When the answer arrives on the answers feed, :func:`resume_options` gives the options
that resume the *same* session (``resume=session_id``): Claude Code replays the deferred call, the
hook allows it with the answers in ``updatedInput`` (or, for an expired or cancelled ask, denies
it saying why), and the run goes on. Pass ``can_use_tool`` as well: Claude Code offers the model
``AskUserQuestion`` only when its permission prompts go to the SDK, so with the hook alone the
model never has the tool. The hook decides the question first; the callback gets the other
tools' permission prompts, which cannot be deferred (a deferring handler refuses them at once),
so give it a handler that waits, or a ``fallback``::

    options = ClaudeAgentOptions(
        hooks=defer_hooks(deferring_handler), can_use_tool=can_use_tool(waiting_handler)
    )
    ...  # the run ends with result.stop_reason == "tool_deferred"
    async with ClaudeSDKClient(resume_options(options, result, delivery)) as client:
        async for message in client.receive_response(): ...

Resume with ``ClaudeSDKClient`` and no prompt, not ``query()``: the replayed call's hook needs
stdin open, and ``query()`` closes it at once when the prompt stream is empty.

``"defer"`` needs Claude Code 2.1.89 or later. The bundled 2.1.332 honours it in a turn with other
tool calls too -- they run, and the run stops after them, their results kept -- but it keeps one
deferred call a turn: when several defer, it stops on the one deferred last and drops the others
from the session. So the hook defers a turn's first ``AskUserQuestion`` call and refuses the
later ones unasked (nobody sees them), telling the model to put every question in one call
(:data:`ONE_CALL_A_TURN`). Claude Code 2.1.332 has one more limit: in a session resumed from
disk (``resume=``, as in every run :func:`resume_options` starts), a deferred call beside any
other tool call of its turn loses its answer at the next resume (the model reads ``[Tool result
missing due to internal error]``). A deferred call alone in its turn, or one in the session's
first run, is answered.

Every other tool's permission request (Bash, Write, ...) is asked through the *same* handler, as
one two-option question -- "Allow" / "Deny", header "Permission", naming the tool and showing a
bounded, escaped preview of its input -- so a Slack approval flow gets Claude's permission prompts
too. Only a plain "Allow" lets the call run; "Deny", typed words (passed on to Claude), no answer,
a deferral or a failing handler refuse it. Nothing is approved without a person, unless a
``fallback`` is given: then it decides every other tool instead.
"""

from __future__ import annotations

import asyncio
import json
import unicodedata
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    ToolPermissionContext,
)
from claude_agent_sdk.types import CanUseTool, HookEvent, PermissionResult

from bridge.deferred import AskUserDeferred
from bridge.errors import ToolRejected
from bridge.feed import render_delivery
from bridge.models import Answer
from bridge.record import AskRecord, AskStatus
from bridge.store.base import Delivery
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


async def _ask_question(
    tool: AskUserTool, tool_input: Mapping[str, Any]
) -> PermissionResult | AskUserDeferred:
    """Ask ``AskUserQuestion``'s questions through ``tool``'s handler: the SDK result, or the
    handler's deferral for the caller to express its own way."""
    try:
        outcome = await tool.ainvoke(_contract_view(tool_input.get("questions")))
    except ToolRejected as exc:
        return PermissionResultDeny(message=exc.message)
    if outcome.deferred is not None:
        return outcome.deferred
    return PermissionResultAllow(updated_input=answers_input(tool_input, outcome.answers or ()))


async def answer_ask_user_question(
    tool: AskUserTool, tool_input: Mapping[str, Any]
) -> PermissionResult:
    """Ask ``AskUserQuestion``'s questions through ``tool``'s handler and build the SDK result
    (a deferral is a denial carrying the wait instructions)."""
    decided = await _ask_question(tool, tool_input)
    if isinstance(decided, AskUserDeferred):
        return PermissionResultDeny(message=decided.instructions)
    return decided


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


ASK_ID = "ask_id"
"""The ``AskUserDeferred.extra`` key holding the ask id (set by the chat handler)."""


def _pre_tool_use(decision: str, **fields: Any) -> HookJSONOutput:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,  # type: ignore[typeddict-item]
            **fields,
        }
    }


def _hook_output(decided: PermissionResult) -> HookJSONOutput:
    """A ``can_use_tool``-style decision as ``PreToolUse`` hook output."""
    if isinstance(decided, PermissionResultAllow):
        return _pre_tool_use("allow", updatedInput=decided.updated_input)
    return _pre_tool_use("deny", permissionDecisionReason=decided.message)


def _answered_output(record: AskRecord, tool_input: Mapping[str, Any]) -> HookJSONOutput:
    """The replayed call's decision once its ask ended: its answers, or why none came."""
    if record.status is AskStatus.ANSWERED and record.answers is not None:
        return _pre_tool_use("allow", updatedInput=answers_input(tool_input, record.answers))
    return _pre_tool_use("deny", permissionDecisionReason=render_delivery(record))


ONE_CALL_A_TURN = (
    "These questions were not asked: an earlier AskUserQuestion call in this turn is already "
    "waiting for the person's answers, and only one call a turn can wait. Nobody saw these "
    "questions. Put all your questions in one AskUserQuestion call (up to 4), with no other tool "
    "call in the same turn; if you still need these answers, ask them again that way."
)
"""Why the hook refuses an ``AskUserQuestion`` call whose turn already has a deferred one (the
model reads it after Claude Code's ``PreToolUse:AskUserQuestion hook error: ``)."""

TurnKey = tuple[str, str | None]
"""A turn as the hook tells them apart: session id and prompt id. The calls of a turn share
both, and a run that stops on a deferral has no later turn: each run, a resumed one included,
gets a new prompt id (a replayed call comes with none)."""


class AskUserQuestionHook:
    """The ``PreToolUse`` hook :func:`defer_hooks` registers for ``AskUserQuestion``.

    The mappings live in this process only: a host that resumes in another process keeps
    :func:`ask_ids` with the session id.

    One deferred call a turn: Claude Code runs a call's hook as soon as the call has streamed,
    while the model may still be writing the next one, and runs the hooks of calls already
    streamed at once. When several defer, it stops on the one deferred last and drops the others
    from the session, so their answers would have nowhere to go. The ``AskUserQuestion`` calls of
    a turn are therefore decided one after the other, in the order they reach the hook; once one
    is deferred, the later ones are refused unasked with :data:`ONE_CALL_A_TURN`, which the model
    reads beside the deferred call's answers when the run resumes.
    """

    def __init__(self, tool: AskUserTool) -> None:
        self.tool = tool
        self.deferred: dict[str, dict[str, Any]] = {}
        """``AskUserDeferred.extra`` of each call whose ask was deferred (the run stopped), by
        tool use id."""
        self.resumed: dict[str, AskRecord] = {}
        """The ended ask of each deferred call :func:`resume_options` primed, until replayed."""
        self.waiting: dict[TurnKey, str] = {}
        """The tool use id of each turn's deferred call, until Claude Code replays it."""
        self._deciding: dict[TurnKey, asyncio.Future[None]] = {}
        """Per turn, the decision its next call waits for (the last call to reach the hook)."""

    async def __call__(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        if hook_input["hook_event_name"] != "PreToolUse":
            return {}
        if hook_input["tool_name"] != ASK_USER_QUESTION:
            return {}
        call_id = tool_use_id or hook_input["tool_use_id"]
        tool_input = hook_input["tool_input"]
        record = self.resumed.pop(call_id, None)
        if record is not None:
            self.deferred.pop(call_id, None)
            self._replayed(call_id)
            return _answered_output(record, tool_input)
        if call_id in self.deferred:  # replayed before its answer came: still waiting
            self._replayed(call_id)
            return _pre_tool_use("defer")
        turn = (hook_input["session_id"], hook_input.get("prompt_id"))
        earlier = self._deciding.get(turn)
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._deciding[turn] = mine
        try:
            if earlier is not None:
                await asyncio.shield(earlier)
            return await self._decide(turn, call_id, tool_input)
        finally:
            mine.set_result(None)
            if self._deciding.get(turn) is mine:
                del self._deciding[turn]

    async def _decide(
        self, turn: TurnKey, call_id: str, tool_input: Mapping[str, Any]
    ) -> HookJSONOutput:
        if turn in self.waiting:  # an earlier call of this turn was deferred
            return _pre_tool_use("deny", permissionDecisionReason=ONE_CALL_A_TURN)
        decided = await _ask_question(self.tool, tool_input)
        if isinstance(decided, AskUserDeferred):
            extra = dict(decided.extra or {})
            self.deferred[call_id] = json.loads(json.dumps(extra, default=str))
            self.waiting[turn] = call_id
            return _pre_tool_use("defer")
        return _hook_output(decided)

    def _replayed(self, call_id: str) -> None:
        """A deferred call came back in a later run: its turn is over."""
        for turn in [t for t, c in self.waiting.items() if c == call_id]:
            del self.waiting[turn]


def defer_hooks(
    handler: AskUserTool | AskUserCallback | None = None,
    *,
    context: AskContext = None,
    timeout: float | None = None,
) -> dict[HookEvent, list[HookMatcher]]:
    """``ClaudeAgentOptions(hooks=...)`` that ask ``AskUserQuestion`` through a bridge handler and
    stop the run with ``"defer"`` when the handler defers (see the module docs).

    ``handler`` is a core ``ask_user`` tool, a handler callback (a ``ChatHandler`` in defer mode,
    a function) or ``None`` for the process-wide chain. Answers, calls to fix and failures are
    decided as :func:`can_use_tool` decides them. Pass ``can_use_tool`` too: without it Claude
    Code does not offer the model ``AskUserQuestion`` at all (and it decides other tools).
    ``timeout`` (seconds) bounds the hook as ``HookMatcher.timeout`` does (Claude Code's default
    is 60): a handler that waits for a person longer than that should defer instead.
    """
    hook = AskUserQuestionHook(as_tool(handler, context))
    return {"PreToolUse": [HookMatcher(matcher=ASK_USER_QUESTION, hooks=[hook], timeout=timeout)]}


def _hook_of(options: ClaudeAgentOptions) -> AskUserQuestionHook:
    for matcher in (options.hooks or {}).get("PreToolUse", []):
        for hook in matcher.hooks:
            if isinstance(hook, AskUserQuestionHook):
                return hook
    raise LookupError("these options have no defer_hooks(): pass ClaudeAgentOptions(hooks=...)")


def ask_ids(options: ClaudeAgentOptions, result: ResultMessage) -> dict[str, str]:
    """The deferred ask of a stopped run: ask id -> tool use id (empty if it did not defer).

    A host that resumes in another process keeps this with ``result`` (its ``session_id`` and
    ``deferred_tool_use``) and passes it to :func:`resume_options` as ``calls``.
    """
    pending = result.deferred_tool_use
    extra = _hook_of(options).deferred.get(pending.id) if pending is not None else None
    if pending is None or extra is None or extra.get(ASK_ID) is None:
        return {}
    return {str(extra[ASK_ID]): pending.id}


def resume_options(
    options: ClaudeAgentOptions,
    result: ResultMessage,
    *answered: AskRecord | Delivery,
    calls: Mapping[str, str] | None = None,
) -> ClaudeAgentOptions:
    """``options`` resuming the stopped session, its deferred ``AskUserQuestion`` answered.

    ``result`` is the ``ResultMessage`` that ended the run with ``stop_reason="tool_deferred"``;
    ``answered`` the :class:`Delivery` from the answers feed (or the :class:`AskRecord`) of its
    ask. When Claude Code replays the call, the hook allows it with the answers in
    ``updatedInput`` -- or denies it with :func:`bridge.feed.render_delivery`'s reason when the
    ask expired or was cancelled. ``calls`` is :func:`ask_ids` kept from the stopped run, needed
    when resuming in another process.

    Raises ``LookupError`` when the run did not stop on a deferred call, or for an ask id that is
    not that call's.
    """
    pending = result.deferred_tool_use
    if pending is None:
        raise LookupError(
            f"the run did not stop on a deferred call (stop_reason {result.stop_reason!r})"
        )
    hook = _hook_of(options)
    known = {**ask_ids(options, result), **(calls or {})}
    for record in (a.record if isinstance(a, Delivery) else a for a in answered):
        if known.get(record.id) != pending.id:
            asks = ", ".join(sorted(a for a, c in known.items() if c == pending.id)) or "none"
            raise LookupError(
                f"ask id {record.id!r} is not the deferred call's (its ask id: {asks})"
            )
        hook.resumed[pending.id] = record
    return replace(options, resume=result.session_id)


__all__ = [
    "ALLOW",
    "ASK_USER_QUESTION",
    "DENY",
    "ONE_CALL_A_TURN",
    "PERMISSION_HEADER",
    "AskUserQuestionHook",
    "answer_ask_user_question",
    "answer_text",
    "answers_input",
    "ask_ids",
    "ask_permission",
    "can_use_tool",
    "defer_hooks",
    "permission_question",
    "resume_options",
]
