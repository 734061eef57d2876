"""ask_user in a hand-written OpenAI Chat Completions loop (no agent framework).

Run it: ``python examples/openai_raw.py``. With ``OPENAI_API_KEY`` set it talks to OpenAI;
without, a scripted stand-in for the API (bottom of this file) plays the model, offline.
"""

from __future__ import annotations

import json
import os
from typing import Any

from openai import OpenAI

from bridge import AskUserTool, Question, tools_interactive
from bridge.frameworks.providers import openai_chat_tool, run_tool_call


def pick_first(questions: list[Question], context: dict[str, Any]) -> dict[str, str]:
    """Your handler: post to Slack, Discord, a web form... Here: always the first option."""
    return {q.question: q.options[0].label for q in questions}


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
    [ask_user] = tools_interactive(callback=pick_first)
    client = OpenAI() if os.environ.get("OPENAI_API_KEY") else scripted_openai()
    print(run(client, "Write the release notes.", ask_user))


# -- a scripted stand-in for the OpenAI API, so the example runs offline --------------------------


def scripted_openai() -> OpenAI:
    """An ``OpenAI`` client whose HTTP transport is a tiny scripted model: it asks one question,
    then answers with what the tool returned."""
    import httpx2 as httpx

    def model(request: httpx.Request) -> httpx.Response:
        last = json.loads(request.content)["messages"][-1]
        if last["role"] == "tool":
            answer = json.loads(last["content"])["answers"][0]
            message: dict[str, Any] = {
                "role": "assistant",
                "content": f"Writing them as: {answer['selected']}",
            }
        else:
            questions = [
                {
                    "question": "How detailed should the release notes be?",
                    "header": "Detail",
                    "options": [
                        {"label": "Summary", "description": "A few bullet points"},
                        {"label": "Full", "description": "Every change, grouped by area"},
                    ],
                    "multiSelect": None,
                }
            ]
            call = {"name": "ask_user", "arguments": json.dumps({"questions": questions})}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
            }
        return httpx.Response(
            200,
            json={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4.1",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            },
        )

    return OpenAI(
        api_key="offline",
        base_url="http://127.0.0.1:9/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(model)),
    )


if __name__ == "__main__":
    main()
