"""chatlas adapter: a real ``chatlas.ChatOpenAI`` chat whose HTTP transport is a scripted model
speaking the OpenAI Responses API (no network), so chatlas's own tool loop runs end to end."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import chatlas
import httpx2 as httpx
import pytest
from chatlas.types import ContentToolResult

from bridge import AskUserDeferred, Question, tool_ask_user, tools_interactive
from bridge.frameworks.chatlas import ask_user_tool
from bridge.frameworks.providers import strict_parameters
from tests.support.samples import DATABASE_QUESTION
from tests.support.samples import answer_postgres as answer

# As OpenAI strict mode sends it: every property present, null for "not given".
QUESTION = {**DATABASE_QUESTION, "multiSelect": None}

Reply = Callable[[dict[str, Any]], list[dict[str, Any]]]


def call(arguments: dict[str, Any] | str, call_id: str = "call_1") -> Reply:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    item = {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "ask_user",
        "arguments": text,
        "status": "completed",
    }
    return lambda _: [item]


def say(text: str) -> Reply:
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return lambda _: [message]


class ScriptedResponses:
    """The OpenAI Responses API played from a script; every request body is kept."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        output = self.replies.pop(0)(body)
        return httpx.Response(
            200,
            json={
                "id": f"resp_{len(self.requests)}",
                "object": "response",
                "created_at": 0,
                "model": "gpt-4.1",
                "status": "completed",
                "output": output,
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "usage": {
                    "input_tokens": 1,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 1,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 2,
                },
            },
        )

    def chat(self, *, asynchronous: bool = False) -> chatlas.Chat[Any, Any]:
        transport = httpx.MockTransport(self)
        client = (
            httpx.AsyncClient(transport=transport)
            if asynchronous
            else httpx.Client(transport=transport)
        )
        return chatlas.ChatOpenAI(api_key="offline", kwargs={"http_client": client})

    def tool_outputs(self, index: int) -> list[str]:
        """What the model was shown as tool results in request ``index``."""
        return [
            item["output"]
            for item in self.requests[index]["input"]
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]


@pytest.fixture(autouse=True)
def _quiet_tool_failures() -> Iterator[None]:
    """chatlas warns (and prints a traceback) for every failed tool call: expected here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_registered_tool_answers_and_the_model_reads_the_json() -> None:
    model = ScriptedResponses(call({"questions": [QUESTION]}), say("Postgres it is."))
    chat = model.chat()
    [tool] = tools_interactive(callback=answer)
    chat.register_tool(ask_user_tool(tool))

    assert chat.chat("Plan the service.", echo="none", stream=False).get_content() == (
        "Postgres it is."
    )
    [sent_tool] = model.requests[0]["tools"]
    assert sent_tool["name"] == "ask_user"
    assert sent_tool["strict"] is True
    assert sent_tool["parameters"] == strict_parameters(tool.parameters)
    assert sent_tool["description"] == tool.description
    [shown] = model.tool_outputs(1)
    assert json.loads(shown)["answers"] == [
        {
            "question": "Which database should the service use?",
            "selected": ["Postgres"],
            "other_text": None,
        }
    ]


def test_register_tool_and_set_tools_send_the_same_definition() -> None:
    direct = ask_user_tool()
    chat = chatlas.ChatOpenAI(api_key="offline")
    chat.register_tool(direct)
    [rebuilt] = chat.get_tools()
    assert isinstance(rebuilt, chatlas.Tool)
    assert rebuilt.schema == direct.schema
    assert rebuilt.annotations == tool_ask_user.annotations.as_dict()


def test_a_call_to_fix_is_rejected_and_the_model_fixes_it() -> None:
    too_long = {**QUESTION, "header": "A header far too long"}
    model = ScriptedResponses(
        call({"questions": [too_long]}, "call_1"),
        call({"questions": [QUESTION], "urgency": "high"}, "call_2"),
        call({"questions": [QUESTION]}, "call_3"),
        say("Done."),
    )
    chat = model.chat()
    chat.register_tool(ask_user_tool(tools_interactive(callback=answer)[0]))
    chat.chat("Plan.", echo="none", stream=False)

    first = model.tool_outputs(1)[-1]
    assert "Tool call rejected." in first
    assert "questions[0].header 'A header far too long' is 21 characters long" in first
    second = model.tool_outputs(2)[-1]
    assert "unknown argument 'urgency'" in second
    third = model.tool_outputs(3)[-1]
    assert json.loads(third)["answers"][0]["selected"] == ["Postgres"]
    results = [
        c for turn in chat.get_turns() for c in turn.contents if isinstance(c, ContentToolResult)
    ]
    assert [isinstance(r.error, chatlas.ToolRejectError) for r in results] == [True, True, False]


def test_deferral_returns_the_deferred_result_with_extra_kept_from_the_model() -> None:
    def defer(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
        return AskUserDeferred(extra={"ask_id": "ask-42"})

    model = ScriptedResponses(call({"questions": [QUESTION]}), say("Waiting for your answers."))
    chat = model.chat()
    chat.register_tool(ask_user_tool(tools_interactive(callback=defer)[0]))
    reply = chat.chat("Plan.", echo="none", stream=False).get_content()
    assert reply == "Waiting for your answers."

    [shown] = model.tool_outputs(1)
    assert json.loads(shown)["status"] == "deferred"
    assert "ask-42" not in json.dumps(model.requests)
    [result] = [
        c for turn in chat.get_turns() for c in turn.contents if isinstance(c, ContentToolResult)
    ]
    assert result.extra == {"ask_id": "ask-42"}


async def test_async_chat_with_async_tool_and_handler() -> None:
    seen: list[dict[str, Any]] = []

    async def answer_async(questions: list[Question], context: dict[str, Any]) -> Any:
        seen.append(context)
        await asyncio.sleep(0)
        return {questions[0].question: "my own text"}

    model = ScriptedResponses(call({"questions": [QUESTION]}), say("Noted."))
    chat = model.chat(asynchronous=True)
    [tool] = tools_interactive(callback=answer_async, context={"channel": "C1"})
    chat.register_tool(ask_user_tool(tool, asynchronous=True))
    response = await chat.chat_async("Plan.", echo="none", stream=False)
    assert (await response.get_content()).strip() == "Noted."
    assert seen == [{"channel": "C1"}]
    [shown] = model.tool_outputs(1)
    assert json.loads(shown)["answers"][0] == {
        "question": "Which database should the service use?",
        "selected": [],
        "other_text": "my own text",
    }
