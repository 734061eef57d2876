"""ask_user in a pydantic-ai agent: the run stops while the question waits in chat, and resumes
when the answer arrives on the answers feed.

Run it: ``python examples/pydantic_ai_agent.py``. It runs offline: a scripted ``FunctionModel``
plays the model (swap in ``"openai:gpt-4.1"`` for a real one), an in-memory poster stands in for
Slack/Discord, and a scripted teammate answers.
"""

from __future__ import annotations

import asyncio
import json

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bridge import tools_interactive
from bridge.asking import AskPolicy, ChatHandler
from bridge.frameworks.pydantic_ai import ask_user_tool, deferred_tool_results
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
    agent = Agent(
        FunctionModel(scripted_model),
        tools=[ask_user_tool(ask_user)],
        output_type=[str, DeferredToolRequests],
    )

    result = await agent.run("Write the release notes.")
    assert isinstance(result.output, DeferredToolRequests)  # the question waits in chat
    teammate = asyncio.create_task(teammate_answers(store, poster))

    async for delivery in store.feed("release-notes-agent"):
        resumed = await agent.run(
            message_history=result.all_messages(),
            deferred_tool_results=deferred_tool_results(result.output, delivery),
        )
        await store.ack(delivery)
        print(resumed.output)
        break
    await teammate


# -- the scripted model and teammate, so the example runs offline ------------------------------


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks one question, then answers with what the tool returned."""
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if returns:
        answer = json.loads(returns[0].model_response_str())["answers"][0]
        return ModelResponse(parts=[TextPart(f"Writing them as: {answer['selected']}")])
    question = {
        "question": "How detailed should the release notes be?",
        "header": "Detail",
        "options": [
            {"label": "Summary", "description": "A few bullet points"},
            {"label": "Full", "description": "Every change, grouped by area"},
        ],
    }
    return ModelResponse(parts=[ToolCallPart("ask_user", {"questions": [question]})])


async def teammate_answers(store: MemoryStore, poster: MemoryPoster) -> None:
    """Clicks "Full" on the posted question, as the Slack or Discord app would submit it."""
    posted = await poster.next_post()
    question = posted.questions.questions[0].question
    await store.submit(
        posted.id, Responder(user_id="U1"), [Answer(question=question, selected=("Full",))]
    )


if __name__ == "__main__":
    asyncio.run(main())
