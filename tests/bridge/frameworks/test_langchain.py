"""LangChain / LangGraph adapter, driven end to end through a real graph with a fake chat model.

The model asks (a tool call), the bridge answers (a handler, or an interrupt resumed with
``Command``), and the test checks what the model reads next: the answers JSON, a fixable error, or
the deferred instructions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command
from pydantic import Field

from bridge import AskUserDeferred, Question, set_ask_user_callback, tools_interactive
from bridge.frameworks.langchain import (
    INTERRUPT_KIND,
    ask_user_interrupt_tool,
    ask_user_tool,
)
from bridge.tool import PARAMETERS, tool_ask_user
from tests.support.samples import SHORT_FORMAT_AND_SECTIONS as QUESTIONS


class RecordingModel(GenericFakeChatModel):
    """A scripted chat model that accepts tools and remembers what it was shown."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def scripted(*replies: AIMessage) -> RecordingModel:
    return RecordingModel(messages=iter(replies), seen=[])


def ask(questions: Any, call_id: str = "call_1") -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "ask_user", "args": {"questions": questions}, "id": call_id}]
    )


def graph(model: RecordingModel, tool: BaseTool, checkpointer: Any = None) -> Any:
    tools = [tool]
    bound = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", tools_condition)
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=checkpointer)


def tool_reply_seen(model: RecordingModel) -> ToolMessage:
    """The tool message the model read on its last turn."""
    message = model.seen[-1][-1]
    assert isinstance(message, ToolMessage)
    return message


# -- the BaseTool, answered by a handler ---------------------------------------------------------


def test_tool_definition_is_the_core_contract() -> None:
    tool = ask_user_tool(lambda qs, ctx: {})
    assert tool.name == "ask_user"
    assert tool.description == tool_ask_user.description
    function = convert_to_openai_tool(tool)["function"]
    assert function["name"] == "ask_user"
    assert function["parameters"] == dict(PARAMETERS)
    assert tool.handle_tool_error is True


async def test_answered_call_model_reads_answers_json() -> None:
    asked: list[list[Question]] = []

    async def handler(questions: list[Question], context: dict[str, Any]) -> Any:
        asked.append(questions)
        return {"Which format?": "Detailed", "Which sections?": ["Results", "Intro", "more charts"]}

    model = scripted(ask(QUESTIONS), AIMessage("Thanks, writing it."))
    out = await graph(model, ask_user_tool(handler)).ainvoke({"messages": [("user", "report")]})

    assert out["messages"][-1].content == "Thanks, writing it."
    assert [q.question for q in asked[0]] == ["Which format?", "Which sections?"]
    reply = tool_reply_seen(model)
    assert reply.status == "success"
    result = json.loads(str(reply.content))
    assert result["answers"] == [
        {"question": "Which format?", "selected": ["Detailed"], "other_text": None},
        {
            "question": "Which sections?",
            "selected": ["Intro", "Results"],
            "other_text": "more charts",
        },
    ]
    assert result["questions"][0]["multiSelect"] is False
    assert reply.artifact is None


def test_sync_graph_answers_through_sync_handler() -> None:
    model = scripted(ask(QUESTIONS[:1]), AIMessage("ok"))
    tool = ask_user_tool(lambda qs, ctx: {"Which format?": "Summary"})
    graph(model, tool).invoke({"messages": [("user", "go")]})
    result = json.loads(str(tool_reply_seen(model).content))
    assert result["answers"][0]["selected"] == ["Summary"]


@pytest.mark.parametrize(
    ("questions", "expected"),
    [
        ('[{"question": "Q?"}]', "not a string"),
        ([{**QUESTIONS[0], "header": "Much too long a header"}], "questions[0].header"),
        ([QUESTIONS[0], QUESTIONS[0]], "questions[1].question repeats"),
    ],
)
async def test_call_to_fix_is_an_error_the_model_reads(questions: Any, expected: str) -> None:
    called = False

    def handler(qs: Any, ctx: Any) -> Any:
        nonlocal called
        called = True
        return {}

    model = scripted(ask(questions), AIMessage("Let me fix that."))
    await graph(model, ask_user_tool(handler)).ainvoke({"messages": [("user", "go")]})
    reply = tool_reply_seen(model)
    assert reply.status == "error"
    assert "ask_user call was rejected" in str(reply.content)
    assert expected in str(reply.content)
    assert not called


