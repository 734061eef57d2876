"""Raw provider tool definitions, and one function that runs a provider's tool call.

For hosts that drive a model API themselves (the ``openai`` or ``anthropic`` client, an HTTP
call): put a definition from here in the request's ``tools``, and when the model calls
``ask_user`` hand its arguments -- JSON text or an already decoded dict -- to
:func:`run_tool_call` (or :func:`arun_tool_call`). The :class:`ToolCallResult` holds the content
for the next request and whether it is an error result, and renders the item each API expects.

Nothing here imports a provider SDK. The other adapters in :mod:`bridge.frameworks` reuse
:func:`strict_parameters`; the arguments object is checked by
:func:`bridge.validation.questions_from_arguments` (re-exported here), as for every host.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bridge.deferred import AskUserDeferred
from bridge.errors import ToolRejected
from bridge.result import ToolOutcome
from bridge.tool import AskUserTool, tool_ask_user
from bridge.validation import questions_from_arguments, validate_questions

__all__ = [
    "ToolCallResult",
    "anthropic_tool",
    "arun_tool_call",
    "openai_chat_tool",
    "openai_responses_tool",
    "questions_from_arguments",
    "run_tool_call",
    "strict_parameters",
]

# -- definitions ----------------------------------------------------------------------------


def strict_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """``parameters`` rewritten for OpenAI strict mode (Structured Outputs for function calls).

    Strict mode requires every object to set ``additionalProperties: false`` and to list *every*
    property in ``required``; an optional property is expressed as a required one that may be
    ``null``, and ``default`` is not supported. So ``multiSelect`` becomes a required
    ``["boolean", "null"]`` without its default -- :func:`questions_from_arguments` reads ``null``
    as "left out" (false). Length and item-count limits (``minLength``, ``maxLength``,
    ``minItems``, ``maxItems``) are supported keywords and stay; the bridge checks them anyway.
    """
    return _strict(copy.deepcopy(dict(parameters)))


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("default", None)
    if schema.get("type") == "object":
        properties: dict[str, Any] = schema.setdefault("properties", {})
        required = set(schema.get("required", ()))
        for name, prop in properties.items():
            if name not in required:
                prop = _nullable(prop)
            properties[name] = _strict(prop)
        schema["required"] = list(properties)
        schema["additionalProperties"] = False
    items = schema.get("items")
    if isinstance(items, dict):
        schema["items"] = _strict(items)
    return schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` also allowing ``null``, which stands for "left out" (its default, if any)."""
    if "default" in schema:
        default = json.dumps(schema.pop("default"))
        note = f"null means the default, {default}."
        schema["description"] = f"{schema.get('description', '').rstrip()} {note}".lstrip()
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        schema["type"] = [*kind, "null"]
    elif kind is None:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return schema


def _function(tool: AskUserTool, strict: bool) -> dict[str, Any]:
    parameters = strict_parameters(tool.parameters) if strict else tool.parameters
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": parameters,
    }
    if strict:
        function["strict"] = True
    return function


def openai_chat_tool(tool: AskUserTool = tool_ask_user, *, strict: bool = False) -> dict[str, Any]:
    """The tool for OpenAI Chat Completions: ``{"type": "function", "function": {...}}``.

    ``strict=True`` sends the strict-mode schema (see :func:`strict_parameters`) with
    ``"strict": true``, so the model's arguments always match the schema's shape.
    """
    return {"type": "function", "function": _function(tool, strict)}


def openai_responses_tool(
    tool: AskUserTool = tool_ask_user, *, strict: bool = False
) -> dict[str, Any]:
    """The tool for the OpenAI Responses API: ``{"type": "function", "name": ..., ...}``.

    The Responses API requires the ``strict`` field (and defaults to strict when it is null), so
    ``strict=False`` says ``"strict": false`` explicitly.
    """
    function = _function(tool, strict)
    function.setdefault("strict", False)
    return {"type": "function", **function}


def anthropic_tool(tool: AskUserTool = tool_ask_user) -> dict[str, Any]:
    """The tool for Anthropic's Messages API: ``{"name", "description", "input_schema"}``."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


# -- running a call ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallResult:
    """The outcome of one provider tool call, ready for the next request.

    ``content`` is what the model reads: the answers JSON, the deferred result JSON, or the error
    message. ``is_error`` marks a call the model must fix (or that could not be answered).
    ``deferred`` holds the handler's :class:`AskUserDeferred` -- its ``extra`` (an ask id) is for
    the host only and is not in ``content``.
    """

    content: str
    is_error: bool = False
    deferred: AskUserDeferred | None = None

    @classmethod
    def from_outcome(cls, outcome: ToolOutcome) -> ToolCallResult:
        return cls(content=outcome.text, deferred=outcome.deferred)

    @classmethod
    def from_rejection(cls, rejected: ToolRejected) -> ToolCallResult:
        return cls(content=rejected.message, is_error=True)

    def openai_chat_message(self, tool_call_id: str) -> dict[str, Any]:
        """The Chat Completions ``{"role": "tool", ...}`` message answering ``tool_call_id``."""
        return {"role": "tool", "tool_call_id": tool_call_id, "content": self.content}

    def openai_responses_item(self, call_id: str) -> dict[str, Any]:
        """The Responses API ``function_call_output`` input item answering ``call_id``."""
        return {"type": "function_call_output", "call_id": call_id, "output": self.content}

    def anthropic_block(self, tool_use_id: str) -> dict[str, Any]:
        """The Anthropic ``tool_result`` content block (for the next user message)."""
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_use_id,
            "content": self.content,
        }
        if self.is_error:
            block["is_error"] = True
        return block


def run_tool_call(
    arguments: str | bytes | Mapping[str, Any] | None, tool: AskUserTool = tool_ask_user
) -> ToolCallResult:
    """Run an ``ask_user`` call from a provider (sync; works inside a running event loop too)."""
    try:
        questions = validate_questions(questions_from_arguments(arguments))
        del arguments  # the provider's objects: not kept alive while the call waits
        return ToolCallResult.from_outcome(tool.invoke(questions))
    except ToolRejected as rejected:
        return ToolCallResult.from_rejection(rejected)


async def arun_tool_call(
    arguments: str | bytes | Mapping[str, Any] | None, tool: AskUserTool = tool_ask_user
) -> ToolCallResult:
    """Run an ``ask_user`` call from a provider (async)."""
    try:
        asking = tool.ainvoke(questions_from_arguments(arguments))
        del arguments  # the call drops what it needs once checked; this frame would keep it
        return ToolCallResult.from_outcome(await asking)
    except ToolRejected as rejected:
        return ToolCallResult.from_rejection(rejected)
