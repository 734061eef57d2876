"""A scripted model behind the providers' real HTTP APIs, on 127.0.0.1, for end-to-end tests.

Agent frameworks reach OpenAI and Anthropic through their own HTTP clients (the ``openai`` and
``anthropic`` SDKs and their retries, SSE decoders and stream accumulators). A fake transport skips
all of that, so this server listens on a real loopback socket and answers in the providers' own wire
formats, streamed or not as each request asks:

- ``POST /v1/chat/completions``: OpenAI Chat Completions (a ``chat.completion``, or
  ``chat.completion.chunk`` events ending ``data: [DONE]``);
- ``POST /v1/responses``: OpenAI Responses (a ``response``, or its typed event sequence);
- ``POST /v1/messages``: Anthropic Messages (a ``message``, or its typed event sequence).

A script is a list of turns, one per request, taken in order whatever the endpoint: a
:class:`Reply` (text and/or tool calls), or a function of the request body that returns one -- to
answer from what the tool said. :func:`calls_ask_user`, :func:`calls` and :func:`says` build
replies; :func:`tool_results` and :func:`last_tool_result` read the tool results out of a request
body in any of the three formats, and :func:`user_text` a user message that ends it.

Each request is first checked against the API rules below and refused with that API's own error
status and body, so a framework that sends what the real API would refuse fails here too. A refused
request uses no turn (the model never saw it). A request with no turn left, a turn that raises, or a
reply the API could not send is answered 500 (with ``x-should-retry: false``, so the SDKs fail at
once instead of retrying) and fails the test when the server stops, even if the framework swallowed
the error: leaving ``async with ModelServer(...)`` (or ``ModelServer.running_in_thread(...)``)
raises :class:`ScriptError`.

Frameworks whose calls block (sync clients: ``OpenAI``, ``Anthropic``, chatlas, LangChain's
``invoke``) need the server on a loop of its own: ``with ModelServer.running_in_thread(script)``.

A client that runs as another process (the Claude Code CLI) is beyond the suite's loopback guard:
fence it with :class:`RefusingProxy`, which refuses and records whatever else it tries to reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import jsonschema
from aiohttp import web

Body = dict[str, Any]

# -- the script -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model makes.

    ``arguments`` is the JSON text the model sends, verbatim -- malformed on purpose if the test
    wants that -- or a mapping sent as compact JSON. ``call_id`` defaults to a fresh id per request
    (``call_...`` for OpenAI, ``toolu_...`` for Anthropic).
    """

    arguments: str | Mapping[str, Any]
    name: str = "ask_user"
    call_id: str | None = None

    @property
    def arguments_json(self) -> str:
        """The arguments as the OpenAI APIs carry them: JSON text."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))

    def input_object(self) -> dict[str, Any] | None:
        """The arguments as Anthropic's ``tool_use.input`` carries them (an object), or None when
        they are not a JSON object, which the Messages API cannot send."""
        try:
            value = json.loads(self.arguments_json)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Reply:
    """What the model answers in one turn: text, tool calls, or text then tool calls."""

    text: str | None = None
    tool_calls: Sequence[ToolCall] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.text is None and not self.tool_calls:
            raise ValueError("a Reply needs text, tool calls or both")


Turn = Reply | Callable[[Body], Reply]
"""A fixed reply, or a function of the decoded request body (a copy) that returns one."""


def calls_ask_user(
    arguments: str | Mapping[str, Any], *, call_id: str | None = None, text: str | None = None
) -> Reply:
    """A turn calling ``ask_user`` once (after ``text``, if given)."""
    return Reply(text=text, tool_calls=(ToolCall(arguments, call_id=call_id),))


def calls(*tool_calls: ToolCall, text: str | None = None) -> Reply:
    """A turn making several tool calls at once (parallel tool calls)."""
    return Reply(text=text, tool_calls=tool_calls)


def says(text: str) -> Reply:
    """A final turn: text and no tool call."""
    return Reply(text=text)


@dataclass(frozen=True)
class ToolResult:
    """A tool result a request sends back: its call id, its text, and (Anthropic only, where the
    request can say so) whether it is marked ``is_error``."""

    call_id: str
    content: str
    is_error: bool = False


def tool_results(body: Body) -> list[ToolResult]:
    """The tool results a request body sends for the model's latest turn, in order, in whichever
    format it is: the trailing ``tool`` messages (Chat Completions), the ``function_call_output``
    items of the input's trailing tool items (Responses), or the ``tool_result`` blocks of the last
    user message (Messages). Empty when the request ends with anything else."""
    if "input" in body:
        items = _input_items(body)
        trailing: list[Body] = []
        for item in reversed(items):
            if item.get("type") not in ("function_call", "function_call_output", "reasoning"):
                break
            trailing.insert(0, item)
        return [
            ToolResult(item["call_id"], _text_of(item.get("output")))
            for item in trailing
            if item.get("type") == "function_call_output"
        ]
    messages: list[Body] = body.get("messages") or []
    chat: list[ToolResult] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        chat.insert(0, ToolResult(message["tool_call_id"], _text_of(message.get("content"))))
    if chat or not messages or messages[-1].get("role") != "user":
        return chat
    return [
        ToolResult(
            block["tool_use_id"], _text_of(block.get("content")), block.get("is_error") is True
        )
        for block in _blocks(messages[-1])
        if block.get("type") == "tool_result"
    ]


def last_tool_result(body: Body) -> ToolResult:
    """The last of :func:`tool_results`; a request with none is a LookupError."""
    results = tool_results(body)
    if not results:
        raise LookupError("the request sends no tool result for the model's last turn")
    return results[-1]


def user_text(body: Body) -> str:
    """The text of the request's last message when it is the user's, in whichever format it is
    (a string, or text parts): how a host resumes a conversation with something new for the model,
    such as a deferred question's answers sent as the next user message. A request ending with
    anything else -- a tool result, the model's own turn -- is a LookupError."""
    if "input" in body:
        items = _input_items(body)
        last = items[-1] if items else {}
        is_user = last.get("type", "message") == "message" and last.get("role") == "user"
    else:
        messages: list[Body] = body.get("messages") or []
        last = messages[-1] if messages else {}
        results = [block for block in _blocks(last) if block.get("type") == "tool_result"]
        is_user = last.get("role") == "user" and not results
    if not is_user:
        raise LookupError("the request does not end with a user message")
    return _text_of(last.get("content"))


