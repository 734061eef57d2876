"""The scripted model server (``model_server.py``) through the real ``openai`` and ``anthropic``
clients on a loopback socket.

Each wire format makes the same round trip -- the model calls ``ask_user`` after a line of text,
the host runs the real bridge tool, and a callable turn reads the answers back -- with the sync
and async clients, plain, ``stream=True`` and through the SDKs' ``.stream()`` helpers. The raw
bytes are also validated against the SDKs' own types (strictly: the SDKs themselves only
``construct`` what they receive), the API rules must come back as the SDKs' ``BadRequestError``
with each API's error body, and every way the script can fail must fail the test.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import groupby
from typing import Any

import anthropic
import openai
import pydantic
import pytest
from anthropic import Anthropic, AsyncAnthropic
from anthropic.types import Message, RawMessageStreamEvent
from openai import AsyncOpenAI, OpenAI
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
from openai.types.responses import Response, ResponseStreamEvent

from bridge import tools_interactive
from bridge.frameworks.providers import (
    anthropic_tool,
    openai_chat_tool,
    openai_responses_tool,
    run_tool_call,
)
from tests.support.model_server import (
    ModelServer,
    Reply,
    ScriptError,
    ToolCall,
    ToolResult,
    Turn,
    calls,
    calls_ask_user,
    last_tool_result,
    says,
    tool_results,
)
from tests.support.samples import DATABASE_QUESTION, FEATURES_QUESTION, answer_database_and_features

MODEL = "scripted-model"
PROMPT = "Plan the service."
USER: Any = {"role": "user", "content": PROMPT}
POSTGRES = {"label": "Postgres", "description": "Relational, already run by ops — no new infra"}
QUESTIONS = [{**DATABASE_QUESTION, "options": [POSTGRES, *DATABASE_QUESTION["options"][1:]]}]
QUESTIONS.append(FEATURES_QUESTION)
# The model's arguments exactly as it writes them: spaces, and the dash not \u-escaped.
ARGUMENTS = json.dumps({"questions": QUESTIONS}, ensure_ascii=False)
PREAMBLE = "Two decisions first."
[TOOL] = tools_interactive(callback=answer_database_and_features)
MODES = ["create", "stream", "helper"]  # plain, stream=True, the SDK's .stream() helper


def you_chose(body: dict[str, Any]) -> Reply:
    """The model's second turn: it reads the answers JSON in the tool result, in any format."""
    answers = json.loads(last_tool_result(body).content)["answers"]
    return says(f"You chose {answers[0]['selected'][0]}.")


def script() -> list[Any]:
    return [calls_ask_user(ARGUMENTS, text=PREAMBLE), you_chose]


def openai_client(server: ModelServer, max_retries: int = 0) -> OpenAI:
    return OpenAI(api_key="offline", base_url=server.openai_base_url, max_retries=max_retries)


def async_openai_client(server: ModelServer) -> AsyncOpenAI:
    return AsyncOpenAI(api_key="offline", base_url=server.openai_base_url, max_retries=0)


def anthropic_client(server: ModelServer) -> Anthropic:
    return Anthropic(api_key="offline", base_url=server.anthropic_base_url, max_retries=0)


def async_anthropic_client(server: ModelServer) -> AsyncAnthropic:
    return AsyncAnthropic(api_key="offline", base_url=server.anthropic_base_url, max_retries=0)


# -- Chat Completions -------------------------------------------------------------------------

CHAT_TOOLS: Any = [openai_chat_tool(TOOL, strict=True)]


def chat_turn(client: OpenAI, mode: str, messages: list[Any]) -> ChatCompletionMessage:
    completions = client.chat.completions
    if mode == "create":
        reply = completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
        return reply.choices[0].message
    if mode == "stream":
        state: ChatCompletionStreamState = ChatCompletionStreamState()
        for chunk in completions.create(
            model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True
        ):
            state.handle_chunk(chunk)
        return state.get_final_completion().choices[0].message
    with completions.stream(model=MODEL, messages=messages, tools=CHAT_TOOLS) as stream:
        return stream.get_final_completion().choices[0].message


async def achat_turn(client: AsyncOpenAI, mode: str, messages: list[Any]) -> ChatCompletionMessage:
    completions = client.chat.completions
    if mode == "create":
        reply = await completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)
        return reply.choices[0].message
    if mode == "stream":
        state: ChatCompletionStreamState = ChatCompletionStreamState()
        async for chunk in await completions.create(
            model=MODEL, messages=messages, tools=CHAT_TOOLS, stream=True
        ):
            state.handle_chunk(chunk)
        return state.get_final_completion().choices[0].message
    async with completions.stream(model=MODEL, messages=messages, tools=CHAT_TOOLS) as stream:
        return (await stream.get_final_completion()).choices[0].message


