"""ask_user in an OpenAI Agents SDK agent: the run pauses (an SDK interruption) while the question
waits in chat, and the same run resumes when the answer arrives on the answers feed.

Run it: ``python examples/openai_agents_defer.py``, with ``OPENAI_API_KEY`` set (and
``OPENAI_BASE_URL`` for an endpoint other than OpenAI's that speaks its Responses API; then also
``OPENAI_AGENTS_DISABLE_TRACING=1``, as the SDK sends its traces to OpenAI). The question goes to
Slack when ``SLACK_BOT_TOKEN`` is set, the ask kept in the Redis at ``REDIS_URL`` whose answers
feed brings the teammate's click (see ``handler.py`` for the rest); without it, an in-memory
store and a stand-in teammate who picks each first option.
"""

from __future__ import annotations

import asyncio

from agents import Agent, Runner, RunState
from credentials import require
from handler import deferring_handler

from bridge import tools_interactive
from bridge.frameworks.openai_agents import approve_answers, ask_ids, ask_user_tool


async def main() -> None:
    handler, store = deferring_handler()  # a ChatHandler with AskPolicy(mode="defer")
    [ask_user] = tools_interactive(callback=handler)
    agent = Agent(name="writer", model="gpt-4.1", tools=[ask_user_tool(ask_user)])

    paused = await Runner.run(agent, "Write the release notes.")
    assert paused.interruptions  # the question waits in chat; the run is paused, not over
    saved, calls = paused.to_state().to_string(), ask_ids(paused)  # keep both, e.g. in Redis

    async for delivery in store.feed("release-notes-agent"):
        state = await RunState.from_string(agent, saved)
        approve_answers(state, delivery, calls=calls)
        resumed = await Runner.run(agent, state)
        await store.ack(delivery)
        print(resumed.final_output)
        break


if __name__ == "__main__":
    require("OPENAI_API_KEY")
    asyncio.run(main())