def _text_of(content: Any) -> str:
    """The text of a tool result's content: a string, or the texts of a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _blocks(message: Body) -> list[Body]:
    content = message.get("content")
    return (
        [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    )


def _input_items(body: Body) -> list[Body]:
    """A Responses request's input as items (a string input is one user message)."""
    value = body.get("input")
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# -- API rules --------------------------------------------------------------------------------
#
# What the real APIs refuse, as their documentation and error messages state it; each rule answers
# with the API's own status, error type and (OpenAI) param and code.
#
# Every API: the credentials header is present (any value): OpenAI ``Authorization: Bearer ...``;
# Anthropic ``x-api-key`` or ``Authorization: Bearer ...``, and ``anthropic-version`` (401/400).
#
# Tool definitions:
# - Chat Completions: ``{"type": "function", "function": {"name", "parameters"?, "strict"?}}``.
#   A Responses-shaped tool (no ``function``) is refused.
# - Responses: ``{"type": "function", "name", "parameters"?, "strict"?}``. A Chat-shaped tool
#   (no ``name``) is refused. Omitting ``strict`` is not ``strict: true``: the API then makes
#   the schema strict itself instead of refusing it.
# - Messages: a custom tool (``type`` absent or ``"custom"``) has ``name`` and ``input_schema``
#   and only the documented keys; server tools (any other ``type``) are not checked.
# - Names match ``^[a-zA-Z0-9_-]{1,64}$``.
# - The schema is valid JSON Schema (draft 2020-12 meta-schema) whose top level is
#   ``"type": "object"``.
# - OpenAI ``strict: true``: every object schema has ``additionalProperties: false`` and lists
#   every one of its properties in ``required``.
#
# Tool results answer tool calls:
# - Chat Completions: an assistant message with ``tool_calls`` is followed by one ``tool``
#   message per ``tool_call_id`` before any other message; a ``tool`` message follows such an
#   assistant message (or another tool message) and names one of its calls.
# - Responses: each ``function_call_output.call_id`` matches an earlier ``function_call`` of the
#   conversation (``previous_response_id``'s stored items, then ``input``); each ``function_call``
#   gets an output; ``previous_response_id`` names a response this server stored.
# - Messages: each ``tool_use`` block of an assistant message is answered by a ``tool_result`` in
#   the next message, a user message whose tool results come before any other block; each
#   ``tool_result`` answers a ``tool_use`` of the message right before it.
#
# Required parameters: ``model`` and ``messages`` (non-empty) for Chat Completions, ``model`` for
# Responses, ``model``, ``max_tokens`` and ``messages`` for Messages; in Messages, every message has
# non-empty content (except a final assistant message) and no text block is empty.

_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")
_NAME_LIMIT = 64
_ANTHROPIC_NAME = "^[a-zA-Z0-9_-]{1,64}$"
_ANTHROPIC_TOOL_KEYS = frozenset(
    {
        "name",
        "input_schema",
        "description",
        "type",
        "cache_control",
        "strict",
        "allowed_callers",
        "defer_loading",
        "eager_input_streaming",
        "input_examples",
    }
)
_ANTHROPIC_INVALID_SCHEMA = (
    "JSON schema is invalid. It must match JSON Schema draft 2020-12 "
    "(https://json-schema.org/draft/2020-12). Learn more about tool use at "
    "https://docs.claude.com/en/docs/tool-use."
)


@dataclass(frozen=True)
class Violation:
    """Why the real API would refuse a request, as it says so: the message, the status and error
    type, and (OpenAI) the ``param`` and ``code`` fields."""

    message: str
    param: str | None = None
    code: str | None = None
    status: int = 400
    error_type: str = "invalid_request_error"