def chat_answer(messages: list[Any], reply: ChatCompletionMessage) -> ToolResult:
    """Append the model's tool call and the bridge tool's result, as a host loop does."""
    [call] = reply.tool_calls or []
    assert call.type == "function"
    assert (call.function.name, call.function.arguments) == ("ask_user", ARGUMENTS)
    function = {"name": call.function.name, "arguments": call.function.arguments}
    tool_call = {"id": call.id, "type": "function", "function": function}
    messages.append({"role": "assistant", "content": reply.content, "tool_calls": [tool_call]})
    result = run_tool_call(call.function.arguments, TOOL)
    messages.append(result.openai_chat_message(call.id))
    return ToolResult(call.id, result.content)


@pytest.mark.parametrize("mode", MODES)
def test_chat_completions_round_trip(mode: str) -> None:
    with ModelServer.running_in_thread(script()) as server:
        with openai_client(server) as client:
            messages: list[Any] = [USER]
            first = chat_turn(client, mode, messages)
            assert first.content == PREAMBLE
            sent = chat_answer(messages, first)
            final = chat_turn(client, mode, messages)
    assert (final.content, final.tool_calls) == ("You chose Postgres.", None)
    assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2
    assert server.requests[0].body["tools"] == CHAT_TOOLS
    assert tool_results(server.requests[1].body) == [sent]


@pytest.mark.parametrize("mode", MODES)
async def test_chat_completions_round_trip_async(mode: str) -> None:
    async with ModelServer(script()) as server:
        async with async_openai_client(server) as client:
            messages: list[Any] = [USER]
            first = await achat_turn(client, mode, messages)
            assert first.content == PREAMBLE
            sent = chat_answer(messages, first)
            final = await achat_turn(client, mode, messages)
    assert final.content == "You chose Postgres."
    assert tool_results(server.requests[1].body) == [sent]


# -- Responses --------------------------------------------------------------------------------

RESPONSES_TOOLS: Any = [openai_responses_tool(TOOL, strict=True)]


def completed(events: Iterable[Any]) -> Response:
    [done] = [event.response for event in events if event.type == "response.completed"]
    assert isinstance(done, Response)
    return done


def responses_turn(client: OpenAI, mode: str, items: list[Any]) -> Response:
    request: Any = {"model": MODEL, "input": items, "tools": RESPONSES_TOOLS}
    if mode == "create":
        response: Response = client.responses.create(**request)
        return response
    if mode == "stream":
        return completed(client.responses.create(**request, stream=True))
    with client.responses.stream(**request) as stream:
        return stream.get_final_response()


async def aresponses_turn(client: AsyncOpenAI, mode: str, items: list[Any]) -> Response:
    request: Any = {"model": MODEL, "input": items, "tools": RESPONSES_TOOLS}
    if mode == "create":
        response: Response = await client.responses.create(**request)
        return response
    if mode == "stream":
        return completed(
            [event async for event in await client.responses.create(**request, stream=True)]
        )
    async with client.responses.stream(**request) as stream:
        return await stream.get_final_response()


def responses_answer(items: list[Any], reply: Response) -> ToolResult:
    assert [item.type for item in reply.output] == ["message", "function_call"]
    assert reply.output_text == PREAMBLE
    call = reply.output[1]
    assert call.type == "function_call"
    assert (call.name, call.arguments, call.status) == ("ask_user", ARGUMENTS, "completed")
    items.append(
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        }
    )
    result = run_tool_call(call.arguments, TOOL)
    items.append(result.openai_responses_item(call.call_id))
    return ToolResult(call.call_id, result.content)


@pytest.mark.parametrize("mode", MODES)
def test_responses_round_trip(mode: str) -> None:
    with ModelServer.running_in_thread(script()) as server:
        with openai_client(server) as client:
            items: list[Any] = [USER]
            sent = responses_answer(items, responses_turn(client, mode, items))
            final = responses_turn(client, mode, items)
    assert final.output_text == "You chose Postgres."
    assert [r.path for r in server.requests] == ["/v1/responses"] * 2
    assert tool_results(server.requests[1].body) == [sent]


@pytest.mark.parametrize("mode", MODES)
async def test_responses_round_trip_async(mode: str) -> None:
    async with ModelServer(script()) as server:
        async with async_openai_client(server) as client:
            items: list[Any] = [USER]
            sent = responses_answer(items, await aresponses_turn(client, mode, items))
            final = await aresponses_turn(client, mode, items)
    assert final.output_text == "You chose Postgres."
    assert tool_results(server.requests[1].body) == [sent]


