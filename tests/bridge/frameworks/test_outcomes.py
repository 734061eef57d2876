"""Every outcome of an ``ask_user`` call, through every adapter, as its users run it.

One test per cell of ``docs/outcomes.md``. ``test_outcome[ADAPTER-OUTCOME]`` runs one call through
the framework's own loop with a scripted model -- an httpx ``MockTransport`` behind the real
``openai``, ``anthropic`` and ``chatlas`` clients, pydantic-ai's ``FunctionModel``, a fake LangChain
chat model in a LangGraph graph, a scripted Agents SDK ``Model``, the Claude Agent SDK's
``can_use_tool`` and hook entry points, the MCP client session -- asking a real
:class:`ChatHandler` over a ``MemoryStore`` and a ``MemoryPoster``.
``test_resumed[ADAPTER-OUTCOME]`` defers the ask the framework's way and resumes the run from the
answers feed.

Each outcome happens for real: a teammate task clicks (``store.pick``) or types (``store.submit``)
once the question is posted, the ask is cancelled in the store, a short expiry passes and a sweep
expires it, nobody answers within a tiny wait, the poster refuses the post, the store cannot be
reached. Each test asserts exactly what the model reads and what the host gets;
``test_the_table_names_a_test_for_every_cell`` keeps the table and these tests in step.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import chatlas
import httpx2 as httpx
import pytest
from agents import Agent as AgentsAgent
from agents import Model, ModelResponse, RunConfig, Runner, RunState, Usage
from agents.items import ToolCallOutputItem
from anthropic import AsyncAnthropic
from chatlas.types import ContentToolResult
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookContext,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    ToolPermissionContext,
    query,
)
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command
from mcp import Client
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from pydantic import Field
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.messages import ModelResponse as PydanticResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from bridge import Answer, AskUserTool, QuestionSet, tools_interactive
from bridge.asking import AskPolicy, ChatHandler
from bridge.deferred import DEFAULT_INSTRUCTIONS
from bridge.errors import InvalidQuestions, NotAnswered, PostFailed, ToolRejected
from bridge.feed import render_delivery
from bridge.frameworks import chatlas as chatlas_adapter
from bridge.frameworks import claude_agent_sdk as claude_adapter
from bridge.frameworks import langchain as langchain_adapter
from bridge.frameworks import openai_agents as agents_adapter
from bridge.frameworks import pydantic_ai as pydantic_adapter
from bridge.frameworks.providers import anthropic_tool, arun_tool_call, openai_chat_tool
from bridge.mcp_server import create_server
from bridge.memory_poster import MemoryPoster
from bridge.record import AskRecord, AskStatus, Destination, Responder
from bridge.result import HANDLER_FAILED, answers_result, unanswered_text
from bridge.store.base import Delivery, StoreUnavailable
from bridge.store.memory import MemoryStore
from bridge.validation import validate_questions
from tests.support.samples import DATABASE_QUESTION
from tests.support.scripted_claude import ASKED, QUESTION, ScriptedClaudeCode

ROOT = Path(__file__).resolve().parents[3]
TABLE = ROOT / "docs" / "outcomes.md"

ADAPTERS = (
    "raw",
    "chatlas",
    "pydantic-ai",
    "langchain",
    "openai-agents",
    "claude-agent-sdk",
    "mcp",
)
"""The table's columns, in order (test ids)."""
COLUMN_TITLES = (
    "raw OpenAI / Anthropic",
    "chatlas",
    "pydantic-ai",
    "LangChain / LangGraph",
    "OpenAI Agents",
    "Claude Agent SDK",
    "MCP",
)
OUTCOMES = (
    "answered",
    "typed text",
    "invalid call",
    "deferred",
    "nobody answered",
    "post refused",
    "store down",
    "cancelled",
    "expired",
)
"""The table's rows, in order (test ids)."""
RESUMABLE = ("pydantic-ai", "langchain", "openai-agents", "claude-agent-sdk")
"""Adapters with a deferral-then-resume path: the run pauses, the feed's delivery resumes it."""
DELIVERED = ("answered", "typed text", "cancelled", "expired")
"""How a deferred ask can end, each a kind of delivery the answers feed emits."""

ERRORS = frozenset(OUTCOMES) - {"answered", "typed text", "deferred"}
NOT_ASKED = frozenset({"invalid call", "post refused", "store down"})
"""Outcomes in which nobody saw the question (nothing posted)."""

