"""ask_user as an OpenAI Agents SDK ``FunctionTool`` (extra ``openai-agents``).

``Agent(name=..., tools=[ask_user_tool()])``. The three outcomes in the SDK's idiom:

- answers: the tool output is the answers JSON, which the model reads;
- a call to fix (or no answer to be had): the tool output is the model-facing message -- the run
  goes on and the model can fix its call, instead of an exception ending the run;
- deferral: the tool output is the deferred result (the model ends its turn), and
  ``AskUserDeferred.extra`` -- the ask id -- is attached to the run's ``ToolCallOutputItem`` as
  ``custom_data["ask_user_deferred"]``, SDK-only data the model never sees. When the answer
  arrives on the answers feed, start the next run with :func:`bridge.feed.render_delivery` as the
  user message.

The schema is the strict-mode variant (:func:`~bridge.frameworks.providers.strict_parameters`),
as the SDK sends function tools strict by default.
"""

from __future__ import annotations

import json
from typing import Any

from agents import FunctionTool
from agents.tool import FunctionToolCustomDataContext
from agents.tool_context import ToolContext

from bridge.frameworks.providers import arun_tool_call, strict_parameters
from bridge.tool import AskUserTool, tool_ask_user

__all__ = ["DEFERRED_KEY", "ask_user_tool"]

DEFERRED_KEY = "ask_user_deferred"
"""The ``ToolCallOutputItem.custom_data`` key of a deferred call's ``AskUserDeferred.extra``."""


def ask_user_tool(tool: AskUserTool = tool_ask_user) -> FunctionTool:
    """The ``ask_user`` tool for ``Agent(tools=[...])``.

    ``tool`` is the bridge tool to ask through (default: the process-wide handler chain; pass one
    from :func:`bridge.tools_interactive` to give this agent its own handler).
    """
    deferred_extras: dict[str, dict[str, Any]] = {}

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        result = await arun_tool_call(arguments, tool)
        if result.deferred is not None:
            extra = dict(result.deferred.extra or {})
            deferred_extras[context.tool_call_id] = json.loads(json.dumps(extra, default=str))
        return result.content

    def custom_data(data: FunctionToolCustomDataContext) -> dict[str, Any] | None:
        extra = deferred_extras.pop(data.tool_context.tool_call_id, None)
        return None if extra is None else {DEFERRED_KEY: extra}

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=strict_parameters(tool.parameters),
        on_invoke_tool=invoke,
        strict_json_schema=True,
        custom_data_extractor=custom_data,
    )
