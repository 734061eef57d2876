"""ask_user in a chatlas chat.

Run it: ``python examples/chatlas_agent.py``, with ``OPENAI_API_KEY`` set (and ``OPENAI_BASE_URL``
for an endpoint other than OpenAI's that speaks its Responses API). The question goes to Slack
when ``SLACK_BOT_TOKEN`` is set (see ``handler.py`` for the rest); without it, a stand-in picks
each first option.
"""

from __future__ import annotations

import os

import chatlas
from credentials import require
from handler import ask_handler

from bridge import tools_interactive
from bridge.frameworks.chatlas import ask_user_tool


def main() -> None:
    base_url = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
    chat = chatlas.ChatOpenAI(model="gpt-4.1", base_url=base_url)
    [ask_user] = tools_interactive(callback=ask_handler())
    chat.register_tool(ask_user_tool(ask_user))
    print(chat.chat("Write the release notes.", echo="none", stream=False).get_content())


if __name__ == "__main__":
    require("OPENAI_API_KEY")
    main()
