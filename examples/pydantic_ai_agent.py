"""ask_user in a pydantic-ai agent: the run stops while the question waits in chat, and resumes
when the answer arrives on the answers feed.

Run it: ``python examples/pydantic_ai_agent.py``, with ``OPENAI_API_KEY`` set (and
``OPENAI_BASE_URL`` for an endpoint other than OpenAI's that speaks its Responses API: pydantic-ai's
OpenAI provider reads both). The question goes to Slack when ``SLACK_BOT_TOKEN`` is set, the ask
kept in the Redis at ``REDIS_URL`` whose answers feed brings the teammate's click (see
``handler.py`` for the rest); without it, an in-memory store and a stand-in teammate who picks
each first option.
"""

from __future__ import annotations

import asyncio

from credentials import require
from handler import deferring_handler
from pydantic_ai import Agent, DeferredToolRequests

from bridge import tools_interactive
from bridge.frameworks.pydantic_ai import ask_user_tool, deferred_tool_results


async def main() -> None:
    handler, store = deferring_handler()  # a ChatHandler with AskPolicy(mode="defer")
    [ask_user] = tools_interactive(callback=handler)
    agent = Agent(
        "openai:gpt-4.1",
        tools=[ask_user_tool(ask_user)],
        output_type=[str, DeferredToolRequests],
    )

    result = await agent.run("Write the release notes.")
    assert isinstance(result.output, DeferredToolRequests)  # the question waits in chat

    async for delivery in store.feed("release-notes-agent"):
        resumed = await agent.run(
            message_history=result.all_messages(),
            deferred_tool_results=deferred_tool_results(result.output, delivery),
        )
        await store.ack(delivery)
        print(resumed.output)
        break


if __name__ == "__main__":
    require("OPENAI_API_KEY")
    asyncio.run(main())