TEAMMATE = Responder(user_id="U1", name="Ada")
TYPED = "MySQL, please"
REFUSAL = "channel_not_found"
DOWN = "ask store: Redis did not answer during create (ConnectionError: Connection refused)"
WAIT = 10.0
"""A waiting call's wait when someone acts on the ask: never reached."""
TINY = 0.05
"""The wait nobody answers within."""
EXPIRES = 0.3
"""An expiry that passes while the call waits (or the run is paused)."""

VALID: dict[str, Any] = {"questions": [DATABASE_QUESTION]}
INVALID: dict[str, Any] = {"questions": [{**DATABASE_QUESTION, "options": []}]}


def _rejection(arguments: dict[str, Any]) -> str:
    try:
        validate_questions(arguments["questions"])
    except InvalidQuestions as exc:
        return exc.message
    raise AssertionError(f"{arguments} is a valid call")


REJECTED = _rejection(INVALID)
"""What the model reads for INVALID: every problem, with how to fix it."""


# -- the world: a chat handler over the in-memory store and poster, and what people do -----------


class StoreDown(MemoryStore):
    """The store while Redis is unreachable: the ask's first operation raises
    ``StoreUnavailable``, as ``RedisStore`` does then."""

    async def create(self, record: AskRecord) -> None:
        raise StoreUnavailable(DOWN)


def policy(outcome: str, *, resumed: bool) -> AskPolicy:
    """The handler's policy producing ``outcome``. A run to resume defers after a tiny wait
    (``on_timeout="defer"``); ``test_outcome``'s deferral defers at once (``mode="defer"``)."""
    expires = EXPIRES if outcome == "expired" else 3600.0
    if resumed:
        return AskPolicy(wait=TINY, on_timeout="defer", expires=expires)
    if outcome == "deferred":
        return AskPolicy(mode="defer")
    if outcome == "nobody answered":
        return AskPolicy(wait=TINY, on_timeout="error")
    return AskPolicy(wait=WAIT, expires=expires)


@dataclass
class World:
    """One outcome for real: the handler, its store and poster, and what people do with a post."""

    outcome: str
    resumed: bool = False
    tell_model_who: bool = False
    store: MemoryStore = field(init=False)
    poster: MemoryPoster = field(init=False)
    handler: ChatHandler = field(init=False)
    tool: AskUserTool = field(init=False)

    def __post_init__(self) -> None:
        self.store = StoreDown() if self.outcome == "store down" else MemoryStore()
        refusal = RuntimeError(REFUSAL) if self.outcome == "post refused" else None
        self.poster = MemoryPoster(fail_post=refusal)
        self.handler = ChatHandler(
            self.poster,
            self.store,
            Destination(platform="memory", channel="C1"),
            policy(self.outcome, resumed=self.resumed).model_copy(
                update={"tell_model_who": self.tell_model_who}
            ),
        )
        [self.tool] = tools_interactive(callback=self.handler)

    async def act(self, posted: AskRecord) -> None:
        """What the teammate, the operator or time does with the posted ask (a call fixed after
        an invalid one is answered)."""
        if self.outcome in ("answered", "invalid call"):
            assert (await self.store.pick(posted.id, TEAMMATE, 0, 0)).ok
        elif self.outcome == "typed text":
            typed = Answer(question=posted.questions.questions[0].question, other_text=TYPED)
            assert (await self.store.submit(posted.id, TEAMMATE, [typed])).ok
        elif self.outcome == "cancelled":  # as `ask-bridge cancel` does
            assert await self.store.close(posted.id, AskStatus.CANCELLED, by="ops") is not None
        elif self.outcome == "expired":
            await asyncio.sleep(max(0.0, posted.expires_at - time.time()) + 0.01)
            assert [r.id for r in await self.store.sweep()] == [posted.id]

    @contextlib.asynccontextmanager
    async def people(self) -> AsyncIterator[None]:
        """A teammate acting on every question set as it is posted, while the block runs."""

        async def teammate() -> None:
            for index in itertools.count():
                await self.act(await self.poster.next_post(index))

        task = asyncio.create_task(teammate())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task  # raises what went wrong in it, if anything did

    async def delivery(self) -> Delivery:
        """The deferred ask's outcome, from the answers feed (the host acks it once resumed)."""
        feed = self.store.feed("agent")
        try:
            return await asyncio.wait_for(anext(aiter(feed)), timeout=10)
        finally:
            await feed.aclose()  # type: ignore[attr-defined]

    def posted(self) -> list[str]:
        return [record.id for record in self.poster.posts]