async def test_responses_previous_response_id_carries_the_call() -> None:
    """A follow-up that names the previous response sends only the output; a response stored
    with ``store: false``, or never made, cannot be named."""
    async with ModelServer([calls_ask_user(ARGUMENTS), you_chose, says("Unused.")]) as server:
        async with async_openai_client(server) as client:
            first = await client.responses.create(model=MODEL, input=PROMPT, tools=RESPONSES_TOOLS)
            [call] = first.output
            assert call.type == "function_call"
            output: Any = run_tool_call(call.arguments, TOOL).openai_responses_item(call.call_id)
            final = await client.responses.create(
                model=MODEL, previous_response_id=first.id, input=[output], tools=RESPONSES_TOOLS
            )
            assert final.output_text == "You chose Postgres."
            assert final.previous_response_id == first.id
            with pytest.raises(openai.BadRequestError) as caught:
                await client.responses.create(model=MODEL, input=[output], tools=RESPONSES_TOOLS)
            missing = f"No tool call found for function call output with call_id {call.call_id}."
            assert caught.value.body == {
                "message": missing,
                "type": "invalid_request_error",
                "param": "input",
                "code": None,
            }
            unstored = await client.responses.create(model=MODEL, input=PROMPT, store=False)
            with pytest.raises(openai.BadRequestError, match="not found") as caught:
                await client.responses.create(
                    model=MODEL, previous_response_id=unstored.id, input="And?"
                )
            assert caught.value.code == "previous_response_not_found"


# -- Messages ---------------------------------------------------------------------------------

ANTHROPIC_TOOLS: Any = [anthropic_tool(TOOL)]


def accumulate(events: Iterable[RawMessageStreamEvent]) -> Message:
    """The message a raw ``stream=True`` event stream adds up to."""
    message: dict[str, Any] = {}
    inputs: dict[int, str] = {}
    for event in events:
        if event.type == "message_start":
            message = event.message.to_dict()
        elif event.type == "content_block_start":
            message["content"].append(event.content_block.to_dict())
        elif event.type == "content_block_delta" and event.delta.type == "text_delta":
            message["content"][event.index]["text"] += event.delta.text
        elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            inputs[event.index] = inputs.get(event.index, "") + event.delta.partial_json
        elif event.type == "message_delta":
            message["stop_reason"] = event.delta.stop_reason
    for index, text in inputs.items():
        message["content"][index]["input"] = json.loads(text)
    return Message.model_validate(message)


def messages_turn(client: Anthropic, mode: str, messages: list[Any]) -> Message:
    request: Any = {"model": MODEL, "max_tokens": 1024, "messages": messages}
    if mode == "create":
        message: Message = client.messages.create(**request, tools=ANTHROPIC_TOOLS)
        return message
    if mode == "stream":
        return accumulate(client.messages.create(**request, tools=ANTHROPIC_TOOLS, stream=True))
    with client.messages.stream(**request, tools=ANTHROPIC_TOOLS) as stream:
        return stream.get_final_message()


async def amessages_turn(client: AsyncAnthropic, mode: str, messages: list[Any]) -> Message:
    request: Any = {"model": MODEL, "max_tokens": 1024, "messages": messages}
    if mode == "create":
        message: Message = await client.messages.create(**request, tools=ANTHROPIC_TOOLS)
        return message
    if mode == "stream":
        stream = await client.messages.create(**request, tools=ANTHROPIC_TOOLS, stream=True)
        return accumulate([event async for event in stream])
    async with client.messages.stream(**request, tools=ANTHROPIC_TOOLS) as helper:
        return await helper.get_final_message()


def messages_answer(messages: list[Any], reply: Message) -> ToolResult:
    assert reply.stop_reason == "tool_use"
    text, use = reply.content
    assert text.type == "text" and text.text == PREAMBLE
    assert use.type == "tool_use" and use.name == "ask_user"
    assert use.input == {"questions": QUESTIONS}
    messages.append({"role": "assistant", "content": [b.to_dict() for b in reply.content]})
    result = run_tool_call(use.input, TOOL)
    messages.append({"role": "user", "content": [result.anthropic_block(use.id)]})
    return ToolResult(use.id, result.content, result.is_error)


@pytest.mark.parametrize("mode", MODES)
def test_messages_round_trip(mode: str) -> None:
    with ModelServer.running_in_thread(script()) as server:
        with anthropic_client(server) as client:
            messages: list[Any] = [USER]
            sent = messages_answer(messages, messages_turn(client, mode, messages))
            final = messages_turn(client, mode, messages)
    assert final.stop_reason == "end_turn"
    assert [block.to_dict() for block in final.content] == [
        {"type": "text", "text": "You chose Postgres."}
    ]
    assert [r.path for r in server.requests] == ["/v1/messages"] * 2
    assert tool_results(server.requests[1].body) == [sent]


@pytest.mark.parametrize("mode", MODES)
async def test_messages_round_trip_async(mode: str) -> None:
    async with ModelServer(script()) as server:
        async with async_anthropic_client(server) as client:
            messages: list[Any] = [USER]
            sent = messages_answer(messages, await amessages_turn(client, mode, messages))
            final = await amessages_turn(client, mode, messages)
    assert final.content[0].type == "text" and final.content[0].text == "You chose Postgres."
    assert tool_results(server.requests[1].body) == [sent]


