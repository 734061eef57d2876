"""ask_user in an OpenAI Agents SDK agent: the run pauses (an SDK interruption) while the question
waits in chat, and the same run resumes when the answer arrives on the answers feed.

Run it: ``python examples/openai_agents_defer.py``. With ``OPENAI_API_KEY`` set it talks to
OpenAI; without, a scripted model (bottom of this file) plays the model, offline. An in-memory
poster stands in for Slack/Discord, and a scripted teammate answers.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, RunState, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from bridge import tools_interactive
from bridge.asking import AskPolicy, ChatHandler
from bridge.frameworks.openai_agents import approve_answers, ask_ids, ask_user_tool
from bridge.memory_poster import MemoryPoster
from bridge.models import Answer
from bridge.record import Destination, Responder
from bridge.store.memory import MemoryStore


async def main() -> None:
    store, poster = MemoryStore(), MemoryPoster()  # RedisStore and the Slack poster in production
    handler = ChatHandler(
        poster, store, Destination(platform="memory", channel="C1"), AskPolicy(mode="defer")
    )
    [ask_user] = tools_interactive(callback=handler)
    model = "gpt-4.1" if os.environ.get("OPENAI_API_KEY") else ScriptedModel()
    agent = Agent(name="writer", model=model, tools=[ask_user_tool(ask_user)])
    config = RunConfig(tracing_disabled=not os.environ.get("OPENAI_API_KEY"))

    paused = await Runner.run(agent, "Write the release notes.", run_config=config)
    assert paused.interruptions  # the question waits in chat; the run is paused, not over
    saved, calls = paused.to_state().to_string(), ask_ids(paused)  # keep both, e.g. in Redis
    teammate = asyncio.create_task(teammate_answers(store, poster))

    async for delivery in store.feed("release-notes-agent"):
        state = await RunState.from_string(agent, saved)
        approve_answers(state, delivery, calls=calls)
        resumed = await Runner.run(agent, state, run_config=config)
        await store.ack(delivery)
        print(resumed.final_output)
        break
    await teammate


# -- the scripted model and teammate, so the example runs offline ------------------------------


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


async def teammate_answers(store: MemoryStore, poster: MemoryPoster) -> None:
    """Clicks "Full" on the posted question, as the Slack or Discord app would submit it."""
    posted = await poster.next_post()
    question = posted.questions.questions[0].question
    await store.submit(
        posted.id, Responder(user_id="U1"), [Answer(question=question, selected=("Full",))]
    )


if __name__ == "__main__":
    asyncio.run(main())
