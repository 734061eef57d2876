"""A LangGraph agent that asks a person, pauses, and resumes with their answers.

Run it: ``python examples/langgraph_agent.py``, with ``OPENAI_API_KEY`` set (and
``OPENAI_BASE_URL`` for an OpenAI-compatible endpoint other than OpenAI's). The model is
LangChain's ``ChatOpenAI``, from ``pip install langchain-openai``; any chat model with tool calling
works. The paused graph's questions go to Slack when ``SLACK_BOT_TOKEN`` is set (see
``handler.py`` for the rest); without it, a stand-in picks each first option.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from credentials import require
from handler import ask_handler
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

from bridge import tools_interactive
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


async def main() -> str:
    agent = build_agent(ChatOpenAI(model="gpt-4.1"))
    config = {"configurable": {"thread_id": "report-42"}}
    [ask_user] = tools_interactive(callback=ask_handler())

    paused = await agent.ainvoke({"messages": [("user", "Write the report")]}, config)
    (pending,) = paused["__interrupt__"]
    print("asking:", [q["question"] for q in pending.value["questions"]])

    # Ask the person (in Slack, or the stand-in): the answers JSON resumes the graph.
    answers = await ask_user.acall(pending.value["questions"])
    done = await agent.ainvoke(Command(resume=answers), config)
    tool_result = json.loads(done["messages"][-2].content)
    print("model read:", tool_result["answers"])
    return str(done["messages"][-1].content)


if __name__ == "__main__":
    require("OPENAI_API_KEY")
    print(asyncio.run(main()))