async def test_handler_failure_is_an_error_the_model_reads() -> None:
    def handler(qs: Any, ctx: Any) -> Any:
        raise RuntimeError("Slack is down")

    model = scripted(ask(QUESTIONS[:1]), AIMessage("I'll assume."))
    await graph(model, ask_user_tool(handler)).ainvoke({"messages": [("user", "go")]})
    reply = tool_reply_seen(model)
    assert reply.status == "error"
    assert "could not get the person's answer: Slack is down" in str(reply.content)


async def test_deferral_model_reads_instructions_host_gets_ask_id() -> None:
    def handler(qs: Any, ctx: Any) -> AskUserDeferred:
        return AskUserDeferred(extra={"ask_id": "ask-123"})

    model = scripted(ask(QUESTIONS[:1]), AIMessage("Waiting for your answers."))
    await graph(model, ask_user_tool(handler)).ainvoke({"messages": [("user", "go")]})
    reply = tool_reply_seen(model)
    result = json.loads(str(reply.content))
    assert result["status"] == "deferred"
    assert "End your turn" in result["instructions"]
    assert "ask-123" not in str(reply.content)
    assert reply.artifact == {"ask_id": "ask-123"}


# -- LangGraph: deferral is interrupt(), resume is Command(resume=answers) ----------------------

THREAD = {"configurable": {"thread_id": "t1"}}
JSON_ANSWERS = {
    "questions": QUESTIONS,
    "answers": [
        {"question": "Which format?", "selected": ["Summary"], "other_text": None},
        {"question": "Which sections?", "selected": ["Results", "Appendix"], "other_text": None},
    ],
}


@pytest.mark.parametrize(
    "resume",
    [
        pytest.param(
            {"Which format?": "Summary", "Which sections?": ["Appendix", "Results"]}, id="mapping"
        ),
        pytest.param(JSON_ANSWERS["answers"], id="answer-list"),
        pytest.param(JSON_ANSWERS, id="answers-json"),
        pytest.param(json.dumps(JSON_ANSWERS), id="answers-json-text"),
    ],
)
async def test_interrupt_then_resume_round_trip(resume: Any) -> None:
    model = scripted(ask(QUESTIONS), AIMessage("Summary with results and appendix."))
    app = graph(model, ask_user_interrupt_tool(), InMemorySaver())

    paused = await app.ainvoke({"messages": [("user", "report")]}, THREAD)
    (pending,) = paused["__interrupt__"]
    assert pending.value["kind"] == INTERRUPT_KIND
    assert [q["question"] for q in pending.value["questions"]] == [
        "Which format?",
        "Which sections?",
    ]
    assert pending.value["questions"][1]["multiSelect"] is True
    assert len(model.seen) == 1  # the model has not run again: the graph is paused

    done = await app.ainvoke(Command(resume=resume), THREAD)
    assert done["messages"][-1].content == "Summary with results and appendix."
    reply = tool_reply_seen(model)
    assert reply.status == "success"
    assert json.loads(str(reply.content))["answers"] == JSON_ANSWERS["answers"]


async def test_interrupt_tool_rejects_without_pausing() -> None:
    model = scripted(ask([{"question": "Q?", "header": "H", "options": []}]), AIMessage("fixing"))
    app = graph(model, ask_user_interrupt_tool(), InMemorySaver())
    out = await app.ainvoke({"messages": [("user", "go")]}, THREAD)
    assert "__interrupt__" not in out
    reply = tool_reply_seen(model)
    assert reply.status == "error"
    assert "questions[0].options" in str(reply.content)


async def test_resume_with_unknown_question_is_an_error_the_model_reads() -> None:
    model = scripted(ask(QUESTIONS[:1]), AIMessage("hmm"))
    app = graph(model, ask_user_interrupt_tool(), InMemorySaver())
    await app.ainvoke({"messages": [("user", "go")]}, THREAD)
    await app.ainvoke(Command(resume={"Not asked?": "x"}), THREAD)
    reply = tool_reply_seen(model)
    assert reply.status == "error"
    assert "could not get the person's answer" in str(reply.content)
    assert "Not asked?" in str(reply.content)


