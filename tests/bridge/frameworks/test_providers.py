"""Raw provider adapter: the tool definitions, the strict-mode schema, and a real ``openai`` client
driving ask_user end to end against a scripted model (an httpx transport, no network)."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx2 as httpx
import jsonschema
import pytest
from openai import AsyncOpenAI, OpenAI

from bridge import AskUserDeferred, Question, tool_ask_user, tools_interactive
from bridge.frameworks.providers import (
    ToolCallResult,
    anthropic_tool,
    arun_tool_call,
    openai_chat_tool,
    openai_responses_tool,
    questions_from_arguments,
    run_tool_call,
    strict_parameters,
)
from tests.support.samples import DATABASE_AND_FEATURES as QUESTIONS
from tests.support.samples import answer_database_and_features as answer
from tests.support.samples import example_globals


def defer(questions: list[Question], context: dict[str, Any]) -> AskUserDeferred:
    return AskUserDeferred(extra={"ask_id": "ask-123"})


def _objects(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found += _objects(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _objects(value)
    return found


# -- definitions ------------------------------------------------------------------------------


def test_definitions_have_each_providers_shape() -> None:
    [tool] = tools_interactive(callback=answer)
    chat = openai_chat_tool(tool)
    assert chat == {
        "type": "function",
        "function": {
            "name": "ask_user",
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }
    responses = openai_responses_tool(tool)
    assert responses == {
        "type": "function",
        "name": "ask_user",
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": False,
    }
    assert openai_responses_tool(tool, strict=True)["strict"] is True
    assert anthropic_tool(tool) == {
        "name": "ask_user",
        "description": tool.description,
        "input_schema": tool.parameters,
    }
    for schema in (chat["function"]["parameters"], anthropic_tool()["input_schema"]):
        jsonschema.Draft202012Validator.check_schema(schema)
        assert "$ref" not in json.dumps(schema)


def test_strict_schema_follows_openai_strict_rules() -> None:
    strict = openai_chat_tool(strict=True)["function"]
    assert strict["strict"] is True
    schema = strict["parameters"]
    objects = _objects(schema)
    assert len(objects) == 3  # arguments, question, option
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    assert '"default"' not in json.dumps(schema)
    multi = schema["properties"]["questions"]["items"]["properties"]["multiSelect"]
    assert multi["type"] == ["boolean", "null"]
    assert "null means the default, false" in multi["description"]
    # The non-strict schema keeps multiSelect optional; strict_parameters leaves its input alone.
    loose = tool_ask_user.parameters
    assert "multiSelect" not in loose["properties"]["questions"]["items"]["required"]
    assert strict_parameters(loose) == schema
    assert loose == tool_ask_user.parameters


def test_strict_schema_is_a_fixed_point_of_the_sdks_strict_converters() -> None:
    """The openai package's and the Agents SDK's strict converters have nothing left to change
    (the Agents SDK one also rejects objects open to undeclared properties)."""
    from agents.strict_schema import ensure_strict_json_schema
    from openai.lib._pydantic import _ensure_strict_json_schema

    schema = strict_parameters(tool_ask_user.parameters)
    assert _ensure_strict_json_schema(copy.deepcopy(schema), path=(), root={}) == schema
    assert ensure_strict_json_schema(copy.deepcopy(schema), _reject_open_objects=True) == schema


def test_strict_schema_accepts_what_the_bridge_accepts() -> None:
    validator = jsonschema.Draft202012Validator(strict_parameters(tool_ask_user.parameters))
    call = {"questions": [{**q, "multiSelect": q.get("multiSelect")} for q in QUESTIONS]}
    assert call["questions"][0]["multiSelect"] is None
    validator.validate(call)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"questions": QUESTIONS})  # multiSelect left out: strict requires it
    result = run_tool_call(json.dumps(call), tools_interactive(callback=answer)[0])
    assert not result.is_error, result.content
    assert json.loads(result.content)["questions"][0]["multiSelect"] is False


# -- running calls ----------------------------------------------------------------------------


def test_answers_come_back_as_the_tools_json() -> None:
    [tool] = tools_interactive(callback=answer)
    for arguments in (json.dumps({"questions": QUESTIONS}), {"questions": QUESTIONS}):
        result = run_tool_call(arguments, tool)
        assert result == ToolCallResult(content=result.content, is_error=False, deferred=None)
        body = json.loads(result.content)
        assert body["answers"] == [
            {
                "question": "Which database should the service use?",
                "selected": ["Postgres"],
                "other_text": None,
            },
            {
                "question": "Which features ship first?",
                "selected": ["Search", "Export"],
                "other_text": None,
            },
        ]
    assert run_tool_call(json.dumps({"questions": QUESTIONS}).encode(), tool).is_error is False


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"questions": [', "not valid JSON (Expecting value at line 1 column 16)"),
        ("", "the arguments are empty"),
        (None, "the arguments are empty"),
        ("[1, 2]", "must be a JSON object, got array"),
        ('"questions"', "must be a JSON object, got string"),
        ("{}", 'the "questions" argument is missing'),
        ({"questions": QUESTIONS, "urgent": True}, "unknown argument 'urgent'"),
        (b"\xc3\x28{}", "the arguments are not UTF-8 text"),
        ("[" * 100_000, "the arguments are nested too deeply"),
        ('{"questions": ' + "[" * 100_000, "the arguments are nested too deeply"),
        ('{"questions": ' + "9" * 5_000 + "}", "the arguments are not valid JSON (Exceeds"),
    ],
)
def test_malformed_arguments_are_an_error_the_model_can_fix(arguments: Any, expected: str) -> None:
    result = run_tool_call(arguments, tools_interactive(callback=answer)[0])
    assert result.is_error
    assert expected in result.content
    assert result.content.startswith("The ask_user call was rejected")
    assert '{"questions": [{"question": "...", "header": "..."' in result.content  # how to fix


def test_many_unknown_arguments_are_named_briefly() -> None:
    arguments = {"questions": QUESTIONS, **{f"{'x' * 1000}{i}": i for i in range(10_000)}}
    result = run_tool_call(arguments, tools_interactive(callback=answer)[0])
    assert result.is_error and "unknown arguments 'xxx" in result.content
    assert "and 9995 more" in result.content
    assert len(result.content) < 1_000


def test_invalid_questions_are_an_error_naming_the_place() -> None:
    bad = copy.deepcopy(QUESTIONS)
    bad[1]["options"][0]["label"] = " "
    result = run_tool_call({"questions": bad}, tools_interactive(callback=answer)[0])
    assert result.is_error
    assert "questions[1].options[0].label is empty" in result.content
    # questions as JSON text inside the JSON: rejected, asks for the array itself
    text = run_tool_call({"questions": json.dumps(QUESTIONS)}, tools_interactive(answer)[0])
    assert text.is_error and "not a string" in text.content


def test_questions_from_arguments_drops_only_null_multiselect() -> None:
    parsed = questions_from_arguments({"questions": [{**QUESTIONS[0], "multiSelect": None}]})
    assert parsed == [QUESTIONS[0]]
    assert questions_from_arguments({"questions": "text"}) == "text"  # the tool rejects it


def test_deferral_keeps_extra_out_of_the_content() -> None:
    result = run_tool_call({"questions": QUESTIONS}, tools_interactive(callback=defer)[0])
    assert not result.is_error
    body = json.loads(result.content)
    assert body["status"] == "deferred"
    assert "End your turn" in body["instructions"]
    assert "ask-123" not in result.content
    assert result.deferred is not None and result.deferred.extra == {"ask_id": "ask-123"}


def test_handler_failure_is_an_error_result() -> None:
    def broken(questions: list[Question], context: dict[str, Any]) -> Any:
        raise RuntimeError("Slack is down")

    result = run_tool_call({"questions": QUESTIONS}, tools_interactive(callback=broken)[0])
    assert result.is_error
    assert "could not get the person's answer: Slack is down" in result.content


async def test_async_and_sync_variants_inside_a_running_loop() -> None:
    async def slow_answer(questions: list[Question], context: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        return answer(questions, context)

    [tool] = tools_interactive(callback=slow_answer)
    result = await arun_tool_call(json.dumps({"questions": QUESTIONS}), tool)
    assert json.loads(result.content)["answers"][0]["selected"] == ["Postgres"]
    assert run_tool_call({"questions": QUESTIONS}, tool) == result  # sync, loop running
    rejected = await arun_tool_call("{", tool)
    assert rejected.is_error and "not valid JSON" in rejected.content


def test_next_request_items() -> None:
    ok = ToolCallResult(content='{"answers": []}')
    assert ok.openai_chat_message("call_1") == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"answers": []}',
    }
    assert ok.openai_responses_item("call_2") == {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": '{"answers": []}',
    }
    assert ok.anthropic_block("toolu_1") == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": '{"answers": []}',
    }
    error = ToolCallResult(content="fix it", is_error=True)
    assert error.anthropic_block("toolu_2")["is_error"] is True


# -- end to end through the openai client -----------------------------------------------------


class ScriptedModel:
    """An httpx transport playing the model: each request gets the next scripted reply, and every
    request body is kept so the test can check what the model was shown."""

    def __init__(self, replies: list[Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        return httpx.Response(200, json=self.replies.pop(0)(body))

    def client(self) -> OpenAI:
        return OpenAI(
            api_key="offline",
            base_url="http://127.0.0.1:9/v1",
            http_client=httpx.Client(transport=httpx.MockTransport(self)),
        )


def chat_reply(message: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda _: {
        "id": "chatcmpl",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


def chat_call(call_id: str, arguments: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    function = {"name": "ask_user", "arguments": arguments}
    return chat_reply(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}],
        }
    )


def test_chat_completions_loop_fix_then_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model sends broken JSON, reads the error, fixes the call, and reads the answers."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = example_globals("openai_raw.py")["run"]
    strict_call = {"questions": [{**q, "multiSelect": q.get("multiSelect")} for q in QUESTIONS]}
    model = ScriptedModel(
        [
            chat_call("call_1", '{"questions": [{"question": '),
            chat_call("call_2", json.dumps(strict_call)),
            chat_reply({"role": "assistant", "content": "Postgres it is."}),
        ]
    )
    [tool] = tools_interactive(callback=answer)
    assert run(model.client(), "Plan the service.", tool) == "Postgres it is."

    first, second, third = model.requests
    assert first["tools"] == [openai_chat_tool(tool, strict=True)]
    error = second["messages"][-1]
    assert error["role"] == "tool" and error["tool_call_id"] == "call_1"
    assert "not valid JSON" in error["content"]
    answered = third["messages"][-1]
    assert answered["tool_call_id"] == "call_2"
    assert json.loads(answered["content"])["answers"][1]["selected"] == ["Search", "Export"]


def test_chat_completions_deferral_ends_the_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    run = example_globals("openai_raw.py")["run"]
    model = ScriptedModel(
        [
            chat_call("call_1", json.dumps({"questions": QUESTIONS})),
            chat_reply({"role": "assistant", "content": "Waiting for your answers."}),
        ]
    )
    assert run(model.client(), "Plan.", tools_interactive(callback=defer)[0]) == (
        "Waiting for your answers."
    )
    shown = model.requests[1]["messages"][-1]["content"]
    assert json.loads(shown)["status"] == "deferred"
    assert "ask-123" not in shown


async def test_responses_api_loop_with_async_client() -> None:
    """A Responses API host loop over the async client; the model reads the answers JSON."""

    def response(output: list[dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        return lambda _: {
            "id": "resp",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    call = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_9",
        "name": "ask_user",
        "arguments": json.dumps({"questions": QUESTIONS}),
        "status": "completed",
    }
    text = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
    }
    model = ScriptedModel([response([call]), response([text])])
    client = AsyncOpenAI(
        api_key="offline",
        base_url="http://127.0.0.1:9/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(model)),
    )
    [tool] = tools_interactive(callback=answer)
    tools: Any = [openai_responses_tool(tool)]
    items: list[Any] = [{"role": "user", "content": "Plan."}]
    while True:
        reply = await client.responses.create(model="m", input=items, tools=tools)
        calls = [item for item in reply.output if item.type == "function_call"]
        if not calls:
            break
        for fc in calls:
            items.append(fc.model_dump(exclude_none=True))
            result = await arun_tool_call(fc.arguments, tool)
            items.append(result.openai_responses_item(fc.call_id))
    assert reply.output_text == "Done."
    assert model.requests[0]["tools"] == [openai_responses_tool(tool)]
    sent = model.requests[1]["input"][-1]
    assert sent["type"] == "function_call_output" and sent["call_id"] == "call_9"
    assert json.loads(sent["output"])["answers"][0]["selected"] == ["Postgres"]


def test_bridge_and_the_providers_adapter_import_no_framework() -> None:
    code = (
        "import sys, bridge, bridge.frameworks, bridge.frameworks.providers\n"
        "loaded = {'chatlas', 'pydantic_ai', 'agents', 'openai', 'anthropic', 'langchain_core',"
        " 'langgraph', 'claude_agent_sdk'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