async def test_messages_parallel_calls_and_an_error_result() -> None:
    """Two calls in one turn, one broken: both results come back in one user message, in order,
    the broken one marked ``is_error`` -- and the callable turn sees exactly that."""
    seen: list[list[ToolResult]] = []

    def reads_results(body: dict[str, Any]) -> Reply:
        seen.append(tool_results(body))
        return says("Fixed.")

    broken = {"questions": [{**QUESTIONS[0], "header": "Database pick"}]}  # header too long
    turns: list[Turn] = [
        calls(ToolCall(broken, call_id="toolu_a"), ToolCall(ARGUMENTS)),
        reads_results,
    ]
    async with ModelServer(turns) as server:
        async with async_anthropic_client(server) as client:
            messages: list[Any] = [USER]
            reply = await amessages_turn(client, "helper", messages)
            uses = [block for block in reply.content if block.type == "tool_use"]
            messages.append({"role": "assistant", "content": [b.to_dict() for b in reply.content]})
            blocks = [run_tool_call(use.input, TOOL).anthropic_block(use.id) for use in uses]
            messages.append({"role": "user", "content": blocks})
            final = await amessages_turn(client, "create", messages)
    assert final.content[0].to_dict() == {"type": "text", "text": "Fixed."}
    [[bad, good]] = seen
    assert (bad.call_id, bad.is_error, good.call_id, good.is_error) == (
        "toolu_a",
        True,
        uses[1].id,
        False,
    )
    assert "'Database pick' is 13 characters long" in bad.content
    assert json.loads(good.content)["answers"][0]["selected"] == ["Postgres"]


# -- the bytes on the wire, against the SDKs' own types ---------------------------------------


def sse(lines: Iterable[str]) -> list[tuple[str | None, str]]:
    """The (event name, data) of each Server-Sent Event in ``lines``."""
    events: list[tuple[str | None, str]] = []
    name: str | None = None
    data: list[str] = []
    for line in [*lines, ""]:
        if not line:
            if data:
                events.append((name, "\n".join(data)))
            name, data = None, []
        elif line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))
    return events


def runs(names: Iterable[str]) -> list[str]:
    """``names`` with each run of repeats (deltas) as one."""
    return [name for name, _ in groupby(names)]


TEXT_AND_CALL = [Reply(text=PREAMBLE, tool_calls=[ToolCall(ARGUMENTS, call_id="call_7")])]


def test_chat_completions_wire_format() -> None:
    request: Any = {
        "model": MODEL,
        "messages": [USER],
        "tools": CHAT_TOOLS,
    }
    with ModelServer.running_in_thread(TEXT_AND_CALL * 2 + [says("Bye.")]) as server:
        with openai_client(server) as client:
            raw = client.chat.completions.with_streaming_response
            with raw.create(**request) as response:
                completion = ChatCompletion.model_validate(response.json())
            options: Any = {"include_usage": True}
            with raw.create(**request, stream=True, stream_options=options) as response:
                streamed = sse(response.iter_lines())
            with raw.create(**request, stream=True) as response:
                plain = sse(response.iter_lines())

    [choice] = completion.choices
    assert (choice.finish_reason, choice.message.content) == ("tool_calls", PREAMBLE)
    assert choice.message.tool_calls is not None
    [call] = choice.message.tool_calls
    assert call.type == "function"
    assert (call.id, call.type, call.function.arguments) == ("call_7", "function", ARGUMENTS)
    assert completion.model == MODEL and completion.usage is not None

    assert {name for name, _ in streamed} == {None} and streamed[-1] == (None, "[DONE]")
    chunks = [ChatCompletionChunk.model_validate_json(data) for _, data in streamed[:-1]]
    assert len({chunk.id for chunk in chunks}) == 1
    *choices, last = chunks
    assert last.choices == [] and last.usage is not None and last.usage.total_tokens > 0
    deltas = [chunk.choices[0].delta for chunk in choices]
    assert deltas[0].role == "assistant"
    texts = [delta.content for delta in deltas if delta.content]
    assert len(texts) > 1 and "".join(texts) == PREAMBLE
    header, *pieces = [call for delta in deltas for call in delta.tool_calls or []]
    assert header.function is not None
    assert (header.index, header.id, header.type) == (0, "call_7", "function")
    assert (header.function.name, header.function.arguments) == ("ask_user", "")
    assert all(piece.id is None and piece.index == 0 for piece in pieces)
    assert len(pieces) > 1
    assert "".join(p.function.arguments or "" for p in pieces if p.function) == ARGUMENTS
    finishes = [chunk.choices[0].finish_reason for chunk in choices]
    assert finishes == [None] * (len(choices) - 1) + ["tool_calls"]
    assert all(chunk.usage is None for chunk in choices)

    final = [ChatCompletionChunk.model_validate_json(data) for _, data in plain[:-1]]
    assert final[-1].choices[0].finish_reason == "stop"
    assert all("usage" not in json.loads(data) for _, data in plain[:-1])  # not asked for


