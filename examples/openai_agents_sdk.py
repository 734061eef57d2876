"""ask_user in an OpenAI Agents SDK agent.

Run it: ``python examples/openai_agents_sdk.py``, with ``OPENAI_API_KEY`` set (and
``OPENAI_BASE_URL`` for an endpoint other than OpenAI's that speaks its Responses API; then also
``OPENAI_AGENTS_DISABLE_TRACING=1``, as the SDK sends its traces to OpenAI). The question goes to
Slack when ``SLACK_BOT_TOKEN`` is set (see ``handler.py`` for the rest); without it, a stand-in
picks each first option.
"""

from __future__ import annotations

import asyncio

from agents import Agent, Runner
from credentials import require
from handler import ask_handler

from bridge import tools_interactive
from bridge.frameworks.openai_agents import ask_user_tool


async def main() -> None:
    [ask_user] = tools_interactive(callback=ask_handler())
    agent = Agent(name="writer", model="gpt-4.1", tools=[ask_user_tool(ask_user)])
    result = await Runner.run(agent, "Write the release notes.")
    print(result.final_output)


if __name__ == "__main__":
    require("OPENAI_API_KEY")
    asyncio.run(main())
