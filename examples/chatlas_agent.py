"""ask_user in a chatlas chat.

Run it: ``python examples/chatlas_agent.py``. With ``OPENAI_API_KEY`` set it talks to OpenAI;
without, a scripted stand-in for the OpenAI Responses API (bottom of this file) plays the model.
"""

from __future__ import annotations

import json
import os
from typing import Any

import chatlas

from bridge import Question, tools_interactive
from bridge.frameworks.chatlas import ask_user_tool


def pick_first(questions: list[Question], context: dict[str, Any]) -> dict[str, str]:
    """Your handler: post to Slack, Discord, a web form... Here: always the first option."""
    return {q.question: q.options[0].label for q in questions}


def main() -> None:
    client: dict[str, Any] = {} if os.environ.get("OPENAI_API_KEY") else scripted_openai()
    chat = chatlas.ChatOpenAI(model="gpt-4.1", **client)
    [ask_user] = tools_interactive(callback=pick_first)
    chat.register_tool(ask_user_tool(ask_user))
    print(chat.chat("Write the release notes.", echo="none", stream=False).get_content())


# -- a scripted stand-in for the OpenAI Responses API, so the example runs offline -------------


def scripted_openai() -> dict[str, Any]:
    """``ChatOpenAI`` arguments whose HTTP transport is a tiny scripted model: it asks one
    question, then answers with what the tool returned."""
    import httpx2 as httpx

    def model(request: httpx.Request) -> httpx.Response:
        last = json.loads(request.content)["input"][-1]
        if last.get("type") == "function_call_output":
            answer = json.loads(last["output"])["answers"][0]
            text = f"Writing them as: {answer['selected']}"
            output = [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ]
        else:
            question = {
                "question": "How detailed should the release notes be?",
                "header": "Detail",
                "options": [
                    {"label": "Summary", "description": "A few bullet points"},
                    {"label": "Full", "description": "Every change, grouped by area"},
                ],
                "multiSelect": None,
            }
            arguments = json.dumps({"questions": [question]})
            output = [
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "ask_user",
                    "arguments": arguments,
                    "status": "completed",
                }
            ]
        return httpx.Response(
            200,
            json={
                "id": "resp_1",
                "object": "response",
                "created_at": 0,
                "model": "gpt-4.1",
                "status": "completed",
                "output": output,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            },
        )

    return {
        "api_key": "offline",
        "kwargs": {"http_client": httpx.Client(transport=httpx.MockTransport(model))},
    }


if __name__ == "__main__":
    main()