def test_responses_wire_format() -> None:
    request: Any = {"model": MODEL, "input": PROMPT, "tools": RESPONSES_TOOLS}
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ResponseStreamEvent)
    with ModelServer.running_in_thread(TEXT_AND_CALL * 2) as server:
        with openai_client(server) as client:
            raw = client.responses.with_streaming_response
            with raw.create(**request) as response:
                plain = Response.model_validate(response.json())
            with raw.create(**request, stream=True) as response:
                streamed = sse(response.iter_lines())

    assert (plain.status, plain.model, plain.output_text) == ("completed", MODEL, PREAMBLE)
    assert [item.type for item in plain.output] == ["message", "function_call"]
    events = [adapter.validate_json(data) for _, data in streamed]
    assert [name for name, _ in streamed] == [event.type for event in events]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert runs(event.type for event in events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(deltas) > 1 and "".join(deltas) == ARGUMENTS
    [done] = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert (done.arguments, done.output_index) == (ARGUMENTS, 1)
    texts = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(texts) > 1 and "".join(texts) == PREAMBLE
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    final = events[-1].response
    assert final.status == "completed" and final.usage is not None
    assert final.output[1].call_id == "call_7" and final.output[1].arguments == ARGUMENTS


def test_messages_wire_format() -> None:
    request: Any = {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": [USER],
        "tools": ANTHROPIC_TOOLS,
    }
    adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(RawMessageStreamEvent)
    with ModelServer.running_in_thread(TEXT_AND_CALL * 2) as server:
        with anthropic_client(server) as client:
            raw = client.messages.with_streaming_response
            with raw.create(**request) as response:
                plain = Message.model_validate(response.json())
            with raw.create(**request, stream=True) as response:
                streamed = sse(response.iter_lines())

    assert (plain.stop_reason, plain.model) == ("tool_use", MODEL)
    assert [block.to_dict() for block in plain.content] == [
        {"type": "text", "text": PREAMBLE},
        {"type": "tool_use", "id": "call_7", "name": "ask_user", "input": {"questions": QUESTIONS}},
    ]
    assert [name for name, _ in streamed] == [json.loads(data)["type"] for _, data in streamed]
    assert runs(name or "" for name, _ in streamed) == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    events = [adapter.validate_json(data) for name, data in streamed if name != "ping"]
    assert events[0].message.content == [] and events[0].message.stop_reason is None
    pieces = [
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    assert pieces[0] == "" and len(pieces) > 2
    assert json.loads("".join(pieces)) == {"questions": QUESTIONS}
    [delta] = [e for e in events if e.type == "message_delta"]
    assert delta.delta.stop_reason == "tool_use" and delta.usage.output_tokens > 0


# -- malformed arguments ----------------------------------------------------------------------

BROKEN = '{"questions": [{"question": '


def reads_the_rejection(body: dict[str, Any]) -> Reply:
    result = last_tool_result(body)
    assert "not valid JSON" in result.content
    return says("I will fix the call.")


@pytest.mark.parametrize("mode", ["create", "stream"])
async def test_malformed_arguments_reach_chat_completions_clients_verbatim(mode: str) -> None:
    """The bridge's fix-the-call loop needs the broken text exactly as the model sent it."""
    async with ModelServer([calls_ask_user(BROKEN), reads_the_rejection]) as server:
        async with async_openai_client(server) as client:
            messages: list[Any] = [USER]
            tools: Any = [openai_chat_tool(TOOL)]
            request: Any = {"model": MODEL, "messages": messages, "tools": tools}
            if mode == "stream":
                state: ChatCompletionStreamState = ChatCompletionStreamState()
                async for chunk in await client.chat.completions.create(**request, stream=True):
                    state.handle_chunk(chunk)
                reply = state.get_final_completion().choices[0].message
            else:
                reply = (await client.chat.completions.create(**request)).choices[0].message
            [call] = reply.tool_calls or []
            assert call.type == "function" and call.function.arguments == BROKEN
            function = {"name": "ask_user", "arguments": BROKEN}
            tool_call = {"id": call.id, "type": "function", "function": function}
            messages.append({"role": "assistant", "content": None, "tool_calls": [tool_call]})
            messages.append(run_tool_call(BROKEN, TOOL).openai_chat_message(call.id))
            final = await client.chat.completions.create(**request)
    assert final.choices[0].message.content == "I will fix the call."


@pytest.mark.parametrize("mode", ["create", "stream"])
async def test_malformed_arguments_reach_responses_clients_verbatim(mode: str) -> None:
    async with ModelServer([calls_ask_user(BROKEN), reads_the_rejection]) as server:
        async with async_openai_client(server) as client:
            tools: Any = [openai_responses_tool(TOOL)]
            request: Any = {"model": MODEL, "input": PROMPT, "tools": tools}
            if mode == "stream":
                stream = await client.responses.create(**request, stream=True)
                response = completed([event async for event in stream])
            else:
                response = await client.responses.create(**request)
            [call] = response.output
            assert call.type == "function_call" and call.arguments == BROKEN
            items: list[Any] = [
                USER,
                {
                    "type": "function_call",
                    "call_id": call.call_id,
                    "name": "ask_user",
                    "arguments": BROKEN,
                },
                run_tool_call(BROKEN, TOOL).openai_responses_item(call.call_id),
            ]
            final = await client.responses.create(model=MODEL, input=items, tools=tools)
    assert final.output_text == "I will fix the call."


async def test_anthropic_sends_input_that_does_not_parse_only_with_fine_grained_streaming() -> None:
    """The Messages API carries ``tool_use.input`` as an object; only fine-grained tool streaming
    streams raw input JSON, which may not parse. A reply it cannot send is a script failure."""
    request: Any = {"model": MODEL, "max_tokens": 64, "messages": [USER], "tools": ANTHROPIC_TOOLS}
    fine_grained = {"anthropic-beta": "fine-grained-tool-streaming-2025-05-14"}
    with pytest.raises(ScriptError, match="are not a JSON object") as failed:
        async with ModelServer([calls_ask_user(BROKEN)] * 3) as server:
            async with async_anthropic_client(server) as client:
                messages = client.messages
                stream = await messages.create(**request, stream=True, extra_headers=fine_grained)
                pieces = [
                    event.delta.partial_json
                    async for event in stream
                    if event.type == "content_block_delta"
                    and event.delta.type == "input_json_delta"
                ]
                assert "".join(pieces) == BROKEN
                for streamed in (True, False):
                    with pytest.raises(anthropic.InternalServerError, match="not a JSON object"):
                        await messages.create(**request, stream=streamed)
    assert "request 2 (POST /v1/messages)" in str(failed.value)
    assert "request 3 (POST /v1/messages)" in str(failed.value)


# -- the API rules ----------------------------------------------------------------------------

LOOSE = openai_chat_tool(TOOL)["function"]["parameters"]
OBJECT = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
CALLED = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ask_user", "arguments": "{}"}},
        {"id": "call_2", "type": "function", "function": {"name": "ask_user", "arguments": "{}"}},
    ],
}
ANSWER_1 = {"role": "tool", "tool_call_id": "call_1", "content": "done"}
ANSWER_2 = {"role": "tool", "tool_call_id": "call_2", "content": "done"}


