"""ask_user in a hand-written OpenAI Chat Completions loop (no agent framework).

Run it: ``python examples/openai_raw.py``, with ``OPENAI_API_KEY`` set (and ``OPENAI_BASE_URL``
for an OpenAI-compatible endpoint other than OpenAI's: the ``openai`` client reads both). The
question goes to Slack when ``SLACK_BOT_TOKEN`` is set (see ``handler.py`` for the rest); without
it, a stand-in picks each first option.
"""

from __future__ import annotations

from typing import Any

from credentials import require
from handler import ask_handler
from openai import OpenAI

from bridge import AskUserTool, tools_interactive
from bridge.frameworks.providers import openai_chat_tool, run_tool_call


def run(client: OpenAI, prompt: str, ask_user: AskUserTool) -> str:
    messages: list[Any] = [{"role": "user", "content": prompt}]
    tools: Any = [openai_chat_tool(ask_user, strict=True)]
    while True:
        reply = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            result = run_tool_call(call.function.arguments, ask_user)  # type: ignore[union-attr]
            messages.append(result.openai_chat_message(call.id))


def main() -> None:
    [ask_user] = tools_interactive(callback=ask_handler())
    print(run(OpenAI(), "Write the release notes.", ask_user))


if __name__ == "__main__":
    require("OPENAI_API_KEY")
    main()
