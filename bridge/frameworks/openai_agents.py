"""ask_user as an OpenAI Agents SDK ``FunctionTool`` (extra ``openai-agents``).

``Agent(name=..., tools=[ask_user_tool()])``. The three outcomes in the SDK's idiom:

- answers: the tool output is the answers JSON, which the model reads;
- a call to fix (or no answer to be had): the tool output is the model-facing message -- the run
  goes on and the model can fix its call, instead of an exception ending the run;
- deferral: the SDK's own pause. The question is asked in the tool's ``needs_approval`` policy;
  when the handler defers, the call needs approval, so the run stops with the call's
  ``ToolApprovalItem`` in ``result.interruptions`` (the model sees no deferral and no ask id).
  :func:`ask_ids` maps each deferred ask id to its call id. When the answer arrives on the answers
  feed, :func:`approve_answers` approves the call in the run's ``RunState`` and hands the tool the
  answer; ``Runner.run(agent, state)`` then resumes the *same* run, and the tool output is the
  answers JSON a waiting call would have returned.

One caveat comes from the SDK (0.24): a call whose arguments are not a JSON object never reaches
a ``needs_approval`` policy -- the SDK asks for approval outright. Such a call has no ask id;
:func:`approve_answers` approves it on any resume, and the tool then answers it with the message
to fix the call. (In strict mode, which the SDK uses by default, OpenAI models always send a
JSON object.)

The schema is the strict-mode variant (:func:`~bridge.frameworks.providers.strict_parameters`),
as the SDK sends function tools strict by default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents import FunctionTool, RunContextWrapper, RunResult, RunResultStreaming, RunState
from agents.items import ToolApprovalItem
from agents.tool_context import ToolContext

from bridge.feed import render_delivery
from bridge.frameworks.providers import arun_tool_call, strict_parameters
from bridge.record import AskRecord
from bridge.store.base import Delivery
from bridge.tool import AskUserTool, tool_ask_user

__all__ = ["AskUserFunctionTool", "approve_answers", "ask_ids", "ask_user_tool"]

PausedRun = RunResult | RunResultStreaming | RunState[Any, Any]
"""A run that may have paused: its result, or its ``RunState``."""

ASK_ID = "ask_id"
"""The ``AskUserDeferred.extra`` key holding the ask id (set by the chat handler)."""


@dataclass
class AskUserFunctionTool(FunctionTool):
    """The ``FunctionTool`` :func:`ask_user_tool` builds, with what it knows of deferred calls.

    Both mappings are keyed by call id and live in this process only: a host that resumes a run
    in another process keeps :func:`ask_ids` with the serialized ``RunState``.
    """

    deferred: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``AskUserDeferred.extra`` of each call whose ask was deferred (the run paused on it)."""
    resumed: dict[str, str] = field(default_factory=dict)
    """The tool output of each deferred call :func:`approve_answers` approved, until it runs."""


def ask_user_tool(tool: AskUserTool = tool_ask_user) -> AskUserFunctionTool:
    """The ``ask_user`` tool for ``Agent(tools=[...])``.

    ``tool`` is the bridge tool to ask through (default: the process-wide handler chain; pass one
    from :func:`bridge.tools_interactive` to give this agent its own handler).
    """
    deferred: dict[str, dict[str, Any]] = {}
    resumed: dict[str, str] = {}
    ready: dict[str, str] = {}  # call id -> the output of a call asked in the policy, not deferred

    async def needs_approval(
        context: RunContextWrapper[Any], params: dict[str, Any], call_id: str
    ) -> bool:
        """Asks the question: only a deferred ask pauses the run. Each call is asked once."""
        if call_id in deferred:
            return True
        if call_id not in ready:
            asking = arun_tool_call(params, tool)
            del params  # the model's: not kept alive while the call waits
            result = await asking
            if result.deferred is not None:
                extra = dict(result.deferred.extra or {})
                deferred[call_id] = json.loads(json.dumps(extra, default=str))
                return True
            ready[call_id] = result.content
        return False

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        call_id = context.tool_call_id
        if call_id in resumed:
            deferred.pop(call_id, None)
            return resumed.pop(call_id)
        if call_id in ready:
            return ready.pop(call_id)
        if context.is_tool_approved(tool.name, call_id) and _is_object(arguments):
            # Approved with no answer to give (a bare state.approve): asking again would post
            # the question a second time.
            raise LookupError(
                f"the deferred ask_user call {call_id!r} was approved without the person's "
                "answer: approve it with bridge.frameworks.openai_agents.approve_answers"
            )
        # Not asked by the policy: arguments that are not a JSON object, or a direct call.
        asking = arun_tool_call(arguments, tool)
        del arguments  # the model's: not kept alive while the call waits
        return (await asking).content

    return AskUserFunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=strict_parameters(tool.parameters),
        on_invoke_tool=invoke,
        strict_json_schema=True,
        needs_approval=needs_approval,
        deferred=deferred,
        resumed=resumed,
    )