def chat_tool(**function: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "ask_user", **function}}


@pytest.mark.parametrize(
    ("messages", "tools", "param", "code", "message"),
    [
        pytest.param(
            [USER, CALLED, ANSWER_1, ANSWER_2, USER], CHAT_TOOLS, None, None, None, id="accepted"
        ),
        pytest.param(
            [USER, CALLED, ANSWER_1, {**ANSWER_2, "tool_call_id": "call_3"}],
            CHAT_TOOLS,
            "messages.[3].tool_call_id",
            None,
            "Invalid parameter: 'tool_call_id' of 'call_3' not found in 'tool_calls' of previous",
            id="result-for-another-call",
        ),
        pytest.param(
            [USER, CALLED, ANSWER_1, USER],
            CHAT_TOOLS,
            "messages.[1].role",
            None,
            "must be followed by tool messages responding to each 'tool_call_id'. The following "
            "tool_call_ids did not have response messages: call_2",
            id="call-unanswered",
        ),
        pytest.param(
            [USER, CALLED, ANSWER_2],
            CHAT_TOOLS,
            "messages.[1].role",
            None,
            "did not have response messages: call_1",
            id="call-unanswered-at-the-end",
        ),
        pytest.param(
            [USER, ANSWER_1],
            CHAT_TOOLS,
            "messages.[1].role",
            None,
            "messages with role 'tool' must be a response to a preceeding message with "
            "'tool_calls'",
            id="result-without-call",
        ),
        pytest.param(
            [USER],
            [openai_responses_tool(TOOL)],
            "tools[0].function",
            "missing_required_parameter",
            "Missing required parameter: 'tools[0].function'.",
            id="responses-shaped-tool",
        ),
        pytest.param(
            [USER],
            [chat_tool(name="ask user", parameters=OBJECT)],
            "tools[0].function.name",
            "invalid_value",
            "string does not match pattern",
            id="bad-name",
        ),
        pytest.param(
            [USER],
            [chat_tool(parameters={"type": "array", "items": {}})],
            "tools[0].function.parameters",
            "invalid_function_parameters",
            "Invalid schema for function 'ask_user': schema must be a JSON Schema of 'type: "
            '"object"\', got \'type: "array"\'.',
            id="not-an-object-schema",
        ),
        pytest.param(
            [USER],
            [chat_tool(parameters={"type": "object", "properties": {"x": {"type": "strng"}}})],
            "tools[0].function.parameters",
            "invalid_function_parameters",
            "'strng' is not valid under any of the given schemas",
            id="invalid-json-schema",
        ),
        pytest.param(
            [USER],
            [chat_tool(parameters=LOOSE, strict=True)],
            "tools[0].function.parameters",
            "invalid_function_parameters",
            "In context=('properties', 'questions', 'items'), 'required' is required to be "
            "supplied and to be an array including every key in properties. Missing 'multiSelect'.",
            id="strict-optional-property",
        ),
        pytest.param(
            [USER],
            [chat_tool(parameters=OBJECT, strict=True)],
            "tools[0].function.parameters",
            "invalid_function_parameters",
            "In context=(), 'additionalProperties' is required to be supplied and to be false.",
            id="strict-open-object",
        ),
    ],
)
async def test_chat_completions_rules(
    messages: list[Any], tools: Any, param: str | None, code: str | None, message: str | None
) -> None:
    """What Chat Completions refuses comes back as ``BadRequestError`` with the API's error body,
    and uses no turn."""
    async with ModelServer([says("Accepted.")]) as server:
        async with async_openai_client(server) as client:
            request: Any = {"model": MODEL, "messages": messages, "tools": tools}
            if message is None:
                reply = await client.chat.completions.create(**request)
                assert reply.choices[0].message.content == "Accepted."
                return
            with pytest.raises(openai.BadRequestError) as caught:
                await client.chat.completions.create(**request)
    body: Any = caught.value.body
    assert body == {**body, "type": "invalid_request_error", "param": param, "code": code}
    assert set(body) == {"message", "type", "param", "code"} and message in body["message"]
    assert server.remaining == 1 and len(server.requests) == 1


