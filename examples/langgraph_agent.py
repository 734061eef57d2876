"""A LangGraph agent that asks a person, pauses, and resumes with their answers.

Runs offline as it is (a scripted chat model stands in for a real one); swap ``model`` for any
chat model with tool calling, e.g. ``init_chat_model("openai:gpt-4.1")``.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from bridge.frameworks.langchain import ask_user_interrupt_tool


def build_agent(model: BaseChatModel) -> Any:
    tools = [ask_user_interrupt_tool()]
    bound = model.bind_tools(tools)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver())  # interrupts need a checkpointer


class ScriptedModel(GenericFakeChatModel):
    """Stands in for a real chat model: replies from a script, accepts any tools."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


QUESTIONS = [
    {
        "question": "Which format should the report use?",
        "header": "Format",
        "options": [
            {"label": "Summary", "description": "One page of key points"},
            {"label": "Detailed", "description": "Every finding with evidence"},
        ],
    }
]


async def main() -> str:
    model = ScriptedModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "ask_user", "args": {"questions": QUESTIONS}, "id": "call_1"}
                    ],
                ),
                AIMessage("Writing the summary now."),
            ]
        )
    )
    agent = build_agent(model)
    config = {"configurable": {"thread_id": "report-42"}}

    paused = await agent.ainvoke({"messages": [("user", "Write the report")]}, config)
    (pending,) = paused["__interrupt__"]
    print("asking:", [q["question"] for q in pending.value["questions"]])

    # The person's answer (from Slack, Discord, a web form...): question text -> label.
    answers = {"Which format should the report use?": "Summary"}
    done = await agent.ainvoke(Command(resume=answers), config)
    tool_result = json.loads(done["messages"][-2].content)
    print("model read:", tool_result["answers"])
    return str(done["messages"][-1].content)


if __name__ == "__main__":
    import asyncio

    print(asyncio.run(main()))
