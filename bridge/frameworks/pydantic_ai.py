"""ask_user as a pydantic-ai tool (extra ``pydantic-ai``).

``Agent(model, tools=[ask_user_tool()], output_type=[str, DeferredToolRequests])``. The outcomes
in pydantic-ai's idiom (each adapter's are tabled in ``docs/outcomes.md``):

- answers: the tool returns the answers JSON, which the model reads;
- a call to fix (:class:`~bridge.errors.InvalidQuestions`, and only that): ``ModelRetry`` with the
  model-facing message, which counts against the tool's retry budget;
- no answer to be had -- nobody answered in time (``on_timeout="error"``), the ask expired or was
  cancelled, the platform refused the post, the store could not be reached, the handler failed or
  there is none: ``ToolFailed`` with the model-facing message, so the model adapts (continues
  without the answers) instead of being told to repeat a call that was right, failing again until
  the run ends in ``UnexpectedModelBehavior``.
- deferral: ``CallDeferred(metadata=..., kind="question")``, so the run ends with
  :class:`~pydantic_ai.DeferredToolRequests` whose ``metadata[tool_call_id]`` holds
  ``AskUserDeferred.extra`` (with the chat handler: ``ask_id``, ``expires_at``, ``message``).

When the answer arrives on the answers feed, :func:`deferred_tool_results` maps the delivery to
the deferred call through its ask id; resume with ``agent.run(message_history=...,
deferred_tool_results=...)`` and the model reads the same answers JSON a waiting call would have
returned -- or, for an ask that expired or was cancelled meanwhile, a ``ToolFailed`` result with
:func:`bridge.feed.render_delivery`'s words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_ai import CallDeferred, DeferredToolRequests, DeferredToolResults, ModelRetry, Tool
from pydantic_ai.exceptions import ToolFailed

from bridge.errors import InvalidQuestions, ToolRejected
from bridge.feed import render_delivery
from bridge.record import AskRecord, AskStatus
from bridge.store.base import Delivery
from bridge.tool import AskUserTool, tool_ask_user
from bridge.validation import questions_from_arguments

__all__ = ["ask_ids", "ask_user_tool", "deferred_tool_results"]

ASK_ID = "ask_id"
"""The metadata key holding the ask id of a deferred call (set by the chat handler's extra)."""


def ask_user_tool(
    tool: AskUserTool = tool_ask_user, *, max_retries: int | None = None
) -> Tool[Any]:
    """The ``ask_user`` tool for ``Agent(tools=[...])``.

    ``tool`` is the bridge tool to ask through (default: the process-wide handler chain; pass one
    from :func:`bridge.tools_interactive` to give this agent its own handler). ``max_retries``
    bounds the calls to fix in a row (default: the agent's ``retries``).
    """

    async def ask_user(**arguments: Any) -> str:
        try:
            asking = tool.ainvoke(questions_from_arguments(arguments))
            del arguments  # the model's: not kept alive while the call waits
            outcome = await asking
        except InvalidQuestions as rejected:
            raise ModelRetry(rejected.message) from None
        except ToolRejected as failed:
            raise ToolFailed(failed.message) from None
        if outcome.deferred is not None:
            raise CallDeferred(metadata=dict(outcome.deferred.extra or {}), kind="question")
        return outcome.text

    ask_user.__doc__ = tool.description
    pydantic_tool: Tool[Any] = Tool.from_schema(
        ask_user, name=tool.name, description=tool.description, json_schema=tool.parameters
    )
    pydantic_tool.max_retries = max_retries
    return pydantic_tool


def ask_ids(requests: DeferredToolRequests) -> dict[str, str]:
    """The deferred ``ask_user`` calls of a run: ask id -> ``tool_call_id``.

    A host keeps this (with the run's messages) to know which stopped run an answer resumes.
    """
    return {
        str(meta[ASK_ID]): tool_call_id
        for tool_call_id, meta in requests.metadata.items()
        if isinstance(meta, Mapping) and meta.get(ASK_ID) is not None
    }


def deferred_tool_results(
    requests: DeferredToolRequests,
    *answered: AskRecord | Delivery,
    results: Mapping[str, str] | None = None,
) -> DeferredToolResults:
    """``DeferredToolResults`` answering deferred ``ask_user`` calls, to resume the run.

    Each of ``answered`` -- a :class:`Delivery` from the answers feed, or the :class:`AskRecord`
    itself -- is matched to its call through the ask id in the call's metadata. An answered ask
    gives the answers JSON (exactly what a waiting call returns); an expired or cancelled one a
    ``ToolFailed`` saying nobody answered. ``results`` maps further ask ids to tool results you
    rendered yourself (e.g. :func:`bridge.feed.render_delivery` output kept from earlier).

    Raises ``LookupError`` for an ask id none of the deferred calls holds.
    """
    calls_by_ask = ask_ids(requests)
    calls: dict[str, Any] = {}
    pending: list[tuple[str, Any]] = [
        (record.id, _call_result(record))
        for record in (a.record if isinstance(a, Delivery) else a for a in answered)
    ]
    pending += list((results or {}).items())
    for ask_id, result in pending:
        tool_call_id = calls_by_ask.get(ask_id)
        if tool_call_id is None:
            known = ", ".join(sorted(calls_by_ask)) or "none"
            raise LookupError(
                f"no deferred ask_user call has ask id {ask_id!r} (deferred ask ids: {known})"
            )
        calls[tool_call_id] = result
    return DeferredToolResults(calls=calls)


def _call_result(record: AskRecord) -> str | ToolFailed:
    content = render_delivery(record)
    if record.status is AskStatus.ANSWERED and record.answers is not None:
        return content
    return ToolFailed(content)
