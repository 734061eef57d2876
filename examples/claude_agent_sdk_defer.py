"""Claude Agent SDK: Claude's own AskUserQuestion, deferred the SDK's way. A PreToolUse hook
answers "defer", so the run stops while the question waits in chat; the same session resumes
when the answer arrives on the answers feed, and Claude Code replays the call with the answers.

Run it: ``python examples/claude_agent_sdk_defer.py``, with ``ANTHROPIC_API_KEY`` set (and
``ANTHROPIC_BASE_URL`` for an endpoint other than Anthropic's that speaks its Messages API; then
also ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, as Claude Code otherwise sends telemetry, error
reports and update checks to Anthropic) -- or, for a Claude subscription, with
``CLAUDE_CODE_OAUTH_TOKEN`` from ``claude setup-token``. The SDK runs the Claude Code CLI its wheel
bundles, which reads these variables itself; the resumed session is found under the same home and
working directory. The question goes to Slack when ``SLACK_BOT_TOKEN`` is set, the ask kept in the
Redis at ``REDIS_URL`` whose answers feed brings the teammate's click (see ``handler.py`` for the
rest); without it, an in-memory store and a stand-in teammate who picks each first option.

Both options are needed: Claude Code offers the model AskUserQuestion only when its permission
prompts go to the SDK's ``can_use_tool``, which also gets the other tools' prompts (those cannot
wait for the feed, so it asks through a handler that waits). (The file is not named
``claude_agent_sdk.py``: run as a script, that name would shadow the package it imports.)
"""

from __future__ import annotations

import asyncio

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, query
from credentials import require
from handler import ask_handler, deferring_handler

from bridge.frameworks.claude_agent_sdk import can_use_tool, defer_hooks, resume_options


async def main() -> None:
    handler, store = deferring_handler()  # a ChatHandler with AskPolicy(mode="defer")
    hooks, asking = defer_hooks(handler), can_use_tool(ask_handler())
    options = ClaudeAgentOptions(hooks=hooks, can_use_tool=asking)

    stopped = [m async for m in query(prompt="Write the release notes.", options=options)][-1]
    assert isinstance(stopped, ResultMessage) and stopped.stop_reason == "tool_deferred"

    async for delivery in store.feed("release-notes-agent"):
        resumed = resume_options(options, stopped, delivery)  # the same session, answered
        async with ClaudeSDKClient(resumed) as claude:  # not query(), which closes stdin early
            async for message in claude.receive_response():
                if isinstance(message, ResultMessage):
                    print(message.result)
        await store.ack(delivery)
        break


if __name__ == "__main__":
    require("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")
    asyncio.run(main())