def question_set(arguments: dict[str, Any]) -> QuestionSet:
    return validate_questions(arguments["questions"])


def reads(outcome: str, asked: dict[str, Any] = VALID) -> str:
    """What the bridge tells the model for ``outcome`` (every adapter carries these words)."""
    qs = question_set(asked)
    text = qs.questions[0].question
    deferred = {"questions": qs.wire(), "status": "deferred", "instructions": DEFAULT_INSTRUCTIONS}
    return {
        "answered": answers_result(qs, [Answer(question=text, selected=("Postgres",))]),
        "typed text": answers_result(qs, [Answer(question=text, other_text=TYPED)]),
        "invalid call": REJECTED,
        "deferred": json.dumps(deferred, ensure_ascii=False),
        "nobody answered": (
            f"nobody answered within {TINY:g} seconds; the questions are closed. Continue "
            "without the answers, or ask again later if you must."
        ),
        "post refused": (
            f"could not show the questions in memory: {REFUSAL}. Nobody saw them; continue "
            "without the answers or try again later."
        ),
        "store down": f"{HANDLER_FAILED}{DOWN}",
        "cancelled": unanswered_text(expired=False),
        "expired": unanswered_text(expired=True),
    }[outcome]


def resumed_reads(outcome: str, asked: dict[str, Any] = VALID) -> str:
    """What the model reads when a deferred ask's delivery resumes the run: the answers JSON a
    waiting call returns, or ``render_delivery``'s words for an ask that ended unanswered."""
    if outcome in ("answered", "typed text"):
        return reads(outcome, asked)
    status, error = {
        "expired": ("expired", "nobody answered before the questions expired"),
        "cancelled": ("cancelled", "the questions were cancelled before anyone answered"),
    }[outcome]
    wire = question_set(asked).wire()
    return json.dumps({"questions": wire, "status": status, "error": error}, ensure_ascii=False)


def arguments_for(outcome: str) -> dict[str, Any]:
    return INVALID if outcome == "invalid call" else VALID


@pytest.fixture(autouse=True)
def _quiet_tool_failures() -> Iterator[None]:
    """chatlas warns (and prints a traceback) for every failed tool call: expected here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# -- raw OpenAI / Anthropic: a host loop over the real clients -----------------------------------


class ScriptedAPI:
    """An httpx transport playing a model API: each request gets the next scripted reply; every
    request body is kept, so a test reads exactly what the model was sent."""

    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        return httpx.Response(200, json=self.replies.pop(0))

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def chat_completion(message: dict[str, Any]) -> dict[str, Any]:
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}


def anthropic_message(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude",
        "content": content, "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }  # fmt: skip


async def openai_chat_loop(world: World) -> tuple[dict[str, Any], Any]:
    """examples/openai_raw.py's loop over ``AsyncOpenAI``: the tool message the model was sent
    next, and the host's ``ToolCallResult``."""
    arguments = json.dumps(arguments_for(world.outcome))
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "ask_user", "arguments": arguments},
    }
    api = ScriptedAPI(
        chat_completion({"role": "assistant", "content": None, "tool_calls": [call]}),
        chat_completion({"role": "assistant", "content": "Done."}),
    )
    client = AsyncOpenAI(
        api_key="offline", base_url="http://127.0.0.1:9/v1", http_client=api.http()
    )
    messages: list[Any] = [{"role": "user", "content": "Plan."}]
    tools: Any = [openai_chat_tool(world.tool, strict=True)]
    results = []
    while True:
        reply = await client.chat.completions.create(model="m", messages=messages, tools=tools)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            break
        for tool_call in message.tool_calls:
            result = await arun_tool_call(tool_call.function.arguments, world.tool)  # type: ignore[union-attr]
            results.append(result)
            messages.append(result.openai_chat_message(tool_call.id))
    [result] = results
    return api.requests[1]["messages"][-1], result