def fc(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "ask_user", "arguments": "{}"}


def fc_output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "done"}


@pytest.mark.parametrize(
    ("items", "tools", "param", "code", "message"),
    [
        pytest.param(
            [USER, fc("call_1"), fc("call_2"), fc_output("call_2"), fc_output("call_1")],
            RESPONSES_TOOLS,
            None,
            None,
            None,
            id="accepted",
        ),
        pytest.param(
            [USER, fc("call_1"), fc_output("call_2")],
            RESPONSES_TOOLS,
            "input",
            None,
            "No tool call found for function call output with call_id call_2.",
            id="output-for-another-call",
        ),
        pytest.param(
            [USER, fc("call_1"), fc("call_2"), fc_output("call_2")],
            RESPONSES_TOOLS,
            "input",
            None,
            "No tool output found for function call call_1.",
            id="call-without-output",
        ),
        pytest.param(
            [USER],
            [openai_chat_tool(TOOL)],
            "tools[0].name",
            "missing_required_parameter",
            "Missing required parameter: 'tools[0].name'.",
            id="chat-shaped-tool",
        ),
        pytest.param(
            [USER],
            [{**openai_responses_tool(TOOL), "strict": True}],
            "tools[0].parameters",
            "invalid_function_parameters",
            "Missing 'multiSelect'.",
            id="strict-optional-property",
        ),
    ],
)
async def test_responses_rules(
    items: list[Any], tools: Any, param: str | None, code: str | None, message: str | None
) -> None:
    async with ModelServer([says("Accepted.")]) as server:
        async with async_openai_client(server) as client:
            request: Any = {"model": MODEL, "input": items, "tools": tools}
            if message is None:
                assert (await client.responses.create(**request)).output_text == "Accepted."
                return
            with pytest.raises(openai.BadRequestError) as caught:
                await client.responses.create(**request)
    error = caught.value
    assert (error.type, error.param, error.code) == ("invalid_request_error", param, code)
    assert message in error.message
    assert server.remaining == 1


def used(*ids: str) -> dict[str, Any]:
    uses = [{"type": "tool_use", "id": i, "name": "ask_user", "input": {}} for i in ids]
    return {"role": "assistant", "content": uses}


