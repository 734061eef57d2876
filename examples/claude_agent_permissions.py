"""Claude Agent SDK: Claude's own AskUserQuestion, answered through a bridge handler.

``can_use_tool(handler)`` answers AskUserQuestion through any bridge handler -- a Slack or Discord
``ChatHandler``, the terminal prompt, or a function like the one below -- and asks the same handler
"Allow" / "Deny" for every other tool Claude wants to run (pass ``fallback=`` to decide those
yourself). The stand-in below picks each first option, so it also allows every tool.

``python examples/claude_agent_permissions.py`` runs a live query (needs the Claude Code CLI and an
API key); ``python examples/claude_agent_permissions.py --offline`` runs ``demo()``: the same
callback answering one AskUserQuestion call, printed as JSON. (The file is not named
``claude_agent_sdk.py``: run as a script, that name would shadow the package it imports.)
"""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ToolPermissionContext, query

from bridge import Question
from bridge.frameworks.claude_agent_sdk import can_use_tool


def pick_first(questions: list[Question], context: dict[str, Any]) -> dict[str, str]:
    """A stand-in handler: chooses each question's first option."""
    return {q.question: q.options[0].label for q in questions}


options = ClaudeAgentOptions(can_use_tool=can_use_tool(pick_first))


async def demo() -> dict[str, Any]:
    """What Claude Code sends for AskUserQuestion, and what the callback answers."""
    assert options.can_use_tool is not None
    decision = await options.can_use_tool(
        "AskUserQuestion",
        {
            "questions": [
                {
                    "question": "Which database should the service use?",
                    "header": "Database",
                    "options": [
                        {"label": "Postgres", "description": "Relational, battle-tested"},
                        {"label": "SQLite", "description": "One file, no server"},
                    ],
                    "multiSelect": False,
                }
            ]
        },
        ToolPermissionContext(tool_use_id="toolu_1"),
    )
    return getattr(decision, "updated_input", None) or {}


async def main() -> None:
    async def prompt() -> Any:  # can_use_tool needs the streaming prompt form
        yield {
            "type": "user",
            "message": {"role": "user", "content": "Ask me which database to use, then stop."},
        }

    async for message in query(prompt=prompt(), options=options):
        print(message)


if __name__ == "__main__":
    import asyncio
    import json
    import sys

    if "--offline" in sys.argv[1:]:
        print(json.dumps(asyncio.run(demo())))
    else:
        asyncio.run(main())