async def anthropic_loop(world: World) -> tuple[dict[str, Any], Any]:
    """A Messages API host loop over ``AsyncAnthropic``: the ``tool_result`` block the model was
    sent next, and the host's ``ToolCallResult``."""
    use = {"type": "tool_use", "id": "toolu_1", "name": "ask_user"}
    api = ScriptedAPI(
        anthropic_message([{**use, "input": arguments_for(world.outcome)}], "tool_use"),
        anthropic_message([{"type": "text", "text": "Done."}], "end_turn"),
    )
    client = AsyncAnthropic(
        api_key="offline", base_url="http://127.0.0.1:9", max_retries=0, http_client=api.http()
    )
    messages: list[Any] = [{"role": "user", "content": "Plan."}]
    results = []
    while True:
        reply = await client.messages.create(
            model="claude", max_tokens=64, messages=messages, tools=[anthropic_tool(world.tool)]
        )
        messages.append({"role": "assistant", "content": reply.content})
        uses = [block for block in reply.content if block.type == "tool_use"]
        if not uses:
            break
        blocks = []
        for block in uses:
            result = await arun_tool_call(block.input, world.tool)
            results.append(result)
            blocks.append(result.anthropic_block(block.id))
        messages.append({"role": "user", "content": blocks})
    [result] = results
    [block] = api.requests[1]["messages"][-1]["content"]
    return block, result


async def raw(world: World) -> None:
    outcome = world.outcome
    async with world.people():
        chat_message, chat_result = await openai_chat_loop(world)
        block, block_result = await anthropic_loop(world)
    assert chat_message == {"role": "tool", "tool_call_id": "call_1", "content": reads(outcome)}
    expected_block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": reads(outcome)}
    if outcome in ERRORS:
        expected_block["is_error"] = True
    assert block == expected_block
    for result, ask_id in zip(
        (chat_result, block_result), world.posted() or [None, None], strict=True
    ):
        assert result.is_error is (outcome in ERRORS)
        if outcome == "deferred":
            assert result.deferred is not None and result.deferred.extra["ask_id"] == ask_id
        else:
            assert result.deferred is None


# -- chatlas: its own tool loop over an OpenAI Responses API played by a transport ---------------


def responses_reply(output: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "resp", "object": "response", "created_at": 0, "model": "gpt-4.1",
        "status": "completed", "output": [output], "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [],
        "usage": {
            "input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 2,
        },
    }  # fmt: skip


async def chatlas_run(world: World) -> tuple[str, ContentToolResult]:
    """``chat_async`` with the async tool: what the model was sent as the tool output, and the
    ``ContentToolResult`` chatlas keeps in the chat."""
    call = {
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "ask_user",
        "arguments": json.dumps(arguments_for(world.outcome)), "status": "completed",
    }  # fmt: skip
    text = {"type": "output_text", "text": "Done.", "annotations": []}
    said = {"type": "message", "id": "m", "role": "assistant", "status": "completed"}
    api = ScriptedAPI(responses_reply(call), responses_reply({**said, "content": [text]}))
    chat = chatlas.ChatOpenAI(api_key="offline", kwargs={"http_client": api.http()})
    chat.register_tool(chatlas_adapter.ask_user_tool(world.tool, asynchronous=True))
    async with world.people():
        await chat.chat_async("Plan.", echo="none", stream=False)
    [shown] = [
        item["output"]
        for item in api.requests[1]["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    [result] = [
        c for turn in chat.get_turns() for c in turn.contents if isinstance(c, ContentToolResult)
    ]
    return shown, result


CHATLAS_ERROR = {
    "invalid call": chatlas.ToolRejectError,
    "nobody answered": NotAnswered,
    "post refused": PostFailed,
    "store down": ToolRejected,
    "cancelled": NotAnswered,
    "expired": NotAnswered,
}
"""The exception chatlas keeps in ``ContentToolResult.error``: a call to fix is chatlas's
rejection; a failure is the bridge's own error, telling the host why (``.record``)."""


async def chatlas_cell(world: World) -> None:
    outcome = world.outcome
    shown, result = await chatlas_run(world)
    if outcome == "invalid call":
        assert shown == f"Tool call failed with error: 'Tool call rejected. {REJECTED}'"
    elif outcome in ERRORS:
        assert shown == f"Tool call failed with error: '{reads(outcome)}'"
    elif outcome == "deferred":  # chatlas serialises the deferred dict itself (compact JSON)
        assert json.loads(shown) == json.loads(reads(outcome))
    else:
        assert shown == reads(outcome)
    if outcome in ERRORS:
        assert type(result.error) is CHATLAS_ERROR[outcome]
    else:
        assert result.error is None
    if isinstance(result.error, NotAnswered):
        expected = AskStatus.CANCELLED if outcome == "cancelled" else AskStatus.EXPIRED
        assert result.error.record.status is expected
    if outcome == "deferred":
        assert result.extra is not None and result.extra["ask_id"] == world.posted()[0]
    else:
        assert not result.extra


# -- pydantic-ai: Agent.run with a FunctionModel that acts on what it reads ----------------------


class PydanticScript:
    """A model that calls ``ask_user``, asks again when it reads a retry prompt (what a model told
    to fix its call does) and otherwise answers; keeps every tool result it read."""

    def __init__(self, arguments: dict[str, Any]) -> None:
        self.arguments = arguments
        self.read: list[ToolReturnPart] = []
        self.turns = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> PydanticResponse:
        self.turns += 1
        last = messages[-1]
        parts = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)]
            if isinstance(last, ModelRequest)
            else []
        )
        self.read += parts
        if self.turns == 1:
            return PydanticResponse(
                parts=[ToolCallPart("ask_user", self.arguments, tool_call_id="call_1")]
            )
        if parts and parts[-1].outcome == "retried":
            again = ToolCallPart("ask_user", VALID, tool_call_id=f"call_{self.turns}")
            return PydanticResponse(parts=[again])
        return PydanticResponse(parts=[TextPart("Done.")])