def _interruptions(run: PausedRun) -> list[ToolApprovalItem]:
    return run.get_interruptions() if isinstance(run, RunState) else list(run.interruptions)


def _ask_tool(item: ToolApprovalItem) -> AskUserFunctionTool | None:
    """The ``ask_user`` tool of the agent an interruption belongs to, if it is one."""
    for candidate in item.agent.tools:
        if isinstance(candidate, AskUserFunctionTool) and candidate.name == item.tool_name:
            return candidate
    return None


def _raw(item: ToolApprovalItem, key: str) -> Any:
    """A field of the paused call (a model object, or a dict in a restored state)."""
    raw = item.raw_item
    return raw.get(key) if isinstance(raw, Mapping) else getattr(raw, key, None)


def _call_id(item: ToolApprovalItem) -> str:
    return str(_raw(item, "call_id"))


def _is_object(arguments: object) -> bool:
    """Whether tool-call arguments are a JSON object: the SDK's condition for consulting a
    ``needs_approval`` policy at all."""
    try:
        return isinstance(arguments, str) and isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False


def ask_ids(run: PausedRun) -> dict[str, str]:
    """The deferred ``ask_user`` calls a run paused on: ask id -> call id.

    ``run`` is the paused run's result (or its ``RunState`` in the same process). A host that
    resumes in another process keeps this with ``state.to_string()`` and passes it to
    :func:`approve_answers` as ``calls``.
    """
    found: dict[str, str] = {}
    for item in _interruptions(run):
        ask_tool = _ask_tool(item)
        extra = ask_tool.deferred.get(_call_id(item)) if ask_tool is not None else None
        if extra is not None and extra.get(ASK_ID) is not None:
            found[str(extra[ASK_ID])] = _call_id(item)
    return found


def approve_answers(
    state: RunState[Any, Any],
    *answered: AskRecord | Delivery,
    results: Mapping[str, str] | None = None,
    calls: Mapping[str, str] | None = None,
) -> RunState[Any, Any]:
    """Approve the deferred ``ask_user`` calls that were answered, so ``Runner.run(agent, state)``
    resumes the same run with the person's answers as the tool output. Returns ``state``.

    Each of ``answered`` -- a :class:`Delivery` from the answers feed, or the :class:`AskRecord`
    itself -- is matched to its call through the ask id. The tool output is
    :func:`bridge.feed.render_delivery`: the answers JSON (exactly what a waiting call returns),
    or, for an expired or cancelled ask, why no answer will come. ``results`` maps further ask ids
    to tool outputs you rendered yourself. ``calls`` is :func:`ask_ids` kept from the paused run,
    needed when resuming a ``RunState`` restored in another process. Calls with no ask (arguments
    that are not a JSON object) are approved too: the tool answers them with the message to fix.

    Raises ``LookupError`` for an ask id none of the paused calls holds.
    """
    items = {_call_id(i): (i, t) for i in state.get_interruptions() if (t := _ask_tool(i))}
    calls_by_ask = {**ask_ids(state), **(calls or {})}
    outputs = [(a.record if isinstance(a, Delivery) else a) for a in answered]
    pending = [(record.id, render_delivery(record)) for record in outputs]
    pending += list((results or {}).items())
    for ask_id, output in pending:
        call_id = calls_by_ask.get(ask_id)
        if call_id is None or call_id not in items:
            known = ", ".join(sorted(a for a, c in calls_by_ask.items() if c in items)) or "none"
            raise LookupError(
                f"no paused ask_user call has ask id {ask_id!r} (paused ask ids: {known})"
            )
        item, ask_tool = items[call_id]
        ask_tool.resumed[call_id] = output
        state.approve(item)
    for item, _ in items.values():
        if not _is_object(_raw(item, "arguments")):
            state.approve(item)
    return state
