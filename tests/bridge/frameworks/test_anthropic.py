"""Raw provider adapter, Anthropic side: the real ``anthropic`` client drives ask_user end to end.

A host loop (``messages.create`` -> ``tool_use`` -> :func:`run_tool_call` -> a user message of
``tool_result`` blocks -> ``messages.create``) runs the real ``Anthropic`` / ``AsyncAnthropic``
client against a scripted Messages API behind an httpx ``MockTransport`` (no socket is opened).
The fake API keeps every request body, and refuses -- with the API's own 400 error -- a request
that breaks the Messages API's tool-use rules, so the tests check both what the model was shown
and that the API would have accepted it.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2 as httpx
import pytest
from anthropic import Anthropic, AsyncAnthropic

from bridge import AskUserDeferred, AskUserTool, Question, tools_interactive
from bridge.deferred import DEFAULT_INSTRUCTIONS
from bridge.frameworks.providers import (
    ToolCallResult,
    anthropic_tool,
    arun_tool_call,
    run_tool_call,
)
from tests.support.samples import (
    DATABASE,
    DATABASE_AND_FEATURES_PICKS,
    DATABASE_QUESTION,
    FEATURES,
    FEATURES_QUESTION,
)

# The planning pair, Postgres described with a non-ASCII dash (it must reach the model unescaped).
POSTGRES = {"label": "Postgres", "description": "Relational, already run by ops — no new infra"}
QUESTIONS: list[dict[str, Any]] = [
    {**DATABASE_QUESTION, "options": [POSTGRES, *DATABASE_QUESTION["options"][1:]]},
    FEATURES_QUESTION,
]

MODEL = "claude-sonnet-4-6"

# What the bridge echoes back: the validated questions, multiSelect always present.
ECHOED = [{**QUESTIONS[0], "multiSelect": False}, QUESTIONS[1]]

ANSWERS = {
    "answers": [
        {"question": DATABASE, "selected": ["Postgres"], "other_text": None},
        {"question": FEATURES, "selected": ["Search", "Export"], "other_text": None},
    ]
}

# The model's first, broken call: a 13-character header.
TOO_LONG_HEADER = [{**QUESTIONS[0], "header": "Database pick"}]
REJECTED = (
    "The ask_user call was rejected: 1 problem to fix before calling it again.\n"
    "- questions[0].header 'Database pick' is 13 characters long: use at most 12 characters "
    "(a one or two word label such as 'Format')"
)


class Handler:
    """A ``tools_interactive`` callback that records every question set it was asked."""

    def __init__(self, reply: Callable[[list[Question]], Any]) -> None:
        self.reply = reply
        self.asked: list[list[str]] = []

    def __call__(self, questions: list[Question], context: dict[str, Any]) -> Any:
        self.asked.append([q.question for q in questions])
        return self.reply(questions)


def answering() -> Handler:
    return Handler(lambda _: DATABASE_AND_FEATURES_PICKS)


def deferring() -> Handler:
    return Handler(lambda _: AskUserDeferred(extra={"ask_id": "ask-123"}))


# -- the scripted Messages API ----------------------------------------------------------------

Reply = Callable[[dict[str, Any]], dict[str, Any]]

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOOL_KEYS = {"name", "description", "input_schema", "cache_control", "type", "strict"}
_RESULT_KEYS = {"type", "tool_use_id", "content", "is_error", "cache_control"}


def api_rule_violation(body: dict[str, Any]) -> str | None:
    """What the Messages API would refuse in ``body`` (its documented tool-use rules), or None.

    A custom tool needs a valid name and an object ``input_schema``; every ``tool_use`` block of
    an assistant message needs a ``tool_result`` in the very next (user) message, before any other
    content, one per id; a ``tool_result`` holds only its documented fields.
    """
    for tool in body.get("tools", []):
        if set(tool) - _TOOL_KEYS:
            return f"tools: unexpected fields {sorted(set(tool) - _TOOL_KEYS)}"
        if not _TOOL_NAME.match(tool.get("name", "")):
            return f"tools: bad name {tool.get('name')!r}"
        if tool.get("input_schema", {}).get("type") != "object":
            return "tools: input_schema must be a JSON Schema with type 'object'"
    messages = body["messages"]
    for i, message in enumerate(messages):
        content = message["content"]
        if message["role"] != "assistant" or isinstance(content, str):
            continue
        ids = [block["id"] for block in content if block["type"] == "tool_use"]
        if not ids:
            continue
        following = messages[i + 1]["content"] if i + 1 < len(messages) else None
        if not isinstance(following, list) or messages[i + 1]["role"] != "user":
            return f"messages.{i + 1}: tool_use ids {ids} need tool_result blocks right after"
        results = [block for block in following if block["type"] == "tool_result"]
        if following[: len(results)] != results:
            return f"messages.{i + 1}: tool_result blocks must come first"
        if [block["tool_use_id"] for block in results] != ids:
            return f"messages.{i + 1}: tool_result ids do not match tool_use ids {ids}"
        for block in results:
            if set(block) - _RESULT_KEYS:
                return f"messages.{i + 1}: unexpected fields {sorted(set(block) - _RESULT_KEYS)}"
            if not isinstance(block["content"], str | list):
                return f"messages.{i + 1}: tool_result content must be a string or blocks"
            if not isinstance(block.get("is_error", False), bool):
                return f"messages.{i + 1}: is_error must be a boolean"
    return None


class ScriptedMessages:
    """An httpx transport playing the Messages API: each request gets the next scripted reply,
    and every request body is kept so the test can check exactly what the model received."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.method == "POST"
        assert request.url.path == "/v1/messages"
        auth = request.headers.get("x-api-key") or request.headers.get("authorization") or ""
        assert auth.removeprefix("Bearer ") == "offline"
        assert request.headers["anthropic-version"]
        body = json.loads(request.content)
        self.requests.append(body)
        problem = api_rule_violation(body)
        if problem is not None:
            error = {"type": "invalid_request_error", "message": problem}
            return httpx.Response(400, json={"type": "error", "error": error})
        return httpx.Response(200, json=self.replies.pop(0)(body))

    def client(self) -> Anthropic:
        return Anthropic(
            api_key="offline",
            base_url="http://127.0.0.1:9",
            max_retries=0,
            http_client=httpx.Client(transport=httpx.MockTransport(self)),
        )

    def async_client(self) -> AsyncAnthropic:
        return AsyncAnthropic(
            api_key="offline",
            base_url="http://127.0.0.1:9",
            max_retries=0,
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(self)),
        )