def pydantic_agent(world: World, script: PydanticScript) -> Agent[None, Any]:
    return Agent(
        FunctionModel(script),
        tools=[pydantic_adapter.ask_user_tool(world.tool)],
        output_type=[str, DeferredToolRequests],
    )


async def pydantic_cell(world: World) -> None:
    outcome = world.outcome
    script = PydanticScript(arguments_for(outcome))
    async with world.people():
        result = await pydantic_agent(world, script).run("Plan.")
    if outcome == "deferred":
        assert isinstance(result.output, DeferredToolRequests)
        assert result.output.metadata["call_1"]["ask_id"] == world.posted()[0]
        assert script.turns == 1 and script.read == []  # the run ended: the model ends its turn
        return
    assert result.output == "Done."
    seen = [(part.outcome, part.content) for part in script.read]
    if outcome == "invalid call":  # a retry prompt; the model fixes its call, which is answered
        assert seen == [("retried", REJECTED), ("success", reads("answered"))]
    elif outcome in ERRORS:  # read once, as a failure: the model adapts instead of asking again
        assert seen == [("failed", reads(outcome))]
    else:
        assert seen == [("success", reads(outcome))]


# -- LangChain: a LangGraph graph whose ToolNode runs the BaseTool -------------------------------


class RecordingModel(GenericFakeChatModel):
    """A scripted chat model that accepts tools and remembers what it was shown."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def lc_call(arguments: dict[str, Any]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "ask_user", "args": arguments, "id": "call_1"}])


def langgraph(model: RecordingModel, tool: BaseTool, checkpointer: Any = None) -> Any:
    bound = model.bind_tools([tool])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def tool_message_read(model: RecordingModel) -> ToolMessage:
    message = model.seen[-1][-1]
    assert isinstance(message, ToolMessage)
    return message


async def langchain_cell(world: World) -> None:
    outcome = world.outcome
    model = RecordingModel(messages=iter([lc_call(arguments_for(outcome)), AIMessage("Done.")]))
    async with world.people():
        out = await langgraph(model, langchain_adapter.ask_user_tool(world.tool)).ainvoke(
            {"messages": [("user", "Plan.")]}
        )
    assert out["messages"][-1].content == "Done."
    reply = tool_message_read(model)
    assert reply.content == reads(outcome)
    assert reply.status == ("error" if outcome in ERRORS else "success")
    if outcome == "deferred":
        assert reply.artifact is not None and reply.artifact["ask_id"] == world.posted()[0]
    else:
        assert reply.artifact is None


# -- OpenAI Agents SDK: Runner.run with a scripted Model -----------------------------------------

OFFLINE = RunConfig(tracing_disabled=True)


class AgentsModel(Model):
    """Plays one scripted output item per model call; keeps the inputs it was given."""

    def __init__(self, *outputs: Any) -> None:
        self.outputs = list(outputs)
        self.inputs: list[list[Any]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        self.inputs.append([input] if isinstance(input, str) else list(input))
        return ModelResponse(output=[self.outputs.pop(0)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError

    def tool_output(self, index: int) -> str:
        """The tool output the model was shown in call ``index``."""
        [output] = [
            item["output"]
            for item in self.inputs[index]
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        return str(output)


def agents_call(arguments: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id="call_1", name="ask_user", arguments=json.dumps(arguments)
    )


def agents_say(text: str) -> ResponseOutputMessage:
    content = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=[content]
    )


def agents_agent(world: World, model: AgentsModel) -> AgentsAgent[Any]:
    return AgentsAgent(
        name="planner", model=model, tools=[agents_adapter.ask_user_tool(world.tool)]
    )


async def openai_agents_cell(world: World) -> None:
    outcome = world.outcome
    model = AgentsModel(agents_call(arguments_for(outcome)), agents_say("Done."))
    async with world.people():
        result = await Runner.run(agents_agent(world, model), "Plan.", run_config=OFFLINE)
    if outcome == "deferred":  # paused the SDK's way: the model sees neither deferral nor ask
        assert result.final_output is None and len(result.interruptions) == 1
        assert agents_adapter.ask_ids(result) == {world.posted()[0]: "call_1"}
        assert len(model.inputs) == 1
        return
    assert result.final_output == "Done."
    assert not result.interruptions
    assert model.tool_output(1) == reads(outcome)
    [item] = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert item.output == reads(outcome)  # the host sees the same output, no error flag


# -- Claude Agent SDK: the can_use_tool and PreToolUse hook entry points -------------------------

CTX = ToolPermissionContext(tool_use_id="toolu_1")
HOOK_CTX: HookContext = {"signal": None}


def pre_tool_use(tool_input: dict[str, Any]) -> Any:
    return {
        "hook_event_name": "PreToolUse", "session_id": "s1", "transcript_path": "", "cwd": "",
        "tool_name": "AskUserQuestion", "tool_input": tool_input, "tool_use_id": "toolu_1",
    }  # fmt: skip


async def claude_cell(world: World) -> None:
    outcome = world.outcome
    asked = arguments_for(outcome)
    decide = claude_adapter.can_use_tool(world.tool)
    options = ClaudeAgentOptions(hooks=claude_adapter.defer_hooks(world.tool))
    assert options.hooks is not None
    [hook] = options.hooks["PreToolUse"][0].hooks
    async with world.people():
        permission = await decide("AskUserQuestion", asked, CTX)
        hooked = (await hook(pre_tool_use(asked), "toolu_1", HOOK_CTX))["hookSpecificOutput"]
    if outcome in ("answered", "typed text"):
        picked = "Postgres" if outcome == "answered" else TYPED
        updated = {**asked, "answers": {DATABASE_QUESTION["question"]: picked}}
        assert permission == PermissionResultAllow(updated_input=updated)
        assert hooked == {
            "hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": updated,
        }  # fmt: skip
    elif outcome == "deferred":
        # can_use_tool must decide while Claude waits: the wait instructions, as a denial;
        # the hook defers the SDK's way (the run stops: test_resumed)
        assert permission == PermissionResultDeny(message=DEFAULT_INSTRUCTIONS)
        assert hooked == {"hookEventName": "PreToolUse", "permissionDecision": "defer"}
        assert hook.deferred["toolu_1"]["ask_id"] == world.posted()[1]
    else:
        assert permission == PermissionResultDeny(message=reads(outcome))
        assert hooked == {
            "hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": reads(outcome),
        }  # fmt: skip


# -- MCP: the server through the mcp client session ----------------------------------------------


async def mcp_cell(world: World) -> None:
    outcome = world.outcome
    async with world.people(), Client(create_server(world.handler)) as client:
        result = await client.call_tool("ask_user", arguments_for(outcome))
    [block] = result.content
    text = getattr(block, "text", None)
    assert result.is_error is (outcome in ERRORS)
    if outcome == "deferred":  # the MCP host must match the feed's answer: the ask id is in it
        body = {**json.loads(reads(outcome)), "ask_id": world.posted()[0]}
        assert text is not None and json.loads(text) == body
        assert result.structured_content == body
    elif outcome in ERRORS:
        assert text == reads(outcome)
        assert result.structured_content is None
    else:
        assert text == reads(outcome)
        assert result.structured_content == json.loads(reads(outcome))


CELLS: dict[str, Callable[[World], Any]] = {
    "raw": raw,
    "chatlas": chatlas_cell,
    "pydantic-ai": pydantic_cell,
    "langchain": langchain_cell,
    "openai-agents": openai_agents_cell,
    "claude-agent-sdk": claude_cell,
    "mcp": mcp_cell,
}


@pytest.mark.parametrize(
    ("adapter", "outcome"),
    [pytest.param(a, o, id=f"{a}-{o}") for a in ADAPTERS for o in OUTCOMES],
)
async def test_outcome(adapter: str, outcome: str) -> None:
    """One call through the adapter as its users run it, the outcome made for real: what the
    model reads and what the host gets (asserted per adapter above), and how often people were
    asked."""
    world = World(outcome)
    await CELLS[adapter](world)
    asks = 2 if adapter in ("raw", "claude-agent-sdk") else 1  # two loops, two entry points
    if adapter == "pydantic-ai" and outcome == "invalid call":
        asks = 1  # the fixed call
    elif outcome in NOT_ASKED:
        asks = 0  # nobody saw the question
    assert len(world.posted()) == asks  # and a failure is not asked again


# -- deferred, then resumed from the answers feed ------------------------------------------------


async def pydantic_resumed(world: World) -> None:
    script = PydanticScript(VALID)
    agent = pydantic_agent(world, script)
    stopped = await agent.run("Plan.")
    assert isinstance(stopped.output, DeferredToolRequests)
    [posted] = world.poster.posts
    await world.act(posted)
    delivery = await world.delivery()
    results = pydantic_adapter.deferred_tool_results(stopped.output, delivery)
    resumed = await agent.run(message_history=stopped.all_messages(), deferred_tool_results=results)
    await world.store.ack(delivery)
    assert resumed.output == "Done."
    failed = world.outcome in ERRORS
    [part] = script.read
    assert (part.outcome, part.content) == (
        "failed" if failed else "success",
        resumed_reads(world.outcome),
    )


RESUME_FORMS: dict[str, Callable[[Delivery], Any]] = {
    "delivery": lambda delivery: delivery,
    "record": lambda delivery: delivery.record,
    "text": render_delivery,
    "dict": lambda delivery: json.loads(render_delivery(delivery)),
}
"""What a host may resume a LangGraph interrupt with, from one answers-feed delivery."""


async def resume_langgraph(world: World) -> tuple[Delivery, dict[str, ToolMessage]]:
    """Each resume form on its own paused thread: the host asked the interrupt's questions
    through the chat handler, which deferred, and resumes each thread from the feed's delivery.
    Returns the delivery and, by form, the tool message the model then read."""
    calls = [lc_call(VALID)] * len(RESUME_FORMS) + [AIMessage("Done.")] * len(RESUME_FORMS)
    model = RecordingModel(messages=iter(calls))
    app = langgraph(model, langchain_adapter.ask_user_interrupt_tool(), InMemorySaver())
    threads = {form: {"configurable": {"thread_id": form}} for form in RESUME_FORMS}
    for config in threads.values():
        paused = await app.ainvoke({"messages": [("user", "Plan.")]}, config)
        (pending,) = paused["__interrupt__"]
    asked = await world.tool.ainvoke(pending.value["questions"])
    assert asked.deferred is not None
    [posted] = world.poster.posts
    assert asked.deferred.extra["ask_id"] == posted.id
    await world.act(posted)
    delivery = await world.delivery()
    replies: dict[str, ToolMessage] = {}
    for form, config in threads.items():
        done = await app.ainvoke(Command(resume=RESUME_FORMS[form](delivery)), config)
        assert done["messages"][-1].content == "Done."
        replies[form] = tool_message_read(model)
    await world.store.ack(delivery)
    return delivery, replies


async def langchain_resumed(world: World) -> None:
    _, replies = await resume_langgraph(world)
    status = "error" if world.outcome in ERRORS else "success"
    for form, reply in replies.items():
        assert (reply.content, reply.status) == (resumed_reads(world.outcome), status), form


async def openai_agents_resumed(world: World) -> None:
    model = AgentsModel(agents_call(VALID), agents_say("Done."))
    agent = agents_agent(world, model)
    paused = await Runner.run(agent, "Plan.", run_config=OFFLINE)
    assert len(paused.interruptions) == 1
    saved, calls = paused.to_state().to_string(), agents_adapter.ask_ids(paused)
    [posted] = world.poster.posts
    await world.act(posted)
    delivery = await world.delivery()
    state = await RunState.from_string(agent, saved)
    state = agents_adapter.approve_answers(state, delivery, calls=calls)
    resumed = await Runner.run(agent, state, run_config=OFFLINE)
    await world.store.ack(delivery)
    assert resumed.final_output == "Done."
    assert len(model.inputs) == 2  # one run, paused and resumed: the call was not made again
    assert model.tool_output(1) == resumed_reads(world.outcome)


async def claude_resumed(world: World) -> None:
    """Against the scripted Claude Code (``scripted_claude.py``: it speaks the SDK's control
    protocol -- "defer" stops the run, resuming the session replays the call)."""
    claude = ScriptedClaudeCode()
    options = ClaudeAgentOptions(hooks=claude_adapter.defer_hooks(world.tool))
    first = query(prompt="Plan.", options=options, transport=claude(options))
    stopped = [m async for m in first][-1]
    assert isinstance(stopped, ResultMessage) and stopped.stop_reason == "tool_deferred"
    [posted] = world.poster.posts
    await world.act(posted)
    delivery = await world.delivery()
    resumed = claude_adapter.resume_options(options, stopped, delivery)
    async with ClaudeSDKClient(resumed, transport=claude(resumed)) as client:
        done = [m async for m in client.receive_response()][-1]
    await world.store.ack(delivery)
    assert isinstance(done, ResultMessage) and done.session_id == stopped.session_id
    decision = claude.decisions[1]
    if world.outcome in ERRORS:
        reason = resumed_reads(world.outcome, ASKED)
        assert decision == {
            "hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }  # fmt: skip
        assert done.result == f"Not asked: {reason}"  # what the scripted Claude was told
    else:
        picked = "Summary" if world.outcome == "answered" else TYPED
        question = QUESTION["question"]
        assert decision == {
            "hookEventName": "PreToolUse", "permissionDecision": "allow",
            "updatedInput": {**ASKED, "answers": {question: picked}},
        }  # fmt: skip
        assert done.result == f"Writing them as: {picked}"


RESUMED: dict[str, Callable[[World], Any]] = {
    "pydantic-ai": pydantic_resumed,
    "langchain": langchain_resumed,
    "openai-agents": openai_agents_resumed,
    "claude-agent-sdk": claude_resumed,
}


@pytest.mark.parametrize(
    ("adapter", "outcome"),
    [pytest.param(a, o, id=f"{a}-{o}") for a in RESUMABLE for o in DELIVERED],
)
async def test_resumed(adapter: str, outcome: str) -> None:
    """The ask deferred (the wait ran out, ``on_timeout="defer"``), the run paused the
    framework's way; then the ask ended and the feed's delivery resumed the same run."""
    world = World(outcome, resumed=True)
    await RESUMED[adapter](world)
    assert len(world.posted()) == 1  # asked once, never again on resume


async def test_langgraph_resumed_with_who_answered_when_the_policy_says() -> None:
    """``tell_model_who``: the resumed model reads ``answered_by`` too, whichever form the
    delivery takes -- what ``render_delivery`` (and a waiting call) gives."""
    world = World("answered", resumed=True, tell_model_who=True)
    delivery, replies = await resume_langgraph(world)
    told = json.loads(render_delivery(delivery))
    assert [(who["user_id"], who["name"]) for who in told["answered_by"]] == [("U1", "Ada")]
    for form, reply in replies.items():
        assert (reply.content, reply.status) == (render_delivery(delivery), "success"), form


# -- the table ---------------------------------------------------------------------------------

NAMED_TEST = re.compile(r"`(test_\w+)(?:\[([^\]`]+)\])?`")


def _cases(func: Callable[..., Any]) -> set[str]:
    """The ids of a test function's parametrised cases (empty for a plain test)."""
    return {
        param.id
        for mark in getattr(func, "pytestmark", [])
        if mark.name == "parametrize"
        for param in mark.args[1]
    }


