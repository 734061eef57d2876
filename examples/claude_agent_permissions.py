"""Claude Agent SDK: Claude's own AskUserQuestion, and its permission prompts, answered through a
bridge handler.

Run it: ``python examples/claude_agent_permissions.py``, with ``ANTHROPIC_API_KEY`` set (and
``ANTHROPIC_BASE_URL`` for an endpoint other than Anthropic's that speaks its Messages API; then
also ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``, as Claude Code otherwise sends telemetry, error
reports and update checks to Anthropic) -- or, for a Claude subscription, with
``CLAUDE_CODE_OAUTH_TOKEN`` from ``claude setup-token``. The SDK runs the Claude Code CLI its wheel
bundles, which reads these variables itself, in the current directory: a tool it is allowed to run
(a ``Write``, a ``Bash`` command) works there. The questions go to Slack when ``SLACK_BOT_TOKEN`` is
set (see ``handler.py`` for the rest); without it, a stand-in picks each first option -- "Allow",
for a permission prompt.

``can_use_tool(handler)`` answers AskUserQuestion through any bridge handler -- a Slack or Discord
``ChatHandler``, the terminal prompt, a function -- and asks the same handler "Allow" / "Deny" for
every other tool Claude Code asks permission for (pass ``fallback=`` to decide those yourself).
(The file is not named ``claude_agent_sdk.py``: run as a script, that name would shadow the
package it imports.)
"""

from __future__ import annotations

import asyncio

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query
from credentials import require
from handler import ask_handler

from bridge.frameworks.claude_agent_sdk import can_use_tool


async def main() -> None:
    options = ClaudeAgentOptions(can_use_tool=can_use_tool(ask_handler()))
    async for message in query(prompt="Write the release notes.", options=options):
        if isinstance(message, ResultMessage):
            print(message.result)


if __name__ == "__main__":
    require("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")
    asyncio.run(main())
