"""Every framework adapter run the way its users run it, answered by a teammate in Slack.

Each test points a framework's real client -- the ``openai`` and ``anthropic`` SDKs, chatlas,
pydantic-ai, LangChain's chat models in a LangGraph graph, the OpenAI Agents SDK -- at the scripted
model server (``tests/support/model_server.py``: Chat Completions, Responses and Anthropic Messages
on 127.0.0.1, streamed or not as the client asks). The model calls ``ask_user`` with a question
whose text holds a marker of the test's own; the tool asks through docs/tool-contract.md's Slack
``ChatHandler`` over real Redis (``agent_rig.py``); a teammate answers by a signed click sent to
``ask-bridge serve``; and the model's next turn says what it read. So each test sees, over real
sockets, what a user's agent would:

- the tool definition the SDK sent: the bridge's own (or its strict variant, where the adapter
  sends strict), with the contract's limits (1-4 questions, 2-4 options, header <= 12);
- exactly what the model read next: the answers JSON a waiting call returns, the deferral, or the
  failure words of ``docs/outcomes.md`` in the framework's own form;
- what the run returned, and what the host got (the ask id of a deferral, the error);
- the Slack message re-rendered as answered (or expired) with no controls left.

Per adapter, every wire format it speaks goes through the three outcomes a person decides:
answered while the call waits; deferred, then resumed the framework's way from the answers feed
once the teammate clicks; and nobody answering within the wait. Each wire format is driven
streamed and not, each framework through its sync and its async entry points. Then the things only
a real deployment shows: sync entry points asking twice in one process, an answer given after the
store's lease period, and two agents sharing one store, answered in reverse order.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import chatlas
import pytest
from agents import Agent as AgentsAgent
from agents import (
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    RunResult,
    RunResultStreaming,
    RunState,
)
from anthropic import AsyncAnthropic
from chatlas.types import ContentToolResult
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command
from openai import AsyncOpenAI, OpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionMessage
from pydantic import SecretStr
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.messages import ModelRequest as PydanticRequest
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.openai import OpenAIResponsesModel as PydanticResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from bridge import Answer, AskUserTool, loops, tools_interactive
from bridge.asking import AskPolicy
from bridge.deferred import DEFAULT_INSTRUCTIONS
from bridge.errors import NotAnswered
from bridge.feed import render_delivery
from bridge.frameworks import chatlas as chatlas_adapter
from bridge.frameworks import langchain as langchain_adapter
from bridge.frameworks import openai_agents as agents_adapter
from bridge.frameworks import pydantic_ai as pydantic_adapter
from bridge.frameworks.providers import (
    ToolCallResult,
    anthropic_tool,
    arun_tool_call,
    openai_chat_tool,
    openai_responses_tool,
    run_tool_call,
    strict_parameters,
)
from bridge.result import answers_result
from bridge.store.base import Delivery, Store
from bridge.store.redis import RedisStore
from bridge.tool import tool_ask_user
from bridge.validation import validate_questions
from tests.support.model_server import (
    Body,
    ModelRequest,
    ModelServer,
    Reply,
    Turn,
    calls_ask_user,
    says,
    tool_results,
    user_text,
)
from tests.support.redis_server import RedisServer
from tests.support.slack.agent_rig import MATE, Rig

MODEL = "scripted-model"
PROMPT = "Prepare the release."
HOST = "agent-host"
"""The consumer name the hosts read the answers feed under."""
OPTIONS = (
    {"label": "Ship", "description": "Release it today"},
    {"label": "Hold", "description": "Wait for the next release train"},
)
PICKED = 1
"""The option the teammate clicks: the second, so an index mixed up anywhere shows."""
POLICIES = {
    "answered": AskPolicy(wait=30),
    "deferred": AskPolicy(mode="defer"),
    "nobody": AskPolicy(wait=1, on_timeout="error"),
}
"""The handler's policy per outcome: a wait the click beats (30 s: a call that never hears the
click returns by then, within the suite's timeout), deferring at once, and a 1 s wait nobody
answers in."""
WAIT_THEN_DEFER = AskPolicy(wait=0.3, on_timeout="defer")
"""The other way an ask defers, for the frameworks that pause a run: the wait runs out."""
NOBODY = (
    "nobody answered within 1 second; the questions are closed. Continue without the answers, "
    "or ask again later if you must."
)
PROMPTLY = 2.0
"""Seconds between a click and the agent's next model request, at most: a waiting call hears its
answer at once (a missed wake-up would leave it waiting for the whole wait)."""
FEED_WITHIN = 30.0
OFFLINE = RunConfig(tracing_disabled=True)
"""The OpenAI Agents SDK would otherwise upload traces to OpenAI."""

pytestmark = [
    pytest.mark.filterwarnings("ignore:ChatOpenAI\\(\\) uses OpenAI's Responses API"),
    pytest.mark.filterwarnings("ignore:Calling tool 'ask_user' led to an error"),
]


@pytest.fixture(scope="module")
def rig(redis_srv: RedisServer) -> Iterator[Rig]:
    started = Rig(redis_srv.url)
    yield started
    started.close()


@pytest.fixture
def default_loop() -> Iterator[list[AsyncOpenAI | AsyncAnthropic]]:
    """The thread's default event loop for a test of pydantic-ai's or the Agents SDK's
    ``run_sync``, which run there and leave it open (on purpose: they keep loop-bound state there
    between calls). An ``asyncio.Runner`` makes it and, after the test, closes there the SDK
    clients the test adds to the list this yields, then shuts it down as ``asyncio.run`` would,
    which closes the store's connections on it. Left open, the loop is dropped by the next async
    test and collected later, the store's listener still pending on it; its cleanup then fails
    for want of a running loop ("Exception ignored in Wakeups._listen") -- at pytest's session
    end, inside ``ast.parse``, which made CPython 3.11.7 raise ``SystemError`` and exit 1."""
    opened: list[AsyncOpenAI | AsyncAnthropic] = []
    with asyncio.Runner() as runner:
        runner.get_loop()  # made and set as the thread's default loop: what run_sync picks up
        yield opened
        for client in opened:
            runner.run(client.close())


# -- the question, what the model must read, and the checks every test makes -------------------


class Ask:
    """One question set, marked so the fake Slack tells its message apart: the arguments the model
    sends and what it must read back for each outcome."""

    def __init__(self, option: int = PICKED) -> None:
        self.marker = uuid.uuid4().hex[:12]
        self.option = option
        question = {
            "question": f"Ship release {self.marker}?",
            "header": "Release",
            "multiSelect": False,  # sent, as strict mode requires every field
            "options": list(OPTIONS),
        }
        self.arguments: dict[str, Any] = {"questions": [question]}
        self.asked = validate_questions(self.arguments["questions"])

    def answers(self) -> str:
        """The answers JSON the model reads once the teammate clicked (a waiting call's result,
        and the answers feed's rendering alike)."""
        label = OPTIONS[self.option]["label"]
        chosen = Answer(question=self.asked.questions[0].question, selected=(label,))
        return answers_result(self.asked, [chosen])

    def deferral(self) -> dict[str, Any]:
        """The deferred result: the questions and the instructions to end the turn, no ask id."""
        return {
            "questions": self.asked.wire(),
            "status": "deferred",
            "instructions": DEFAULT_INSTRUCTIONS,
        }

    def click(self, rig: Rig, *, after: float = 0.0) -> Future[float]:
        """The teammate clicks this ask's option once it is posted (in the background)."""
        return rig.answer(self.marker, self.option, after=after)


def slack_tool(
    rig: Rig, policy: AskPolicy, *, store: RedisStore | None = None
) -> tuple[AskUserTool, Store]:
    """The agent's ``ask_user``: the Quick start's Slack handler (over ``store``, else a Redis
    store of its own), and the store whose answers feed the host reads."""
    handler = rig.handler(policy, store=store)
    [tool] = tools_interactive(callback=handler)
    return tool, handler.store


def read_back(body: Body) -> Reply:
    """The model's turn after asking: it says exactly what it read -- the tool result, or the user
    message a host resumed the conversation with -- so what a run returns shows what reached the
    model, and through which channel."""
    results = tool_results(body)
    return says(f"I read: {results[-1].content if results else user_text(body)}")


def script(ask: Ask, *, resumed_by_user: bool = False) -> list[Turn]:
    """Ask, then say what was read; and once more when the host resumes with a user message."""
    return [calls_ask_user(ask.arguments), read_back, *([read_back] if resumed_by_user else [])]


def said(read: str) -> str:
    """What :func:`read_back` says for ``read``: what the run returns."""
    return f"I read: {read}"


def model_read(server: ModelServer) -> list[tuple[str, bool]]:
    """What the model read in each request after its first: the tool result, or the user message
    a host resumed with; and whether it was flagged an error (Anthropic's ``is_error``; the OpenAI
    APIs have no flag, so False there)."""
    read = []
    for request in server.requests[1:]:
        results = tool_results(request.body)
        if results:
            read.append((results[-1].content, results[-1].is_error))
        else:
            read.append((user_text(request.body), False))
    return read


def check_definitions(
    server: ModelServer, tool: AskUserTool, *, strict: bool | None, strict_schema: bool
) -> None:
    """Every request declared ``ask_user`` as the bridge defines it -- its description, and its
    schema or the strict variant -- with ``strict`` as given (None: not sent), and the schema
    carries the contract's limits."""
    parameters = strict_parameters(tool.parameters) if strict_schema else dict(tool.parameters)
    expected = {
        "name": tool.name,
        "description": tool.description,
        "parameters": parameters,
        "strict": strict,
    }
    assert server.requests
    for request in server.requests:
        [sent] = request.body["tools"]
        function = sent.get("function", sent)  # Chat Completions nests it; the others do not
        declared = {
            "name": function["name"],
            "description": function.get("description"),
            "parameters": function.get("parameters", function.get("input_schema")),
            "strict": function.get("strict"),
        }
        assert declared == expected
        questions = declared["parameters"]["properties"]["questions"]
        fields = questions["items"]["properties"]
        assert (questions["minItems"], questions["maxItems"]) == (1, 4)
        assert (fields["options"]["minItems"], fields["options"]["maxItems"]) == (2, 4)
        assert fields["header"]["maxLength"] == 12


def check_shown(rig: Rig, ask: Ask, outcome: str) -> None:
    """The Slack message ended as the outcome says -- answered by the teammate with the option
    picked, or expired -- with no controls left."""
    shown = rig.shown_answered(ask.marker)
    if outcome == "nobody":
        assert "Expired without an answer" in shown
    else:
        assert f"Answered by <@{MATE}>" in shown
        assert OPTIONS[ask.option]["label"] in shown
    assert "askb:" not in shown


async def delivered(store: Store, ask_id: str) -> Delivery:
    """The host's side of a deferral: the answers feed's next delivery, which must be this ask's
    (each test acknowledges its own, so none is left over for the next)."""
    feed = store.feed(HOST)
    try:
        delivery = await asyncio.wait_for(anext(aiter(feed)), FEED_WITHIN)
    finally:
        await feed.aclose()  # type: ignore[attr-defined]
    assert delivery.record.id == ask_id
    return delivery


@dataclass(frozen=True)
class Case:
    """One run: the wire format, the outcome, and whether the client streams."""

    wire: str  # "chat" (Completions), "responses" or "anthropic" (Messages)
    outcome: str  # "answered", "deferred" or "nobody"
    streamed: bool


def cases(*given: tuple[str, str, bool]) -> list[Any]:
    return [
        pytest.param(Case(*args), id=f"{args[0]}-{args[1]}-{'streamed' if args[2] else 'whole'}")
        for args in given
    ]


def openai_client(server: ModelServer) -> AsyncOpenAI:
    """The async OpenAI client pointed at the model server, no retries. Tests open it with
    ``async with``, as users do: one left open closes itself when collected -- during a later
    test, on that test's loop, where its connections do not belong ("Event loop is closed")."""
    return AsyncOpenAI(api_key="offline", base_url=server.openai_base_url, max_retries=0)


def sdk_client(wire: str, server: ModelServer) -> AsyncOpenAI | AsyncAnthropic:
    """The provider SDK's async client for ``wire`` (see :func:`openai_client`)."""
    if wire == "anthropic":
        return AsyncAnthropic(api_key="offline", base_url=server.anthropic_base_url, max_retries=0)
    return openai_client(server)


# -- raw OpenAI and Anthropic: a host's own loop over the provider SDK --------------------------


class RawLoop(ABC):
    """A hand-written tool loop (``examples/openai_raw.py``'s, async, per wire format): each
    :meth:`turn` sends a user message and runs ``ask_user`` calls until the model answers in text.
    ``results`` keeps what the host got for each call."""

    def __init__(self, client: Any, tool: AskUserTool, streamed: bool) -> None:
        self.client, self.tool, self.streamed = client, tool, streamed
        self.history: list[Any] = []
        self.results: list[ToolCallResult] = []

    @abstractmethod
    async def turn(self, text: str) -> str: ...

    async def call(self, arguments: Any) -> ToolCallResult:
        result = await arun_tool_call(arguments, self.tool)
        self.results.append(result)
        return result


class ChatLoop(RawLoop):
    """Chat Completions with the strict tool, as ``examples/openai_raw.py`` sends it."""

    client: AsyncOpenAI

    async def turn(self, text: str) -> str:
        client = self.client
        tools: Any = [openai_chat_tool(self.tool, strict=True)]
        self.history.append({"role": "user", "content": text})
        while True:
            message: ChatCompletionMessage
            if self.streamed:
                state = ChatCompletionStreamState()
                stream = await client.chat.completions.create(
                    model=MODEL, messages=self.history, tools=tools, stream=True
                )
                async for chunk in stream:
                    state.handle_chunk(chunk)
                message = state.get_final_completion().choices[0].message
            else:
                reply = await client.chat.completions.create(
                    model=MODEL, messages=self.history, tools=tools
                )
                message = reply.choices[0].message
            self.history.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content or ""
            for call in message.tool_calls:
                result = await self.call(call.function.arguments)  # type: ignore[union-attr]
                self.history.append(result.openai_chat_message(call.id))


class ResponsesLoop(RawLoop):
    """The Responses API with the bridge's own (non-strict) tool."""

    client: AsyncOpenAI

    async def turn(self, text: str) -> str:
        client = self.client
        tools: Any = [openai_responses_tool(self.tool)]
        self.history.append({"role": "user", "content": text})
        while True:
            if self.streamed:
                events = await client.responses.create(
                    model=MODEL, input=self.history, tools=tools, stream=True
                )
                [response] = [e.response async for e in events if e.type == "response.completed"]
            else:
                response = await client.responses.create(
                    model=MODEL, input=self.history, tools=tools
                )
            self.history += [item.model_dump(exclude_none=True) for item in response.output]
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                return response.output_text
            for call in calls:
                result = await self.call(call.arguments)
                self.history.append(result.openai_responses_item(call.call_id))


class MessagesLoop(RawLoop):
    """Anthropic Messages: ``tool_result`` blocks, ``is_error`` on failures."""

    client: AsyncAnthropic

    async def turn(self, text: str) -> str:
        client = self.client
        tools: Any = [anthropic_tool(self.tool)]
        self.history.append({"role": "user", "content": text})
        while True:
            request: dict[str, Any] = {
                "model": MODEL,
                "max_tokens": 1024,
                "messages": self.history,
                "tools": tools,
            }
            if self.streamed:
                async with client.messages.stream(**request) as stream:
                    message = await stream.get_final_message()
            else:
                message = await client.messages.create(**request)
            content = [block.model_dump(exclude_none=True) for block in message.content]
            self.history.append({"role": "assistant", "content": content})
            uses = [block for block in message.content if block.type == "tool_use"]
            if not uses:
                return "".join(block.text for block in message.content if block.type == "text")
            blocks = [(await self.call(use.input)).anthropic_block(use.id) for use in uses]
            self.history.append({"role": "user", "content": blocks})


RAW_LOOPS: dict[str, type[RawLoop]] = {
    "chat": ChatLoop,
    "responses": ResponsesLoop,
    "anthropic": MessagesLoop,
}
RAW_DEFINITIONS = {"chat": (True, True), "responses": (False, False), "anthropic": (None, False)}
"""Per wire format: the ``strict`` flag sent, and whether the schema is the strict variant."""


@pytest.mark.parametrize(
    "case",
    cases(
        ("chat", "answered", True),
        ("chat", "deferred", False),
        ("chat", "nobody", False),
        ("responses", "answered", True),
        ("responses", "deferred", False),
        ("responses", "nobody", True),
        ("anthropic", "answered", False),
        ("anthropic", "deferred", True),
        ("anthropic", "nobody", False),
    ),
)
async def test_raw_provider_loop(rig: Rig, case: Case) -> None:
    """A host's own loop over ``AsyncOpenAI`` / ``AsyncAnthropic`` with ``arun_tool_call``. A
    deferral ends the model's turn (it read the deferred result); when the teammate clicks, the
    host reads the answers feed and sends ``render_delivery`` as the next user message."""
    ask = Ask()
    tool, store = slack_tool(rig, POLICIES[case.outcome])
    deferred = case.outcome == "deferred"
    with ModelServer.running_in_thread(script(ask, resumed_by_user=deferred)) as server:
        async with sdk_client(case.wire, server) as client:
            loop = RAW_LOOPS[case.wire](client, tool, case.streamed)
            if case.outcome == "answered":
                ask.click(rig)
            replies = [await loop.turn(PROMPT)]
            if deferred:
                [result] = loop.results
                assert result.deferred is not None
                ask_id = result.deferred.extra["ask_id"]  # type: ignore[index]
                assert ask_id == rig.posted(ask.marker).ask_id
                ask.click(rig)
                delivery = await delivered(store, ask_id)
                replies.append(await loop.turn(render_delivery(delivery)))
                await store.ack(delivery)
    strict, strict_schema = RAW_DEFINITIONS[case.wire]
    check_definitions(server, tool, strict=strict, strict_schema=strict_schema)
    deferral = json.dumps(ask.deferral(), ensure_ascii=False)
    expected = {
        "answered": [(ask.answers(), False)],
        "deferred": [(deferral, False), (ask.answers(), False)],
        "nobody": [(NOBODY, case.wire == "anthropic")],
    }[case.outcome]
    assert model_read(server) == expected
    assert replies == [said(read) for read, _ in expected]
    [result] = loop.results
    assert result.is_error is (case.outcome == "nobody")
    assert (result.deferred is not None) is deferred
    check_shown(rig, ask, case.outcome)


# -- chatlas: ChatOpenAI (the Responses API) and ChatAnthropic ---------------------------------


def chatlas_chat(wire: str, server: ModelServer) -> chatlas.Chat[Any, Any]:
    if wire == "responses":
        return chatlas.ChatOpenAI(
            model=MODEL,
            base_url=server.openai_base_url,
            api_key="offline",
            kwargs={"max_retries": 0},
        )
    return chatlas.ChatAnthropic(
        model=MODEL,
        api_key="offline",
        kwargs={"base_url": server.anthropic_base_url, "max_retries": 0},
    )


def chatlas_reply(chat: chatlas.Chat[Any, Any]) -> str:
    """The model's reply that ended the run: chatlas's last assistant turn. (What ``chat_async``
    streams also holds a separator chatlas yields after each tool result, which ``chat()``
    does not.)"""
    turn = chat.get_last_turn()
    assert turn is not None
    return turn.text


def chatlas_result(chat: chatlas.Chat[Any, Any]) -> ContentToolResult:
    """The one tool result chatlas kept in the chat: what the host reads."""
    [result] = [
        content
        for turn in chat.get_turns()
        for content in turn.contents
        if isinstance(content, ContentToolResult)
    ]
    return result


def chatlas_reads(case: Case, ask: Ask) -> list[tuple[str, bool]]:
    """chatlas's own forms: the deferral as compact JSON (orjson), a failure as its "Tool call
    failed" text (``is_error`` on Anthropic)."""
    compact = json.dumps(ask.deferral(), ensure_ascii=False, separators=(",", ":"))
    failed = f"Tool call failed with error: '{NOBODY}'"
    return {
        "answered": [(ask.answers(), False)],
        "deferred": [(compact, False), (ask.answers(), False)],
        "nobody": [(failed, case.wire == "anthropic")],
    }[case.outcome]


def check_chatlas(
    rig: Rig,
    case: Case,
    ask: Ask,
    server: ModelServer,
    chat: Any,
    tool: AskUserTool,
    replies: list[str],
) -> None:
    """The strict schema on both providers (chatlas marks every tool strict on OpenAI, so the
    adapter sends that variant everywhere); chatlas's own forms of what the model read; the
    failure kept for the host as the bridge's ``NotAnswered``."""
    check_definitions(
        server, tool, strict=True if case.wire == "responses" else None, strict_schema=True
    )
    expected = chatlas_reads(case, ask)
    assert model_read(server) == expected
    assert replies == [said(read) for read, _ in expected]
    result = chatlas_result(chat)
    if case.outcome == "nobody":
        assert isinstance(result.error, NotAnswered)
    else:
        assert result.error is None
    check_shown(rig, ask, case.outcome)


CHATLAS_SYNC = cases(
    ("responses", "answered", True),
    ("responses", "nobody", False),
    ("anthropic", "deferred", True),
)
CHATLAS_ASYNC = cases(
    ("responses", "deferred", False),
    ("anthropic", "answered", False),
    ("anthropic", "nobody", True),
)


@pytest.mark.parametrize("case", CHATLAS_SYNC)
def test_chatlas_chat(rig: Rig, case: Case) -> None:
    """``chat.chat()`` with the sync tool, as a script with no event loop calls it; a deferral is
    resumed by the next ``chat()`` with ``render_delivery``."""
    ask = Ask()
    tool, store = slack_tool(rig, POLICIES[case.outcome])
    deferred = case.outcome == "deferred"
    with (
        ModelServer.running_in_thread(script(ask, resumed_by_user=deferred)) as server,
        chatlas_chat(case.wire, server) as chat,
    ):
        chat.register_tool(chatlas_adapter.ask_user_tool(tool))
        if case.outcome == "answered":
            ask.click(rig)
        chat.chat(PROMPT, echo="none", stream=case.streamed).get_content()
        replies = [chatlas_reply(chat)]
        if deferred:
            ask_id = chatlas_result(chat).extra["ask_id"]
            assert ask_id == rig.posted(ask.marker).ask_id
            ask.click(rig)
            delivery = loops.run(delivered(store, ask_id))
            chat.chat(render_delivery(delivery), echo="none", stream=case.streamed).get_content()
            replies.append(chatlas_reply(chat))
            loops.run(store.ack(delivery))
    check_chatlas(rig, case, ask, server, chat, tool, replies)


@pytest.mark.parametrize("case", CHATLAS_ASYNC)
async def test_chatlas_chat_async(rig: Rig, case: Case) -> None:
    """``chat_async()`` with ``ask_user_tool(..., asynchronous=True)``."""
    ask = Ask()
    tool, store = slack_tool(rig, POLICIES[case.outcome])
    deferred = case.outcome == "deferred"
    with ModelServer.running_in_thread(script(ask, resumed_by_user=deferred)) as server:
        async with chatlas_chat(case.wire, server) as chat:
            chat.register_tool(chatlas_adapter.ask_user_tool(tool, asynchronous=True))
            if case.outcome == "answered":
                ask.click(rig)
            response = await chat.chat_async(PROMPT, echo="none", stream=case.streamed)
            await response.get_content()
            replies = [chatlas_reply(chat)]
            if deferred:
                ask_id = chatlas_result(chat).extra["ask_id"]
                assert ask_id == rig.posted(ask.marker).ask_id
                ask.click(rig)
                delivery = await delivered(store, ask_id)
                response = await chat.chat_async(
                    render_delivery(delivery), echo="none", stream=case.streamed
                )
                await response.get_content()
                replies.append(chatlas_reply(chat))
                await store.ack(delivery)
    check_chatlas(rig, case, ask, server, chat, tool, replies)


# -- pydantic-ai: OpenAIChatModel, OpenAIResponsesModel, AnthropicModel -------------------------


def pydantic_agent(
    wire: str, client: AsyncOpenAI | AsyncAnthropic, tool: AskUserTool
) -> Agent[None, str | DeferredToolRequests]:
    model: Model
    if isinstance(client, AsyncAnthropic):
        model = AnthropicModel(MODEL, provider=AnthropicProvider(anthropic_client=client))
    else:
        provider = OpenAIProvider(openai_client=client)
        kind = OpenAIChatModel if wire == "chat" else PydanticResponsesModel
        model = kind(MODEL, provider=provider)
    return Agent(
        model,
        tools=[pydantic_adapter.ask_user_tool(tool)],
        output_type=[str, DeferredToolRequests],
    )


async def pydantic_run(
    agent: Agent[None, str | DeferredToolRequests], streamed: bool, **given: Any
) -> tuple[str | DeferredToolRequests, list[ModelMessage]]:
    """``agent.run`` or ``agent.run_stream``: the output, and the messages to resume from."""
    if streamed:
        async with agent.run_stream(**given) as stream:
            return await stream.get_output(), stream.all_messages()
    result = await agent.run(**given)
    return result.output, result.all_messages()


def pausing_policy(outcome: str) -> AskPolicy:
    """The policy for a framework that pauses its run: its deferral is the wait running out."""
    return WAIT_THEN_DEFER if outcome == "deferred" else POLICIES[outcome]


def check_pydantic(
    rig: Rig,
    case: Case,
    ask: Ask,
    server: ModelServer,
    tool: AskUserTool,
    output: object,
    messages: list[ModelMessage],
) -> None:
    """The bridge's own schema (pydantic-ai sends it as given: ``strict`` stays unset, but the
    Responses API needs the field, so ``false`` there). The model reads the answers -- resumed
    from the feed after a deferral, never the deferral itself -- or the failure as pydantic-ai
    renders a ``ToolFailed``: ``is_error`` on Anthropic, its ``{"error": ...}`` wrapper on
    OpenAI, which has no error flag. On the wire that is also how a ``ModelRetry`` reads, so the
    run's messages tell them apart: a failure, not a retry that counts against the budget."""
    check_definitions(
        server, tool, strict=False if case.wire == "responses" else None, strict_schema=False
    )
    anthropic = case.wire == "anthropic"
    failed = NOBODY if anthropic else json.dumps({"error": NOBODY}, separators=(",", ":"))
    expected = [(failed, anthropic)] if case.outcome == "nobody" else [(ask.answers(), False)]
    assert model_read(server) == expected
    assert output == said(expected[-1][0])
    [returned] = [
        part
        for message in messages
        if isinstance(message, PydanticRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert returned.outcome == ("failed" if case.outcome == "nobody" else "success")
    check_shown(rig, ask, case.outcome)


def pydantic_deferred(output: object, rig: Rig, ask: Ask) -> tuple[DeferredToolRequests, str]:
    """The run ended with the call deferred (the model was not called again); its ask id is in
    the call's metadata, for the host."""
    assert isinstance(output, DeferredToolRequests)
    [(ask_id, _)] = pydantic_adapter.ask_ids(output).items()
    assert ask_id == rig.posted(ask.marker).ask_id
    return output, ask_id


@pytest.mark.parametrize(
    "case",
    cases(
        ("chat", "deferred", True),
        ("chat", "nobody", False),
        ("responses", "answered", True),
        ("responses", "nobody", False),
        ("anthropic", "answered", False),
        ("anthropic", "deferred", False),
        ("anthropic", "nobody", True),
    ),
)
async def test_pydantic_ai(rig: Rig, case: Case) -> None:
    """``agent.run`` (whole) or ``agent.run_stream`` (streamed). A deferral ends the run with
    ``DeferredToolRequests``; the feed's delivery resumes it with ``deferred_tool_results``."""
    ask = Ask()
    tool, store = slack_tool(rig, pausing_policy(case.outcome))
    with ModelServer.running_in_thread(script(ask)) as server:
        async with sdk_client(case.wire, server) as client:
            agent = pydantic_agent(case.wire, client, tool)
            if case.outcome == "answered":
                ask.click(rig)
            output, messages = await pydantic_run(agent, case.streamed, user_prompt=PROMPT)
            if case.outcome == "deferred":
                requests, ask_id = pydantic_deferred(output, rig, ask)
                assert len(server.requests) == 1
                ask.click(rig)
                delivery = await delivered(store, ask_id)
                results = pydantic_adapter.deferred_tool_results(requests, delivery)
                output, messages = await pydantic_run(
                    agent, case.streamed, message_history=messages, deferred_tool_results=results
                )
                await store.ack(delivery)
    check_pydantic(rig, case, ask, server, tool, output, messages)


@pytest.mark.parametrize(
    "case", cases(("chat", "answered", False), ("responses", "deferred", False))
)
def test_pydantic_ai_run_sync(
    rig: Rig, case: Case, default_loop: list[AsyncOpenAI | AsyncAnthropic]
) -> None:
    """``agent.run_sync``, as a script calls it, and resumed with ``run_sync`` too."""
    ask = Ask()
    tool, store = slack_tool(rig, pausing_policy(case.outcome))
    with ModelServer.running_in_thread(script(ask)) as server:
        client = sdk_client(case.wire, server)
        default_loop.append(client)
        agent = pydantic_agent(case.wire, client, tool)
        if case.outcome == "answered":
            ask.click(rig)
        result = agent.run_sync(PROMPT)
        if case.outcome == "deferred":
            requests, ask_id = pydantic_deferred(result.output, rig, ask)
            ask.click(rig)
            delivery = loops.run(delivered(store, ask_id))
            result = agent.run_sync(
                message_history=result.all_messages(),
                deferred_tool_results=pydantic_adapter.deferred_tool_results(requests, delivery),
            )
            loops.run(store.ack(delivery))
    check_pydantic(rig, case, ask, server, tool, result.output, result.all_messages())


# -- LangChain and LangGraph: langchain-openai and langchain-anthropic in a graph ---------------


def langchain_model(wire: str, server: ModelServer, streamed: bool) -> BaseChatModel:
    if wire == "anthropic":
        return ChatAnthropic(  # type: ignore[call-arg]
            model=MODEL,
            api_key=SecretStr("offline"),
            base_url=server.anthropic_base_url,
            max_retries=0,
            streaming=streamed,
        )
    return ChatOpenAI(
        model=MODEL,
        api_key=SecretStr("offline"),
        base_url=server.openai_base_url,
        max_retries=0,
        streaming=streamed,
        use_responses_api=wire == "responses",
    )


def langgraph_app(model: BaseChatModel, tool: BaseTool, checkpointer: Any = None) -> Any:
    """The tool-calling agent graph: the model, a ``ToolNode`` running its calls, and back."""
    bound = model.bind_tools([tool])

    def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    async def athink(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", RunnableLambda(think, afunc=athink))
    graph.add_node("tools", ToolNode([tool]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def last_text(state: dict[str, Any]) -> str:
    """The graph's final reply as text (the Responses API's comes as content blocks)."""
    return str(state["messages"][-1].text)


def check_langgraph(
    rig: Rig, case: Case, ask: Ask, server: ModelServer, state: dict[str, Any]
) -> None:
    """The bridge's own schema, as LangChain converts a tool (no ``strict``); the model reads
    the answers (through the interrupt tool after a deferral) or the failure words, an error
    ``ToolMessage`` (``is_error`` on Anthropic)."""
    check_definitions(server, tool_ask_user, strict=None, strict_schema=False)
    nobody = case.outcome == "nobody"
    read = NOBODY if nobody else ask.answers()
    assert model_read(server) == [(read, nobody and case.wire == "anthropic")]
    assert last_text(state) == said(read)
    [message] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert message.status == ("error" if nobody else "success")
    check_shown(rig, ask, case.outcome)


LANGGRAPH_SYNC = cases(
    ("chat", "answered", True),
    ("responses", "deferred", True),
    ("responses", "nobody", False),
    ("anthropic", "deferred", False),
)
LANGGRAPH_ASYNC = cases(
    ("chat", "deferred", False),
    ("chat", "nobody", True),
    ("responses", "answered", False),
    ("anthropic", "answered", True),
    ("anthropic", "nobody", False),
)


@pytest.mark.parametrize("case", LANGGRAPH_SYNC)
def test_langgraph_invoke(rig: Rig, case: Case) -> None:
    """``graph.invoke()``: ``ask_user_tool(handler)`` waits in the ``ToolNode``; a deferral is
    ``ask_user_interrupt_tool()``'s ``interrupt()``, whose questions the host asks through the
    handler (deferring at once) and resumes with ``Command(resume=delivery)`` from the feed."""
    ask = Ask()
    handler = rig.handler(POLICIES[case.outcome])
    with ModelServer.running_in_thread(script(ask)) as server:
        model = langchain_model(case.wire, server, case.streamed)
        if case.outcome != "deferred":
            app = langgraph_app(model, langchain_adapter.ask_user_tool(handler))
            if case.outcome == "answered":
                ask.click(rig)
            state = app.invoke({"messages": [("user", PROMPT)]})
        else:
            app = langgraph_app(model, langchain_adapter.ask_user_interrupt_tool(), InMemorySaver())
            thread = {"configurable": {"thread_id": ask.marker}}
            paused = app.invoke({"messages": [("user", PROMPT)]}, thread)
            [pending] = paused["__interrupt__"]
            [host] = tools_interactive(callback=handler)
            asked = host.invoke(pending.value["questions"])
            assert asked.deferred is not None
            ask_id = asked.deferred.extra["ask_id"]  # type: ignore[index]
            assert ask_id == rig.posted(ask.marker).ask_id
            ask.click(rig)
            delivery = loops.run(delivered(handler.store, ask_id))
            state = app.invoke(Command(resume=delivery), thread)
            loops.run(handler.store.ack(delivery))
    check_langgraph(rig, case, ask, server, state)


@pytest.mark.parametrize("case", LANGGRAPH_ASYNC)
async def test_langgraph_ainvoke(rig: Rig, case: Case) -> None:
    """``await graph.ainvoke()``, the same two tools."""
    ask = Ask()
    handler = rig.handler(POLICIES[case.outcome])
    with ModelServer.running_in_thread(script(ask)) as server:
        model = langchain_model(case.wire, server, case.streamed)
        if case.outcome != "deferred":
            app = langgraph_app(model, langchain_adapter.ask_user_tool(handler))
            if case.outcome == "answered":
                ask.click(rig)
            state = await app.ainvoke({"messages": [("user", PROMPT)]})
        else:
            app = langgraph_app(model, langchain_adapter.ask_user_interrupt_tool(), InMemorySaver())
            thread = {"configurable": {"thread_id": ask.marker}}
            paused = await app.ainvoke({"messages": [("user", PROMPT)]}, thread)
            [pending] = paused["__interrupt__"]
            [host] = tools_interactive(callback=handler)
            asked = await host.ainvoke(pending.value["questions"])
            assert asked.deferred is not None
            ask_id = asked.deferred.extra["ask_id"]  # type: ignore[index]
            assert ask_id == rig.posted(ask.marker).ask_id
            ask.click(rig)
            delivery = await delivered(handler.store, ask_id)
            state = await app.ainvoke(Command(resume=delivery), thread)
            await handler.store.ack(delivery)
    check_langgraph(rig, case, ask, server, state)


# -- the OpenAI Agents SDK: OpenAIChatCompletionsModel and OpenAIResponsesModel -----------------


def agents_agent(wire: str, client: AsyncOpenAI, tool: AskUserTool) -> AgentsAgent[Any]:
    kind = OpenAIChatCompletionsModel if wire == "chat" else OpenAIResponsesModel
    return AgentsAgent(
        name="releaser",
        model=kind(model=MODEL, openai_client=client),
        tools=[agents_adapter.ask_user_tool(tool)],
    )


async def agents_run(
    agent: AgentsAgent[Any], streamed: bool, given: str | RunState[Any, Any]
) -> RunResult | RunResultStreaming:
    """``Runner.run`` or ``Runner.run_streamed`` (its events consumed, as a UI would)."""
    if not streamed:
        return await Runner.run(agent, given, run_config=OFFLINE)
    result = Runner.run_streamed(agent, given, run_config=OFFLINE)
    async for _ in result.stream_events():
        pass
    return result


def check_agents(
    rig: Rig, case: Case, ask: Ask, server: ModelServer, tool: AskUserTool, output: object
) -> None:
    """The strict variant with ``strict: true`` (the SDK's default for function tools); the
    model reads the answers (the paused run resumed: it never saw the deferral) or the failure
    words as the tool output."""
    check_definitions(server, tool, strict=True, strict_schema=True)
    read = NOBODY if case.outcome == "nobody" else ask.answers()
    assert model_read(server) == [(read, False)]
    assert output == said(read)
    check_shown(rig, ask, case.outcome)


@pytest.mark.parametrize(
    "case",
    cases(
        ("chat", "answered", True),
        ("chat", "deferred", False),
        ("responses", "deferred", True),
        ("responses", "nobody", False),
    ),
)
async def test_openai_agents(rig: Rig, case: Case) -> None:
    """``Runner.run`` (whole) or ``Runner.run_streamed``. A deferral pauses the run (the call in
    ``interruptions``); the feed's delivery resumes the same run from its saved ``RunState``
    with ``approve_answers``."""
    ask = Ask()
    tool, store = slack_tool(rig, pausing_policy(case.outcome))
    with ModelServer.running_in_thread(script(ask)) as server:
        async with openai_client(server) as client:
            agent = agents_agent(case.wire, client, tool)
            if case.outcome == "answered":
                ask.click(rig)
            result = await agents_run(agent, case.streamed, PROMPT)
            if case.outcome == "deferred":
                assert result.final_output is None and len(result.interruptions) == 1
                assert len(server.requests) == 1  # paused: the model saw no deferral, no ask id
                saved, calls = result.to_state().to_string(), agents_adapter.ask_ids(result)
                [ask_id] = calls
                assert ask_id == rig.posted(ask.marker).ask_id
                ask.click(rig)
                delivery = await delivered(store, ask_id)
                state = await RunState.from_string(agent, saved)
                agents_adapter.approve_answers(state, delivery, calls=calls)
                result = await agents_run(agent, case.streamed, state)
                await store.ack(delivery)
    check_agents(rig, case, ask, server, tool, result.final_output)


@pytest.mark.parametrize("case", cases(("chat", "nobody", False), ("responses", "answered", False)))
def test_openai_agents_run_sync(
    rig: Rig, case: Case, default_loop: list[AsyncOpenAI | AsyncAnthropic]
) -> None:
    """``Runner.run_sync``, as a script calls it."""
    ask = Ask()
    tool, _ = slack_tool(rig, POLICIES[case.outcome])
    with ModelServer.running_in_thread(script(ask)) as server:
        client = openai_client(server)
        default_loop.append(client)
        agent = agents_agent(case.wire, client, tool)
        if case.outcome == "answered":
            ask.click(rig)
        result = Runner.run_sync(agent, PROMPT, run_config=OFFLINE)
    check_agents(rig, case, ask, server, tool, result.final_output)


# -- what only a real deployment shows: repeated sync asks, the lease, a shared store -----------

SyncRun = Callable[[], str]
"""One user turn of a synchronous agent: the model asks, the tool waits, the reply comes back."""


def openai_raw_run(server: ModelServer, tool: AskUserTool) -> SyncRun:
    """``examples/openai_raw.py``'s loop: the sync ``OpenAI`` client and ``run_tool_call``."""
    client = OpenAI(api_key="offline", base_url=server.openai_base_url, max_retries=0)
    tools: Any = [openai_chat_tool(tool, strict=True)]

    def run() -> str:
        messages: list[Any] = [{"role": "user", "content": PROMPT}]
        while True:
            reply = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content or ""
            for call in message.tool_calls:
                result = run_tool_call(call.function.arguments, tool)  # type: ignore[union-attr]
                messages.append(result.openai_chat_message(call.id))

    return run


def chatlas_chat_run(server: ModelServer, tool: AskUserTool) -> SyncRun:
    """One conversation with ``ChatAnthropic``, a ``chat()`` per turn."""
    chat = chatlas_chat("anthropic", server)
    chat.register_tool(chatlas_adapter.ask_user_tool(tool))

    def run() -> str:
        chat.chat(PROMPT, echo="none", stream=False).get_content()
        return chatlas_reply(chat)

    return run


def langgraph_invoke_run(server: ModelServer, tool: AskUserTool) -> SyncRun:
    """The agent graph over ``ChatOpenAI`` on the Responses API, ``invoke()`` per turn (the
    ``ToolNode`` runs the sync tool in a thread pool)."""
    model = langchain_model("responses", server, streamed=False)
    app = langgraph_app(model, langchain_adapter.ask_user_tool(tool))
    return lambda: last_text(app.invoke({"messages": [("user", PROMPT)]}))


SYNC_RUNS: dict[str, Callable[[ModelServer, AskUserTool], SyncRun]] = {
    "openai-raw": openai_raw_run,
    "chatlas-chat": chatlas_chat_run,
    "langgraph-invoke": langgraph_invoke_run,
}


def heard_promptly(request: ModelRequest, clicked: float) -> bool:
    """Whether the agent's next model request followed the click within :data:`PROMPTLY`."""
    return 0 < request.at - clicked < PROMPTLY


@pytest.mark.parametrize("entry", SYNC_RUNS)
def test_sync_entry_point_asks_twice(rig: Rig, entry: str) -> None:
    """A sync agent asks, is answered, and asks again in the same process: each call hears its
    own click at once. (Sync calls share the bridge's loop; a wake-up listener that died with an
    earlier call's loop would leave the second call waiting until its wait ran out, and the
    model would read a deferral.)"""
    first, second = Ask(option=0), Ask(option=1)
    tool, _ = slack_tool(rig, POLICIES["answered"])
    with ModelServer.running_in_thread([*script(first), *script(second)]) as server:
        run = SYNC_RUNS[entry](server, tool)
        replies, clicks = [], []
        for ask in (first, second):
            clicked = ask.click(rig)
            replies.append(run())
            clicks.append(clicked.result(FEED_WITHIN))
    assert replies == [said(first.answers()), said(second.answers())]
    heard = [server.requests[1], server.requests[3]]
    assert [tool_results(r.body)[-1].content for r in heard] == [first.answers(), second.answers()]
    assert [heard_promptly(r, at) for r, at in zip(heard, clicks, strict=True)] == [True, True]
    for ask in (first, second):
        check_shown(rig, ask, "answered")


def test_answer_after_the_lease_period(rig: Rig) -> None:
    """The teammate clicks 3 s after the post, three times the store's 1 s lease: the waiting
    call kept its claim alive all along, so the answer reaches it (not the answers feed) and
    the model reads the answers, never a deferral -- through a sync entry point."""
    ask = Ask()
    tool, _ = slack_tool(rig, POLICIES["answered"], store=rig.store(lease_ttl=1.0))
    with ModelServer.running_in_thread(script(ask)) as server:
        run = chatlas_chat_run(server, tool)
        clicked = ask.click(rig, after=3)
        reply = run()
    assert model_read(server) == [(ask.answers(), False)]
    assert reply == said(ask.answers())
    assert heard_promptly(server.requests[1], clicked.result())
    check_shown(rig, ask, "answered")


def test_two_sync_agents_share_a_store(rig: Rig) -> None:
    """Two agents -- the raw OpenAI loop and a LangGraph graph -- in two threads, their handlers
    over one store, both waiting at once; the later question is answered first. Each gets its
    own answer, and the first keeps waiting until its own click."""
    shared = rig.store()
    first, second = Ask(option=0), Ask(option=1)
    tool_one, _ = slack_tool(rig, POLICIES["answered"], store=shared)
    tool_other, _ = slack_tool(rig, POLICIES["answered"], store=shared)
    with (
        ModelServer.running_in_thread(script(first)) as one,
        ModelServer.running_in_thread(script(second)) as other,
        ThreadPoolExecutor(2) as threads,
    ):
        run_one = threads.submit(openai_raw_run(one, tool_one))
        run_other = threads.submit(langgraph_invoke_run(other, tool_other))
        for ask in (first, second):
            rig.posted(ask.marker)  # both asked: both calls wait now
        second.click(rig).result(FEED_WITHIN)
        assert run_other.result(FEED_WITHIN) == said(second.answers())
        assert not run_one.done()
        first.click(rig)
        assert run_one.result(FEED_WITHIN) == said(first.answers())
    assert model_read(one) == [(first.answers(), False)]
    assert model_read(other) == [(second.answers(), False)]
    for ask in (first, second):
        check_shown(rig, ask, "answered")


async def test_two_async_agents_share_a_store(rig: Rig) -> None:
    """The same with two tasks on one loop: a pydantic-ai agent (Responses) and an OpenAI Agents
    SDK agent (Chat Completions)."""
    shared = rig.store()
    first, second = Ask(option=0), Ask(option=1)
    tool_one, _ = slack_tool(rig, POLICIES["answered"], store=shared)
    tool_other, _ = slack_tool(rig, POLICIES["answered"], store=shared)
    with (
        ModelServer.running_in_thread(script(first)) as one,
        ModelServer.running_in_thread(script(second)) as other,
    ):
        async with openai_client(one) as client_one, openai_client(other) as client_other:
            pydantic = pydantic_agent("responses", client_one, tool_one)
            run_one = asyncio.create_task(pydantic.run(PROMPT))
            agent = agents_agent("chat", client_other, tool_other)
            run_other = asyncio.create_task(Runner.run(agent, PROMPT, run_config=OFFLINE))
            for ask in (first, second):
                await asyncio.to_thread(rig.posted, ask.marker)
            await asyncio.wrap_future(second.click(rig))
            done = await asyncio.wait_for(run_other, FEED_WITHIN)
            assert done.final_output == said(second.answers())
            assert not run_one.done()
            first.click(rig)
            assert (await asyncio.wait_for(run_one, FEED_WITHIN)).output == said(first.answers())
    assert model_read(one) == [(first.answers(), False)]
    assert model_read(other) == [(second.answers(), False)]
    for ask in (first, second):
        check_shown(rig, ask, "answered")
