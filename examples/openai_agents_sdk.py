"""ask_user in an OpenAI Agents SDK agent.

Run it: ``python examples/openai_agents_sdk.py``. With ``OPENAI_API_KEY`` set it talks to OpenAI;
without, a scripted model (bottom of this file) plays the model, offline.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from bridge import Question, tools_interactive
from bridge.frameworks.openai_agents import ask_user_tool


def pick_first(questions: list[Question], context: dict[str, Any]) -> dict[str, str]:
    """Your handler: post to Slack, Discord, a web form... Here: always the first option."""
    return {q.question: q.options[0].label for q in questions}


async def main() -> None:
    [ask_user] = tools_interactive(callback=pick_first)
    model = "gpt-4.1" if os.environ.get("OPENAI_API_KEY") else ScriptedModel()
    agent = Agent(name="writer", model=model, tools=[ask_user_tool(ask_user)])
    offline = RunConfig(tracing_disabled=not os.environ.get("OPENAI_API_KEY"))
    result = await Runner.run(agent, "Write the release notes.", run_config=offline)
    print(result.final_output)


# -- a scripted model, so the example runs offline ----------------------------------------------


class ScriptedModel(Model):
    """Asks one question, then answers with what the tool returned."""

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [] if isinstance(input, str) else list(input)
        outputs = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if outputs:
            answer = json.loads(outputs[-1]["output"])["answers"][0]
            text = ResponseOutputText(
                type="output_text", text=f"Writing them as: {answer['selected']}", annotations=[]
            )
            out: Any = ResponseOutputMessage(
                id="msg_1", type="message", role="assistant", status="completed", content=[text]
            )
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
            out = ResponseFunctionToolCall(
                type="function_call",
                call_id="call_1",
                name="ask_user",
                arguments=json.dumps({"questions": [question]}),
            )
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this scripted model does not stream")


if __name__ == "__main__":
    asyncio.run(main())