def answered(*ids: str, after: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    results = [{"type": "tool_result", "tool_use_id": i, "content": "done"} for i in ids]
    return {"role": "user", "content": [*(after or []), *results]}


@pytest.mark.parametrize(
    ("messages", "tools", "message"),
    [
        pytest.param(
            [USER, used("toolu_1", "toolu_2"), answered("toolu_2", "toolu_1")],
            ANTHROPIC_TOOLS,
            None,
            id="accepted",
        ),
        pytest.param(
            [USER, used("toolu_1"), answered("toolu_9")],
            ANTHROPIC_TOOLS,
            "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
            "toolu_9. Each `tool_result` block must have a corresponding `tool_use` block in the "
            "previous message.",
            id="result-for-another-call",
        ),
        pytest.param(
            [USER, used("toolu_1", "toolu_2"), answered("toolu_1")],
            ANTHROPIC_TOOLS,
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
            "after: toolu_2.",
            id="call-unanswered",
        ),
        pytest.param(
            [USER, used("toolu_1"), USER],
            ANTHROPIC_TOOLS,
            "messages.1: `tool_use` ids were found without `tool_result` blocks",
            id="no-results-at-all",
        ),
        pytest.param(
            [USER, used("toolu_1"), answered("toolu_1", after=[{"type": "text", "text": "So?"}])],
            ANTHROPIC_TOOLS,
            "messages.2: `tool_result` blocks must come first",
            id="result-after-text",
        ),
        pytest.param(
            [USER, {"role": "assistant", "content": [{"type": "text", "text": ""}]}, USER],
            ANTHROPIC_TOOLS,
            "text content blocks must be non-empty",
            id="empty-text",
        ),
        pytest.param(
            [USER],
            [{**anthropic_tool(TOOL), "parameters": OBJECT}],
            "tools.0.custom.parameters: Extra inputs are not permitted",
            id="openai-shaped-tool",
        ),
        pytest.param(
            [USER],
            [{"name": "ask_user", "input_schema": {"type": "array"}}],
            "tools.0.custom.input_schema.type: Input should be 'object'",
            id="not-an-object-schema",
        ),
        pytest.param(
            [USER],
            [{"name": "ask_user", "input_schema": {"type": "object", "required": "x"}}],
            "tools.0.custom.input_schema: JSON schema is invalid. It must match JSON Schema draft "
            "2020-12",
            id="invalid-json-schema",
        ),
    ],
)
async def test_messages_rules(messages: list[Any], tools: Any, message: str | None) -> None:
    async with ModelServer([says("Accepted.")]) as server:
        async with async_anthropic_client(server) as client:
            request: Any = {"model": MODEL, "max_tokens": 64, "messages": messages, "tools": tools}
            if message is None:
                reply = await client.messages.create(**request)
                assert reply.content[0].to_dict()["text"] == "Accepted."
                return
            with pytest.raises(anthropic.BadRequestError) as caught:
                await client.messages.create(**request)
    body: Any = caught.value.body
    assert (body["type"], body["error"]["type"]) == ("error", "invalid_request_error")
    assert message in body["error"]["message"]
    assert body["request_id"] == caught.value.request_id
    assert server.remaining == 1


async def test_credentials_and_required_fields() -> None:
    no_key: Any = {"Authorization": openai.Omit()}
    no_version: Any = {"anthropic-version": anthropic.Omit()}
    async with ModelServer([]) as server:
        async with async_openai_client(server) as openai_:
            with pytest.raises(openai.AuthenticationError, match="You didn't provide an API key"):
                await openai_.chat.completions.create(
                    model=MODEL, messages=[USER], extra_headers=no_key
                )
        async with async_anthropic_client(server) as anthropic_:
            with pytest.raises(anthropic.BadRequestError, match="anthropic-version: header is"):
                await anthropic_.messages.create(
                    model=MODEL, max_tokens=64, messages=[USER], extra_headers=no_version
                )
            # The low-level post: messages.create() itself refuses a call without max_tokens.
            with pytest.raises(anthropic.BadRequestError, match="max_tokens: Field required"):
                body = {"model": MODEL, "messages": [USER]}
                await anthropic_.post("/v1/messages", body=body, cast_to=Message)
    assert len(server.requests) == 3


# -- script failures --------------------------------------------------------------------------


def test_running_out_of_script_fails_at_once_naming_the_request() -> None:
    """A 500 the SDK does not retry (``x-should-retry: false``, even with retries on), then a
    ``ScriptError`` when the server stops."""
    with pytest.raises(ScriptError) as failed:
        with ModelServer.running_in_thread([says("Only one.")]) as server:
            with openai_client(server, max_retries=2) as client:
                client.chat.completions.create(model=MODEL, messages=[USER])
                with pytest.raises(openai.InternalServerError) as caught:
                    client.chat.completions.create(model=MODEL, messages=[USER])
    expected = "request 2 (POST /v1/chat/completions): no turn left: all 1 scripted turns were used"
    assert caught.value.body == {
        "message": expected,
        "type": "server_error",
        "param": None,
        "code": None,
    }
    assert len(server.requests) == 2  # the failed request was not retried
    assert server.failures == [expected]
    assert expected in str(failed.value)


async def test_a_turn_that_raises_fails_the_test_with_its_exception() -> None:
    def checks(body: dict[str, Any]) -> Reply:
        assert "tools" in body, "the model was given no tools"
        return says("Unreachable.")

    with pytest.raises(ScriptError, match="the scripted turn raised AssertionError") as failed:
        async with ModelServer([checks]) as server:
            async with async_anthropic_client(server) as client:
                with pytest.raises(anthropic.InternalServerError) as caught:
                    await client.messages.create(model=MODEL, max_tokens=64, messages=[USER])
    assert isinstance(failed.value.__cause__, AssertionError)
    assert "the model was given no tools" in str(failed.value.__cause__)
    body: Any = caught.value.body
    assert body["error"]["type"] == "api_error"
    assert body["error"]["message"].startswith("request 1 (POST /v1/messages): the scripted turn")


async def test_a_reply_calling_a_tool_the_request_did_not_declare_is_a_failure() -> None:
    """A real model calls only the tools it is given: a framework that dropped one fails."""
    with pytest.raises(ScriptError, match=r"the reply calls \['ask_user'\]"):
        async with ModelServer([calls_ask_user(ARGUMENTS)]) as server:
            async with async_openai_client(server) as client:
                with pytest.raises(openai.InternalServerError, match="does not declare"):
                    await client.responses.create(model=MODEL, input=PROMPT)


def test_a_failure_is_noted_on_the_exception_leaving_the_block() -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        with ModelServer.running_in_thread([]) as server:
            with openai_client(server) as client:
                client.chat.completions.create(model=MODEL, messages=[USER])
    assert caught.value.__notes__ == [f"the scripted model failed:\n- {server.failures[0]}"]