def _table_rows(text: str) -> list[list[str]]:
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_table_names_a_test_for_every_cell() -> None:
    header, rule, *rows = _table_rows(TABLE.read_text())
    assert header[1:] == list(COLUMN_TITLES)
    assert set("".join(rule)) <= set("-: ")
    assert [row[0].strip("*") for row in rows] == list(OUTCOMES)
    for row in rows:
        outcome = row[0].strip("*")
        assert len(row) == len(ADAPTERS) + 1, f"row {outcome!r} has {len(row) - 1} cells"
        for adapter, cell in zip(ADAPTERS, row[1:], strict=True):
            named = NAMED_TEST.findall(cell)
            assert named, f"the cell {outcome} x {adapter} names no test"
            for name, case in named:
                func = globals().get(name)
                assert callable(func), f"{outcome} x {adapter} names {name}, which is not a test"
                assert case in _cases(func) if case else not _cases(func), (
                    f"{outcome} x {adapter} names {name}[{case}], which does not exist"
                )
            own = f"{adapter}-{outcome}"
            assert ("test_outcome", own) in named, f"{outcome} x {adapter}: no test_outcome[{own}]"
            if adapter in RESUMABLE and outcome in DELIVERED:
                assert ("test_resumed", own) in named, f"{outcome} x {adapter}: no test_resumed"