def test_interrupt_sync_graph_round_trip() -> None:
    model = scripted(ask(QUESTIONS[:1]), AIMessage("done"))
    app = graph(model, ask_user_interrupt_tool(), InMemorySaver())
    paused = app.invoke({"messages": [("user", "go")]}, THREAD)
    assert paused["__interrupt__"][0].value["questions"][0]["question"] == "Which format?"
    app.invoke(Command(resume={"Which format?": "my own format"}), THREAD)
    answer = json.loads(str(tool_reply_seen(model).content))["answers"][0]
    assert answer == {"question": "Which format?", "selected": [], "other_text": "my own format"}


async def test_accepts_a_bridge_tool_or_uses_the_global_chain() -> None:
    own = tools_interactive(lambda qs, ctx: {"Which format?": "Detailed"})[0]
    model = scripted(ask(QUESTIONS[:1]), AIMessage("ok"))
    await graph(model, ask_user_tool(own)).ainvoke({"messages": [("user", "go")]})
    assert json.loads(str(tool_reply_seen(model).content))["answers"][0]["selected"] == ["Detailed"]

    previous = set_ask_user_callback(lambda qs, ctx: {"Which format?": "Summary"})
    try:
        model = scripted(ask(QUESTIONS[:1]), AIMessage("ok"))
        await graph(model, ask_user_tool()).ainvoke({"messages": [("user", "go")]})
    finally:
        set_ask_user_callback(previous)
    assert json.loads(str(tool_reply_seen(model).content))["answers"][0]["selected"] == ["Summary"]


# -- the arguments object: the same check, and the same words, as every host ---------------------


def call_with(args: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "ask_user", "args": args, "id": "call_1"}])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"questions": QUESTIONS[:1], "urgent": True}, "unknown argument 'urgent' (remove it)"),
        ({}, 'the "questions" argument is missing'),
        ({"questions": None}, "questions must be an array"),
    ],
)
@pytest.mark.parametrize("make_tool", [ask_user_tool, ask_user_interrupt_tool], ids=["tool", "lg"])
async def test_arguments_are_checked_like_every_host(
    args: dict[str, Any], expected: str, make_tool: Any
) -> None:
    called = False

    def handler(qs: Any, ctx: Any) -> Any:
        nonlocal called
        called = True
        return {}

    tool = ask_user_tool(handler) if make_tool is ask_user_tool else make_tool()
    model = scripted(call_with(args), AIMessage("fixing"))
    out = await graph(model, tool, InMemorySaver()).ainvoke({"messages": [("user", "go")]}, THREAD)
    assert "__interrupt__" not in out
    reply = tool_reply_seen(model)
    assert reply.status == "error"
    assert "The ask_user call was rejected" in str(reply.content)
    assert expected in str(reply.content)
    assert not called


async def test_null_multiselect_means_left_out() -> None:
    question = {**QUESTIONS[0], "multiSelect": None}
    model = scripted(call_with({"questions": [question]}), AIMessage("ok"))
    tool = ask_user_tool(lambda qs, ctx: {"Which format?": "Summary"})
    await graph(model, tool).ainvoke({"messages": [("user", "go")]})
    reply = tool_reply_seen(model)
    assert reply.status == "success"
    result = json.loads(str(reply.content))
    assert result["questions"][0]["multiSelect"] is False
    assert result["answers"][0]["selected"] == ["Summary"]


async def test_global_chain_gets_the_given_context() -> None:
    seen: list[dict[str, Any]] = []

    def handler(qs: Any, ctx: dict[str, Any]) -> Any:
        seen.append(ctx)
        return {"Which format?": "Summary"}

    previous = set_ask_user_callback(handler)
    try:
        model = scripted(ask(QUESTIONS[:1]), AIMessage("ok"))
        tool = ask_user_tool(context={"channel": "C42"})
        await graph(model, tool).ainvoke({"messages": [("user", "go")]})
    finally:
        set_ask_user_callback(previous)
    assert seen == [{"channel": "C42"}]
    assert json.loads(str(tool_reply_seen(model).content))["answers"][0]["selected"] == ["Summary"]