def _openai_credentials_violation(headers: Mapping[str, str]) -> Violation | None:
    if headers.get("Authorization", "").removeprefix("Bearer ").strip():
        return None
    return Violation(
        "You didn't provide an API key. You need to provide your API key in an Authorization "
        "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        status=401,
    )


def chat_completions_violation(headers: Mapping[str, str], body: Body) -> Violation | None:
    """The first rule a Chat Completions request breaks, or None."""
    problem = _openai_credentials_violation(headers) or _missing(body, "model", "messages")
    if problem is not None:
        return problem
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return Violation(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an "
            "empty array instead.",
            "messages",
            "empty_array",
        )
    for index, tool in enumerate(body.get("tools") or []):
        if tool.get("type") != "function":
            continue
        at = f"tools[{index}]"
        function = tool.get("function")
        if not isinstance(function, dict):
            return _missing_parameter(f"{at}.function")
        problem = _function_violation(function, f"{at}.function")
        if problem is not None:
            return problem
    return _chat_tool_messages_violation(messages)


def _chat_tool_messages_violation(messages: list[Body]) -> Violation | None:
    calls: list[str] | None = None  # the calls of the assistant message heading this tool run
    unanswered: list[str] = []
    asked_at = 0
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            if calls is None:
                return Violation(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{index}].role",
                )
            call_id = message.get("tool_call_id")
            if call_id not in calls:
                return Violation(
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' "
                    "of previous message.",
                    f"messages.[{index}].tool_call_id",
                )
            if call_id in unanswered:
                unanswered.remove(call_id)
            continue
        if unanswered:
            return _chat_unanswered(asked_at, unanswered)
        calls = None
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = [call.get("id") for call in message["tool_calls"]]
            unanswered = list(calls)
            asked_at = index
    return _chat_unanswered(asked_at, unanswered) if unanswered else None


def _chat_unanswered(index: int, call_ids: list[str]) -> Violation:
    return Violation(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(call_ids),
        f"messages.[{index}].role",
    )


def responses_violation(
    headers: Mapping[str, str], body: Body, stored: Mapping[str, list[Body]]
) -> Violation | None:
    """The first rule a Responses request breaks, or None; ``stored`` holds the items of each
    response this server stored, by id, for ``previous_response_id``."""
    problem = _openai_credentials_violation(headers) or _missing(body, "model")
    if problem is not None:
        return problem
    for index, tool in enumerate(body.get("tools") or []):
        if tool.get("type") == "function":
            problem = _function_violation(tool, f"tools[{index}]")
            if problem is not None:
                return problem
    previous = body.get("previous_response_id")
    if previous is not None and previous not in stored:
        return Violation(
            f"Previous response with id '{previous}' not found.",
            "previous_response_id",
            "previous_response_not_found",
        )
    called: set[str] = set()
    unanswered: list[str] = []
    for item in [*stored.get(previous or "", []), *_input_items(body)]:
        if item.get("type") == "function_call":
            called.add(item.get("call_id", ""))
            unanswered.append(item.get("call_id", ""))
        elif item.get("type") == "function_call_output":
            call_id = item.get("call_id", "")
            if call_id not in called:
                return Violation(
                    f"No tool call found for function call output with call_id {call_id}.", "input"
                )
            if call_id in unanswered:
                unanswered.remove(call_id)
    if unanswered:
        return Violation(f"No tool output found for function call {unanswered[0]}.", "input")
    return None


def _missing(body: Body, *names: str) -> Violation | None:
    for name in names:
        if body.get(name) is None:
            return _missing_parameter(name)
    return None


def _missing_parameter(param: str) -> Violation:
    return Violation(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


def _function_violation(function: Body, at: str) -> Violation | None:
    """An OpenAI function definition's problem: ``at`` is where its name and parameters sit."""
    name = function.get("name")
    if name is None:
        return _missing_parameter(f"{at}.name")
    if not isinstance(name, str) or len(name) > _NAME_LIMIT:
        length = len(name) if isinstance(name, str) else 0
        return Violation(
            f"Invalid '{at}.name': string too long. Expected a string with maximum length "
            f"{_NAME_LIMIT}, but got a string with length {length} instead.",
            f"{at}.name",
            "string_above_max_length",
        )
    if not _NAME.match(name):
        return Violation(
            f"Invalid '{at}.name': string does not match pattern. Expected a string that matches "
            f"the pattern '{_NAME.pattern}'.",
            f"{at}.name",
            "invalid_value",
        )
    parameters = function.get("parameters")
    if parameters is None:
        return None
    problem = _schema_problem(parameters)
    if problem is None and parameters.get("type") != "object":
        problem = (
            "schema must be a JSON Schema of 'type: \"object\"', "
            f"got 'type: \"{parameters.get('type')}\"'."
        )
    if problem is None and function.get("strict") is True:
        problem = _strict_problem(parameters, ())
    if problem is None:
        return None
    return Violation(
        f"Invalid schema for function '{name}': {problem}",
        f"{at}.parameters",
        "invalid_function_parameters",
    )


def _schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a valid JSON Schema object, or None."""
    if not isinstance(schema, dict):
        return f"{json.dumps(schema)} is not of type 'object'."
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        return f"{error.message} (at {'/'.join(map(str, error.path)) or 'the top level'})."
    return None


def _strict_problem(schema: Any, context: tuple[str | int, ...]) -> str | None:
    """The first place where ``schema`` breaks OpenAI's strict-mode rules, or None."""
    if not isinstance(schema, dict):
        return None
    types = schema.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types)
    if is_object or (types is None and "properties" in schema):
        if schema.get("additionalProperties") is not False:
            return (
                f"In context={context!r}, 'additionalProperties' is required to be supplied and "
                "to be false."
            )
        required = schema.get("required")
        listed = required if isinstance(required, list) else []
        missing = [name for name in schema.get("properties") or {} if name not in listed]
        if missing:
            return (
                f"In context={context!r}, 'required' is required to be supplied and to be an array "
                f"including every key in properties. Missing '{missing[0]}'."
            )
    for where, subschema in _subschemas(schema):
        problem = _strict_problem(subschema, context + where)
        if problem is not None:
            return problem
    return None