def message(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def says(text: str) -> Reply:
    return lambda _: message([{"type": "text", "text": text}], "end_turn")


def tool_use(use_id: str, questions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": "ask_user", "input": {"questions": questions}}


def calls(*uses: dict[str, Any], text: str | None = None) -> Reply:
    preamble = [{"type": "text", "text": text}] if text else []
    return lambda _: message([*preamble, *uses], "tool_use")


# -- the host loop ----------------------------------------------------------------------------


def run(client: Anthropic, prompt: str, ask_user: AskUserTool) -> tuple[str, list[ToolCallResult]]:
    """A hand-written Anthropic agent loop; returns the final text and every tool call result."""
    messages: list[Any] = [{"role": "user", "content": prompt}]
    tools: Any = [anthropic_tool(ask_user)]
    results: list[ToolCallResult] = []
    while True:
        reply = client.messages.create(model=MODEL, max_tokens=1024, messages=messages, tools=tools)
        messages.append({"role": "assistant", "content": reply.content})
        uses = [block for block in reply.content if block.type == "tool_use"]
        if not uses:
            return "".join(block.text for block in reply.content if block.type == "text"), results
        blocks = []
        for block in uses:
            result = run_tool_call(block.input, ask_user)
            results.append(result)
            blocks.append(result.anthropic_block(block.id))
        messages.append({"role": "user", "content": blocks})


async def arun(
    client: AsyncAnthropic, prompt: str, ask_user: AskUserTool
) -> tuple[str, list[ToolCallResult]]:
    """:func:`run` over the async client and :func:`arun_tool_call`."""
    messages: list[Any] = [{"role": "user", "content": prompt}]
    tools: Any = [anthropic_tool(ask_user)]
    results: list[ToolCallResult] = []
    while True:
        reply = await client.messages.create(
            model=MODEL, max_tokens=1024, messages=messages, tools=tools
        )
        messages.append({"role": "assistant", "content": reply.content})
        uses = [block for block in reply.content if block.type == "tool_use"]
        if not uses:
            return "".join(block.text for block in reply.content if block.type == "text"), results
        blocks = []
        for block in uses:
            result = await arun_tool_call(block.input, ask_user)
            results.append(result)
            blocks.append(result.anthropic_block(block.id))
        messages.append({"role": "user", "content": blocks})


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of a request's last (user) message."""
    last = request["messages"][-1]
    assert last["role"] == "user"
    return [block for block in last["content"] if block["type"] == "tool_result"]


# -- tests ------------------------------------------------------------------------------------


def test_answered_call_round_trip() -> None:
    """The model sees the tool definition verbatim, calls it, and reads the answers JSON."""
    handler = answering()
    [tool] = tools_interactive(callback=handler)
    model = ScriptedMessages(
        [
            calls(tool_use("toolu_01", QUESTIONS), text="I need two decisions first."),
            says("Postgres, with search and export."),
        ]
    )
    text, results = run(model.client(), "Plan the service.", tool)
    assert text == "Postgres, with search and export."
    assert handler.asked == [[q["question"] for q in QUESTIONS]]

    first, second = model.requests
    # The definition reached the API exactly as anthropic_tool built it, with input_schema.
    assert first["tools"] == [anthropic_tool(tool)]
    assert first["tools"] == [
        {"name": "ask_user", "description": tool.description, "input_schema": tool.parameters}
    ]
    assert first["tools"][0]["input_schema"]["required"] == ["questions"]
    assert first["messages"] == [{"role": "user", "content": "Plan the service."}]

    # The assistant turn went back with its tool_use block unchanged ...
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    [preamble, use] = assistant["content"]
    assert preamble == {"type": "text", "text": "I need two decisions first."}
    assert use == tool_use("toolu_01", QUESTIONS)
    # ... followed by exactly one user message holding exactly the answers.
    assert len(second["messages"]) == 3
    assert second["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": results[0].content}
    ]
    assert json.loads(results[0].content) == {"questions": ECHOED, **ANSWERS}
    assert "no new infra" in results[0].content and "—" in results[0].content  # not \u-escaped


def test_rejected_call_is_an_error_result_the_model_fixes() -> None:
    """A 13-character header comes back as ``is_error: true`` with the fixable message; the
    handler is not asked; the model resends and reads the answers."""
    handler = answering()
    [tool] = tools_interactive(callback=handler)
    model = ScriptedMessages(
        [
            calls(tool_use("toolu_bad", TOO_LONG_HEADER)),
            calls(tool_use("toolu_good", QUESTIONS)),
            says("Done."),
        ]
    )
    text, results = run(model.client(), "Plan the service.", tool)
    assert text == "Done."
    assert handler.asked == [[q["question"] for q in QUESTIONS]]  # only the fixed call
    assert [r.is_error for r in results] == [True, False]

    _, second, third = model.requests
    assert tool_results(second) == [
        {"type": "tool_result", "tool_use_id": "toolu_bad", "content": REJECTED, "is_error": True}
    ]
    [answered] = tool_results(third)
    assert set(answered) == {"type", "tool_use_id", "content"}  # no is_error on a good result
    assert answered["tool_use_id"] == "toolu_good"
    assert json.loads(answered["content"]) == {"questions": ECHOED, **ANSWERS}


def test_deferring_handler_ends_the_turn_and_keeps_extra_for_the_host() -> None:
    handler = deferring()
    [tool] = tools_interactive(callback=handler)
    model = ScriptedMessages(
        [calls(tool_use("toolu_01", QUESTIONS)), says("Waiting for your answers.")]
    )
    text, [result] = run(model.client(), "Plan the service.", tool)
    assert text == "Waiting for your answers."
    assert handler.asked == [[q["question"] for q in QUESTIONS]]

    [block] = tool_results(model.requests[1])
    assert set(block) == {"type", "tool_use_id", "content"}
    assert block["tool_use_id"] == "toolu_01"
    assert json.loads(block["content"]) == {
        "questions": ECHOED,
        "status": "deferred",
        "instructions": DEFAULT_INSTRUCTIONS,
    }
    assert "ask-123" not in json.dumps(model.requests)  # the host's extra never reaches the API
    assert result.deferred is not None and result.deferred.extra == {"ask_id": "ask-123"}


def test_parallel_calls_are_answered_in_one_user_message() -> None:
    """Two ask_user calls in one turn: both results, in call order, in the next user message --
    the broken one marked as an error, the good one answered."""
    handler = answering()
    [tool] = tools_interactive(callback=handler)
    model = ScriptedMessages(
        [
            calls(tool_use("toolu_a", TOO_LONG_HEADER), tool_use("toolu_b", QUESTIONS)),
            says("Done."),
        ]
    )
    assert run(model.client(), "Plan.", tool)[0] == "Done."
    second = model.requests[1]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    bad, good = tool_results(second)
    assert bad == {
        "type": "tool_result",
        "tool_use_id": "toolu_a",
        "content": REJECTED,
        "is_error": True,
    }
    assert good["tool_use_id"] == "toolu_b" and "is_error" not in good
    assert json.loads(good["content"])["answers"] == ANSWERS["answers"]


async def test_async_client_with_async_handler() -> None:
    asked: list[str] = []

    async def answer(questions: list[Question], context: dict[str, Any]) -> Any:
        asked.extend(q.question for q in questions)
        return answering().reply(questions)

    [tool] = tools_interactive(callback=answer)
    model = ScriptedMessages(
        [
            calls(tool_use("toolu_bad", TOO_LONG_HEADER)),
            calls(tool_use("toolu_good", QUESTIONS)),
            says("Done."),
        ]
    )
    text, results = await arun(model.async_client(), "Plan.", tool)
    assert text == "Done."
    assert asked == [q["question"] for q in QUESTIONS]
    assert model.requests[0]["tools"] == [anthropic_tool(tool)]
    assert tool_results(model.requests[1]) == [
        {"type": "tool_result", "tool_use_id": "toolu_bad", "content": REJECTED, "is_error": True}
    ]
    [answered] = tool_results(model.requests[2])
    assert answered == {
        "type": "tool_result",
        "tool_use_id": "toolu_good",
        "content": results[1].content,
    }
    assert json.loads(answered["content"]) == {"questions": ECHOED, **ANSWERS}


def test_the_fake_api_refuses_a_loop_that_breaks_the_tool_use_rules() -> None:
    """The scripted API is strict enough to fail a wrong host loop: a tool_result answering the
    wrong id is a 400, raised by the client as ``BadRequestError``."""
    model = ScriptedMessages([calls(tool_use("toolu_01", QUESTIONS))])
    client = model.client()
    messages: list[Any] = [{"role": "user", "content": "Plan."}]
    tools: Any = [anthropic_tool()]
    reply = client.messages.create(model=MODEL, max_tokens=64, messages=messages, tools=tools)
    result = ToolCallResult(content='{"answers": []}')
    messages += [
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": [result.anthropic_block("toolu_other")]},
    ]
    with pytest.raises(anthropic.BadRequestError, match="tool_result ids do not match"):
        client.messages.create(model=MODEL, max_tokens=64, messages=messages, tools=tools)
    broken_tool: Any = [{**anthropic_tool(), "parameters": anthropic_tool()["input_schema"]}]
    with pytest.raises(anthropic.BadRequestError, match="unexpected fields"):
        client.messages.create(model=MODEL, max_tokens=64, messages=messages[:1], tools=broken_tool)


def test_tool_definition_is_a_fresh_copy() -> None:
    """A host that edits one request's definition never changes the next one's."""
    definition = anthropic_tool()
    pristine = copy.deepcopy(definition)
    definition["input_schema"]["properties"].clear()
    assert anthropic_tool() == pristine