def _subschemas(schema: Body) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    for keyword in ("properties", "$defs", "definitions"):
        for name, subschema in (schema.get(keyword) or {}).items():
            yield (keyword, name), subschema
    for keyword in ("items", "additionalProperties", "not", "if", "then", "else"):
        if isinstance(schema.get(keyword), dict):
            yield (keyword,), schema[keyword]
    for keyword in ("prefixItems", "anyOf", "allOf", "oneOf"):
        for index, subschema in enumerate(schema.get(keyword) or []):
            yield (keyword, index), subschema


def messages_violation(headers: Mapping[str, str], body: Body) -> Violation | None:
    """The first rule an Anthropic Messages request breaks, or None."""
    key = headers.get("x-api-key") or headers.get("Authorization", "").removeprefix("Bearer ")
    if not key.strip():
        return Violation(
            "x-api-key header is required", status=401, error_type="authentication_error"
        )
    if not headers.get("anthropic-version"):
        return Violation("anthropic-version: header is required")
    for name in ("model", "max_tokens", "messages"):
        if body.get(name) is None:
            return Violation(f"{name}: Field required")
    for index, tool in enumerate(body.get("tools") or []):
        problem = _anthropic_tool_problem(tool, f"tools.{index}.custom")
        if problem is not None:
            return Violation(problem)
    messages: list[Body] = body["messages"]
    for index, message in enumerate(messages):
        content = message.get("content")
        final_assistant = index == len(messages) - 1 and message.get("role") == "assistant"
        if not content and not final_assistant:
            return Violation(
                f"messages.{index}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        if any(block.get("type") == "text" and not block.get("text") for block in _blocks(message)):
            return Violation("messages: text content blocks must be non-empty")
    # A result answering the wrong call is named as such, before the call it leaves unanswered.
    for check in (_tool_result_problem, _tool_use_problem):
        for index in range(len(messages)):
            problem = check(messages, index)
            if problem is not None:
                return Violation(problem)
    return None


def _anthropic_tool_problem(tool: Body, at: str) -> str | None:
    if tool.get("type") not in (None, "custom"):
        return None  # a server tool (web search, code execution...): its own shape
    extra = sorted(set(tool) - _ANTHROPIC_TOOL_KEYS)
    if extra:
        return f"{at}.{extra[0]}: Extra inputs are not permitted"
    name = tool.get("name")
    if name is None:
        return f"{at}.name: Field required"
    if not isinstance(name, str) or not re.match(_ANTHROPIC_NAME, name):
        return f"{at}.name: String should match pattern '{_ANTHROPIC_NAME}'"
    schema = tool.get("input_schema")
    if schema is None:
        return f"{at}.input_schema: Field required"
    if not isinstance(schema, dict):
        return f"{at}.input_schema: Input should be a valid dictionary"
    if schema.get("type") != "object":
        return f"{at}.input_schema.type: Input should be 'object'"
    problem = _schema_problem(schema)
    return (
        None if problem is None else f"{at}.input_schema: {_ANTHROPIC_INVALID_SCHEMA} ({problem})"
    )


def _tool_result_problem(messages: list[Body], index: int) -> str | None:
    blocks = _blocks(messages[index])
    results = [block for block in blocks if block.get("type") == "tool_result"]
    if not results:
        return None
    if blocks[: len(results)] != results:
        return (
            f"messages.{index}: `tool_result` blocks must come first in the content of a user "
            "message, before any other block"
        )
    previous = messages[index - 1] if index else {}
    uses = [block.get("id") for block in _blocks(previous) if block.get("type") == "tool_use"]
    for position, block in enumerate(results):
        if previous.get("role") != "assistant" or block.get("tool_use_id") not in uses:
            return (
                f"messages.{index}.content.{position}: unexpected `tool_use_id` found in "
                f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` block must "
                "have a corresponding `tool_use` block in the previous message."
            )
    return None


def _tool_use_problem(messages: list[Body], index: int) -> str | None:
    message = messages[index]
    if message.get("role") != "assistant":
        return None
    uses = [str(block.get("id")) for block in _blocks(message) if block.get("type") == "tool_use"]
    following = messages[index + 1] if index + 1 < len(messages) else {}
    answered = {
        block.get("tool_use_id")
        for block in _blocks(following)
        if block.get("type") == "tool_result" and following.get("role") == "user"
    }
    missing = [use for use in uses if use not in answered]
    if not missing:
        return None
    return (
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message."
    )


# -- wire formats -----------------------------------------------------------------------------


class _TurnFailed(Exception):
    """The scripted turn could not answer: no turn left, the turn raised, or the reply cannot be
    sent in this API's format."""


@dataclass(frozen=True)
class _Call:
    """A tool call with the ids one request gives it."""

    name: str
    arguments: str
    call_id: str
    item_id: str  # the Responses output item's id
    input: dict[str, Any] | None  # what Anthropic's tool_use.input would hold


class _Turn:
    """A reply being rendered for one request: its ids, its calls, its token counts."""

    def __init__(
        self,
        reply: Reply,
        body: Body,
        new_id: Callable[[str], str],
        prefixes: tuple[str, str],
        piece_size: int,
    ) -> None:
        self.reply = reply
        self.body = body
        self.id = new_id(prefixes[0])
        self.message_id = new_id("msg")  # the Responses message item's id
        self.created = int(time.time())
        self.calls = [
            _Call(
                call.name,
                call.arguments_json,
                call.call_id or new_id(prefixes[1]),
                new_id("fc"),
                call.input_object(),
            )
            for call in reply.tool_calls
        ]
        length = len(reply.text or "") + sum(len(call.arguments) for call in self.calls)
        self.output_tokens = max(1, length // 4)
        self.input_tokens = max(1, len(json.dumps(body)) // 4)
        self.piece_size = piece_size

    def pieces(self, text: str) -> list[str]:
        """``text`` cut as a model streams it: in short pieces."""
        size = self.piece_size
        return [text[start : start + size] for start in range(0, len(text), size)]

    @property
    def model(self) -> Any:
        return self.body["model"]

    @property
    def obfuscation(self) -> dict[str, str]:
        """OpenAI pads stream events with ``obfuscation`` unless told not to."""
        options = self.body.get("stream_options") or {}
        return {} if options.get("include_obfuscation") is False else {"obfuscation": "sCr1pt"}


def _declared_tools(body: Body) -> set[str]:
    names: set[str] = set()
    for tool in body.get("tools") or []:
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        if isinstance(name, str):
            names.add(name)
    return names


# Chat Completions


def _chat_usage(turn: _Turn) -> Body:
    return {
        "prompt_tokens": turn.input_tokens,
        "completion_tokens": turn.output_tokens,
        "total_tokens": turn.input_tokens + turn.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chat_head(turn: _Turn, kind: str) -> Body:
    return {
        "id": turn.id,
        "object": kind,
        "created": turn.created,
        "model": turn.model,
        "service_tier": "default",
        "system_fingerprint": "fp_scripted",
    }


def _chat_completion(turn: _Turn) -> Body:
    message: Body = {
        "role": "assistant",
        "content": turn.reply.text,
        "refusal": None,
        "annotations": [],
    }
    if turn.calls:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in turn.calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": "tool_calls" if turn.calls else "stop",
    }
    return {**_chat_head(turn, "chat.completion"), "choices": [choice], "usage": _chat_usage(turn)}


def _chat_chunks(turn: _Turn) -> Iterator[Body]:
    """The ``chat.completion.chunk`` objects of a streamed reply, in order."""
    include_usage = (turn.body.get("stream_options") or {}).get("include_usage") is True
    head = {**_chat_head(turn, "chat.completion.chunk"), **turn.obfuscation}

    def chunk(delta: Body, finish_reason: str | None = None) -> Body:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**head, "choices": [choice], **({"usage": None} if include_usage else {})}

    text = turn.reply.text
    yield chunk({"role": "assistant", "content": "" if text is not None else None, "refusal": None})
    for piece in turn.pieces(text or ""):
        yield chunk({"content": piece})
    for index, call in enumerate(turn.calls):
        function = {"name": call.name, "arguments": ""}
        yield chunk(
            {
                "tool_calls": [
                    {"index": index, "id": call.call_id, "type": "function", "function": function}
                ]
            }
        )
        for piece in turn.pieces(call.arguments):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if turn.calls else "stop")
    if include_usage:
        yield {**head, "choices": [], "usage": _chat_usage(turn)}


# Responses


def _output_text(text: str) -> Body:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}


def _message_item(item_id: str, text: str | None, status: str) -> Body:
    content = [] if text is None else [_output_text(text)]
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "content": content,
        "role": "assistant",
    }


def _function_call_item(call: _Call, arguments: str, status: str) -> Body:
    return {
        "id": call.item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call.call_id,
        "name": call.name,
    }


def _response(turn: _Turn, status: str, output: list[Body]) -> Body:
    body = turn.body
    tools = [
        {"description": None, **tool, "strict": tool.get("strict", True)}
        if tool.get("type") == "function"
        else tool
        for tool in body.get("tools") or []
    ]
    usage = {
        "input_tokens": turn.input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": turn.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.input_tokens + turn.output_tokens,
    }
    done = status == "completed"
    return {
        "id": turn.id,
        "object": "response",
        "created_at": turn.created,
        "status": status,
        "background": False,
        "completed_at": turn.created if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"),
        "model": turn.model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": body.get("store", True),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": tools,
        "top_logprobs": 0,
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": usage if done else None,
        "user": None,
        "metadata": body.get("metadata") or {},
    }


def _response_output(turn: _Turn) -> list[Body]:
    """The finished output items of a reply: the message, then the function calls."""
    output: list[Body] = []
    if turn.reply.text is not None:
        output.append(_message_item(turn.message_id, turn.reply.text, "completed"))
    output += [_function_call_item(call, call.arguments, "completed") for call in turn.calls]
    return output


def _response_events(turn: _Turn, output: list[Body]) -> list[Body]:
    """The Responses stream of a reply, each event with its ``sequence_number``."""
    events: list[Body] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    emit("response.created", response=_response(turn, "in_progress", []))
    emit("response.in_progress", response=_response(turn, "in_progress", []))
    calls = iter(turn.calls)
    for index, item in enumerate(output):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            added = _message_item(item["id"], None, "in_progress")
            emit("response.output_item.added", output_index=index, item=added)
            emit("response.content_part.added", **at, content_index=0, part=_output_text(""))
            for piece in turn.pieces(text):
                fields = {**at, "content_index": 0, "delta": piece, "logprobs": []}
                emit("response.output_text.delta", **fields, **turn.obfuscation)
            emit("response.output_text.done", **at, content_index=0, text=text, logprobs=[])
            emit("response.content_part.done", **at, content_index=0, part=_output_text(text))
        else:
            call = next(calls)
            added = _function_call_item(call, "", "in_progress")
            emit("response.output_item.added", output_index=index, item=added)
            for piece in turn.pieces(call.arguments):
                fields = {**at, "delta": piece}
                emit("response.function_call_arguments.delta", **fields, **turn.obfuscation)
            emit("response.function_call_arguments.done", **at, arguments=call.arguments)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=_response(turn, "completed", output))
    return events


# Messages


def _anthropic_usage(turn: _Turn, output_tokens: int) -> Body:
    return {
        "input_tokens": turn.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def _message_object(turn: _Turn, content: list[Body], done: bool) -> Body:
    stop_reason = ("tool_use" if turn.calls else "end_turn") if done else None
    return {
        "id": turn.id,
        "type": "message",
        "role": "assistant",
        "model": turn.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": _anthropic_usage(turn, turn.output_tokens if done else 1),
    }


def _check_inputs(turn: _Turn, raw_allowed: bool) -> None:
    """Refuse arguments that are not a JSON object unless they may be streamed as raw text."""
    for call in turn.calls:
        if call.input is None and not raw_allowed:
            raise _TurnFailed(
                f"the {call.name} call's arguments {call.arguments[:60]!r} are not a JSON object, "
                "and the Messages API sends tool_use.input only as an object (only fine-grained "
                "tool streaming, asked with the anthropic-beta header "
                "fine-grained-tool-streaming-2025-05-14 or a tool's eager_input_streaming, streams "
                "input that may not parse)"
            )


def _anthropic_message(turn: _Turn) -> Body:
    _check_inputs(turn, raw_allowed=False)
    content: list[Body] = [{"type": "text", "text": turn.reply.text}] if turn.reply.text else []
    content += [
        {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.input}
        for call in turn.calls
    ]
    return _message_object(turn, content, done=True)


def _anthropic_events(turn: _Turn, fine_grained: bool) -> list[Body]:
    """The Messages stream of a reply (``ping`` after the first block starts, as the API does)."""
    _check_inputs(turn, raw_allowed=fine_grained)
    events: list[Body] = [{"type": "message_start", "message": _message_object(turn, [], False)}]
    blocks: list[tuple[Body, list[Body]]] = []
    if turn.reply.text:
        deltas = [{"type": "text_delta", "text": piece} for piece in turn.pieces(turn.reply.text)]
        blocks.append(({"type": "text", "text": ""}, deltas))
    for call in turn.calls:
        text = call.arguments if call.input is None else json.dumps(call.input, ensure_ascii=False)
        pieces = ["", *turn.pieces(text)]
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in pieces]
        start = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}}
        blocks.append((start, deltas))
    for index, (start, deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        if index == 0:
            events.append({"type": "ping"})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    if not blocks:
        events.append({"type": "ping"})
    usage = _anthropic_usage(turn, turn.output_tokens)
    del usage["cache_creation"], usage["service_tier"]
    stop_reason = "tool_use" if turn.calls else "end_turn"
    delta = {"stop_reason": stop_reason, "stop_sequence": None}
    events.append({"type": "message_delta", "delta": delta, "usage": usage})
    events.append({"type": "message_stop"})
    return events


def _fine_grained(headers: Mapping[str, str], body: Body) -> bool:
    if "fine-grained-tool-streaming" in headers.get("anthropic-beta", ""):
        return True
    return any(tool.get("eager_input_streaming") is True for tool in body.get("tools") or [])


# -- the server -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelRequest:
    """A request the server received: its path, its decoded JSON body, and when it arrived
    (``time.monotonic()``), so a test can tell how soon a client came back, e.g. after a tool
    call it waited on was answered."""

    path: str
    body: Body
    at: float


class ScriptError(AssertionError):
    """The scripted model could not answer a request (see :attr:`ModelServer.failures`)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _sse_frames(events: Iterable[Body]) -> list[str]:
    """Server-Sent Events named by their ``type``, as the Responses and Messages APIs send them."""
    return [f"event: {event['type']}\ndata: {_dumps(event)}\n\n" for event in events]


def _openai_error(violation: Violation, request_id: str) -> Body:
    error = {
        "message": violation.message,
        "type": violation.error_type,
        "param": violation.param,
        "code": violation.code,
    }
    return {"error": error}


def _anthropic_error(violation: Violation, request_id: str) -> Body:
    error = {"type": violation.error_type, "message": violation.message}
    return {"type": "error", "error": error, "request_id": request_id}


Rendered = Body | list[str]
"""A reply as the API sends it: a JSON body, or the Server-Sent Events frames of a stream."""


def _render_chat(server: ModelServer, headers: Mapping[str, str], turn: _Turn) -> Rendered:
    if turn.body.get("stream") is not True:
        return _chat_completion(turn)
    return [*(f"data: {_dumps(chunk)}\n\n" for chunk in _chat_chunks(turn)), "data: [DONE]\n\n"]


def _render_responses(server: ModelServer, headers: Mapping[str, str], turn: _Turn) -> Rendered:
    output = _response_output(turn)
    if turn.body.get("store") is not False:
        server._store(turn, output)
    if turn.body.get("stream") is not True:
        return _response(turn, "completed", output)
    return _sse_frames(_response_events(turn, output))


def _render_messages(server: ModelServer, headers: Mapping[str, str], turn: _Turn) -> Rendered:
    if turn.body.get("stream") is not True:
        return _anthropic_message(turn)
    return _sse_frames(_anthropic_events(turn, _fine_grained(headers, turn.body)))


@dataclass(frozen=True)
class _Api:
    """What differs between the endpoints: their rules, ids, errors and rendering."""

    check: Callable[[ModelServer, Mapping[str, str], Body], Violation | None]
    render: Callable[[ModelServer, Mapping[str, str], _Turn], Rendered]
    prefixes: tuple[str, str]  # of the reply's id and of the tool call ids
    error_body: Callable[[Violation, str], Body]
    server_error: str  # the error type of a 500
    request_id_header: str


_APIS = {
    "/v1/chat/completions": _Api(
        lambda server, headers, body: chat_completions_violation(headers, body),
        _render_chat,
        ("chatcmpl", "call"),
        _openai_error,
        "server_error",
        "x-request-id",
    ),
    "/v1/responses": _Api(
        lambda server, headers, body: responses_violation(headers, body, server._stored),
        _render_responses,
        ("resp", "call"),
        _openai_error,
        "server_error",
        "x-request-id",
    ),
    "/v1/messages": _Api(
        lambda server, headers, body: messages_violation(headers, body),
        _render_messages,
        ("msg", "toolu"),
        _anthropic_error,
        "api_error",
        "request-id",
    ),
}


class ModelServer:
    """The scripted model on ``127.0.0.1`` (a free port), in the providers' wire formats.

    Use ``async with ModelServer(script) as server`` in async tests whose clients are async, and
    ``with ModelServer.running_in_thread(script) as server`` where a client blocks. Point OpenAI
    clients at :attr:`openai_base_url` and Anthropic clients at :attr:`anthropic_base_url`.
    ``piece_size`` is how many characters each streamed piece of text or arguments holds.
    """

    def __init__(self, script: Iterable[Turn], *, piece_size: int = 8) -> None:
        self._turns: deque[Turn] = deque(script)
        self._turn_count = len(self._turns)
        self.piece_size = piece_size
        self.requests: list[ModelRequest] = []
        """Every request received, in order, refused ones included."""
        self.failures: list[str] = []
        """Why each 500 was answered; leaving the server raises :class:`ScriptError` if any."""
        self._causes: list[BaseException] = []
        self._stored: dict[str, list[Body]] = {}
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The root: the anthropic client appends ``/v1/messages`` itself."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def remaining(self) -> int:
        """How many scripted turns no request has used yet."""
        return len(self._turns)

    # -- lifecycle

    async def start(self) -> None:
        app = web.Application()
        for path in _APIS:
            app.router.add_post(path, self._handle)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ModelServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
        self._report(exc)

    @classmethod
    @contextlib.contextmanager
    def running_in_thread(
        cls, script: Iterable[Turn], *, piece_size: int = 8
    ) -> Iterator[ModelServer]:
        """The server on an event loop of its own in a daemon thread, for blocking clients (a
        sync client called from an async test would otherwise block the loop serving it)."""
        server = cls(script, piece_size=piece_size)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="model-server", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=10)
            try:
                yield server
            except BaseException as exc:
                server._report(exc)
                raise
            finally:
                asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()
        server._report(None)

    def _report(self, exc: BaseException | None) -> None:
        """Fail the test for every 500 answered: as a note on the exception already leaving the
        block, or as a :class:`ScriptError` (caused by the first turn that raised)."""
        if not self.failures:
            return
        summary = "the scripted model failed:\n" + "\n".join(f"- {f}" for f in self.failures)
        if exc is not None:
            exc.add_note(summary)
            return
        raise ScriptError(summary) from (self._causes[0] if self._causes else None)

    # -- requests

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}scripted"

    def _store(self, turn: _Turn, output: list[Body]) -> None:
        """Keep a response's conversation for a later ``previous_response_id``."""
        earlier = self._stored.get(turn.body.get("previous_response_id") or "", [])
        self._stored[turn.id] = [*earlier, *_input_items(turn.body), *output]

    def _next_reply(self, body: Body) -> Reply:
        if not self._turns:
            raise _TurnFailed(f"no turn left: all {self._turn_count} scripted turns were used")
        turn = self._turns.popleft()
        if isinstance(turn, Reply):
            reply = turn
        else:
            try:
                reply = turn(copy.deepcopy(body))
            except Exception as error:
                self._causes.append(error)
                raise _TurnFailed(f"the scripted turn raised {error!r}") from error
            if not isinstance(reply, Reply):
                raise _TurnFailed(f"the scripted turn returned {reply!r}, not a Reply")
        declared = _declared_tools(body)
        undeclared = sorted({call.name for call in reply.tool_calls} - declared)
        if undeclared:
            raise _TurnFailed(
                f"the reply calls {undeclared}, which the request does not declare "
                f"(its tools: {sorted(declared)}; a model calls only the tools it is given)"
            )
        return reply

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        api = _APIS[request.path]
        request_id = self._new_id("req")
        headers = {api.request_id_header: request_id}

        def refuse(violation: Violation, **extra: str) -> web.Response:
            payload = _dumps(api.error_body(violation, request_id))
            return web.json_response(
                text=payload, status=violation.status, headers={**headers, **extra}
            )

        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return refuse(Violation("The request body is not a JSON object."))
        self.requests.append(ModelRequest(request.path, body, time.monotonic()))
        number = len(self.requests)
        violation = api.check(self, request.headers, body)
        if violation is not None:
            return refuse(violation)
        try:
            turn = _Turn(self._next_reply(body), body, self._new_id, api.prefixes, self.piece_size)
            rendered = api.render(self, request.headers, turn)
        except _TurnFailed as failure:
            message = f"request {number} (POST {request.path}): {failure}"
            self.failures.append(message)
            failed = Violation(message, status=500, error_type=api.server_error)
            return refuse(failed, **{"x-should-retry": "false"})
        if isinstance(rendered, dict):
            return web.json_response(text=_dumps(rendered), headers=headers)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                **headers,
            }
        )
        await response.prepare(request)
        for frame in rendered:
            await response.write(frame.encode())
        await response.write_eof()
        return response


# -- a fence for clients in other processes -----------------------------------------------------


class RefusingProxy:
    """An HTTP proxy on ``127.0.0.1`` that refuses every request and records where it was going.

    The suite's loopback guard (``tests/conftest.py``) patches this process's sockets only; a
    client running as another process (the Claude Code CLI) is outside it. Give that process
    :meth:`env`: every proxy variable points here and ``NO_PROXY`` exempts loopback only, so it
    reaches the model server directly, and whatever else it tries to reach -- a host it was not
    told about, telemetry, an update check -- arrives here instead of the network, is answered
    ``403`` (a ``CONNECT`` tunnel is never opened) and is kept in :attr:`destinations`, for the
    test to fail naming it.

    Use ``async with RefusingProxy() as proxy`` on the loop the test runs on.
    """

    def __init__(self) -> None:
        self.destinations: list[str] = []
        """What each refused request asked for: ``CONNECT host:443`` or ``GET http://host/path``."""
        self._server: asyncio.Server | None = None
        self._port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def env(self) -> dict[str, str]:
        """The proxy variables (both spellings: clients differ in which they read) for a
        subprocess's environment."""
        proxies = {name: self.url for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")}
        proxies["NO_PROXY"] = "127.0.0.1,localhost"
        return {**proxies, **{name.lower(): value for name, value in proxies.items()}}

    async def __aenter__(self) -> RefusingProxy:
        self._server = await asyncio.start_server(self._refuse, "127.0.0.1", 0)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                request_line = (await reader.readline()).decode("latin-1").strip()
                while (await reader.readline()).strip():  # the headers, up to the blank line
                    pass
            method, _, rest = request_line.partition(" ")
            target = rest.rpartition(" ")[0] or rest  # without the HTTP version
            self.destinations.append(f"{method} {target}" if method else "(an empty request)")
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
        except (TimeoutError, ConnectionError):
            self.destinations.append("(a connection that sent no complete request)")
        finally:
            writer.close()
