"""The MCP server in process, through the official ``mcp`` client.

Both protocol eras are driven: the default (2026-07-28, where elicitation rides an
``InputRequiredResult``) and ``mode="legacy"`` (the initialize handshake, where the server sends an
``elicitation/create`` request while the call waits).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from bridge import AskUserDeferred, Question, tools_interactive
from bridge.cli import build_parser
from bridge.cli.mcp import chat_route_from_env
from bridge.frameworks.providers import run_tool_call
from bridge.mcp_server import (
    DECLINED_MESSAGE,
    NO_ROUTE_MESSAGE,
    answers_from_form,
    create_server,
    elicitation_schema,
)
from bridge.models import QuestionSet
from bridge.platform import PlatformUnavailable
from bridge.tool import PARAMETERS, tool_ask_user
from tests.support.mcp_fixtures import BAD_QUESTIONS, answers_of, assert_rejected, text_of
from tests.support.samples import SHORT_FORMAT_AND_SECTIONS as QUESTIONS

MODES = ["auto", "legacy"]


def answers_of_text(content: str | dict[str, Any]) -> list[dict[str, Any]]:
    assert isinstance(content, str)
    answers: list[dict[str, Any]] = json.loads(content)["answers"]
    return answers


@pytest.mark.parametrize("mode", MODES)
async def test_lists_ask_user_with_the_core_contract(mode: str) -> None:
    async with Client(create_server(), mode=mode) as client:
        (tool,) = (await client.list_tools()).tools
    assert tool.name == "ask_user"
    assert tool.description == tool_ask_user.description
    assert tool.input_schema == dict(PARAMETERS)
    assert tool.annotations is not None
    assert tool.annotations.read_only_hint is True
    assert tool.annotations.destructive_hint is False
    assert tool.annotations.open_world_hint is False


@pytest.mark.parametrize("mode", MODES)
async def test_call_to_fix_is_an_error_result(mode: str) -> None:
    asked = False

    def handler(qs: Any, ctx: Any) -> Any:
        nonlocal asked
        asked = True
        return {}

    async with Client(create_server(handler), mode=mode) as client:
        bad = await client.call_tool("ask_user", {"questions": BAD_QUESTIONS})
        text = await client.call_tool("ask_user", {"questions": json.dumps(QUESTIONS)})
        missing = await client.call_tool("ask_user", {})
        extra = await client.call_tool("ask_user", {"questions": QUESTIONS, "extra": 1})
        empty = await client.call_tool("ask_user", None)
    assert_rejected(bad, "questions[0].header", "questions[0].options")
    assert_rejected(text, "not a string")
    # The arguments object is checked as for every other host (providers, chatlas, ...).
    assert_rejected(missing, 'the "questions" argument is missing')
    assert_rejected(extra, "unknown argument 'extra'")
    assert_rejected(empty, "the arguments are empty")
    assert text_of(extra) == run_tool_call({"questions": QUESTIONS, "extra": 1}).content
    assert not asked


async def test_answered_call_with_progress_while_waiting() -> None:
    progressed = asyncio.Event()
    notes: list[tuple[float, str | None]] = []
    contexts: list[dict[str, Any]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, message))
        if len(notes) >= 2:
            progressed.set()

    async def handler(questions: list[Question], context: dict[str, Any]) -> Any:
        contexts.append(context)
        await progressed.wait()  # a person who answers only after two progress ticks
        return {"Which format?": "Detailed", "Which sections?": ["Results", "Intro", "charts"]}

    async with Client(create_server(handler, progress_interval=0.02)) as client:
        result = await client.call_tool(
            "ask_user", {"questions": QUESTIONS}, progress_callback=on_progress
        )
    assert answers_of(result) == [
        {"question": "Which format?", "selected": ["Detailed"], "other_text": None},
        {"question": "Which sections?", "selected": ["Intro", "Results"], "other_text": "charts"},
    ]
    assert result.structured_content == json.loads(text_of(result))
    assert [p for p, _ in notes[:2]] == [1, 2]
    assert all(m and m.startswith("waiting for a person") for _, m in notes)
    assert contexts[0]["via"] == "mcp"


async def test_deferred_call_carries_the_ask_id() -> None:
    def handler(qs: Any, ctx: Any) -> AskUserDeferred:
        return AskUserDeferred(extra={"ask_id": "ask-xyz", "link": "https://chat/msg"})

    async with Client(create_server(handler)) as client:
        result = await client.call_tool("ask_user", {"questions": QUESTIONS})
    assert not result.is_error
    body = json.loads(text_of(result))
    assert body["status"] == "deferred"
    assert body["ask_id"] == "ask-xyz"
    assert "End your turn" in body["instructions"]
    assert "link" not in body
    assert result.structured_content == body


async def test_handler_failure_is_an_error_result() -> None:
    def handler(qs: Any, ctx: Any) -> Any:
        raise RuntimeError("chat is down")

    async with Client(create_server(handler)) as client:
        result = await client.call_tool("ask_user", {"questions": QUESTIONS})
    assert result.is_error
    assert text_of(result) == "could not get the person's answer: chat is down"


async def test_unknown_tool_is_an_error_result() -> None:
    async with Client(create_server(lambda qs, ctx: {})) as client:
        result = await client.call_tool("delete_everything", {})
    assert result.is_error
    assert "ask_user" in text_of(result)


# -- no chat destination: the client's own user, by elicitation ---------------------------------


class FormFiller:
    """An elicitation callback that answers with a fixed action and content, and records."""

    def __init__(self, action: str, content: dict[str, Any] | None = None) -> None:
        self.action = action
        self.content = content
        self.seen: list[types.ElicitRequestFormParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.seen.append(params)
        return types.ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_accept_maps_the_form_onto_answers(mode: str) -> None:
    form = FormFiller(
        "accept",
        {"q1": "Summary", "q1_other": "", "q2": ["Appendix", "Intro"], "q2_other": "a glossary"},
    )
    async with Client(create_server(), mode=mode, elicitation_callback=form) as client:
        result = await client.call_tool("ask_user", {"questions": QUESTIONS})
    assert answers_of(result) == [
        {"question": "Which format?", "selected": ["Summary"], "other_text": None},
        {
            "question": "Which sections?",
            "selected": ["Intro", "Appendix"],
            "other_text": "a glossary",
        },
    ]
    (params,) = form.seen  # one form for the whole question set
    schema = params.requested_schema
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"q1", "q1_other", "q2", "q2_other"}
    assert [c["const"] for c in schema["properties"]["q1"]["oneOf"]] == ["Summary", "Detailed"]
    assert schema["properties"]["q2"]["type"] == "array"
    assert "required" not in schema or not schema["required"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_elicitation_decline_or_cancel_is_an_error_result(mode: str, action: str) -> None:
    form = FormFiller(action)
    async with Client(create_server(), mode=mode, elicitation_callback=form) as client:
        result = await client.call_tool("ask_user", {"questions": QUESTIONS})
    assert result.is_error
    assert text_of(result) == f"could not get the person's answer: {DECLINED_MESSAGE}"


@pytest.mark.parametrize("mode", MODES)
async def test_elicitation_rejects_before_asking(mode: str) -> None:
    form = FormFiller("accept", {})
    async with Client(create_server(), mode=mode, elicitation_callback=form) as client:
        result = await client.call_tool("ask_user", {"questions": BAD_QUESTIONS})
    assert_rejected(result, "questions[0].header")
    assert form.seen == []


@pytest.mark.parametrize("mode", MODES)
async def test_no_route_and_no_elicitation_is_a_clear_error(mode: str) -> None:
    async with Client(create_server(), mode=mode) as client:
        result = await client.call_tool("ask_user", {"questions": QUESTIONS})
    assert result.is_error
    assert text_of(result) == NO_ROUTE_MESSAGE


def test_form_for_protocols_without_multi_select_arrays() -> None:
    qs = QuestionSet.model_validate({"questions": QUESTIONS})
    schema = elicitation_schema(qs.questions, "2025-06-18")
    assert schema["properties"]["q1"]["enum"] == ["Summary", "Detailed"]
    assert schema["properties"]["q2"]["type"] == "string"  # labels typed, comma-separated
    answers = answers_from_form(
        qs.questions, {"q1": "Detailed", "q2": "Results, Intro, tables", "q2_other": "soon"}
    )
    assert [(a.selected, a.other_text) for a in answers] == [
        (("Detailed",), None),
        (("Intro", "Results"), "tables, soon"),
    ]


def test_single_select_choice_and_typed_text_are_both_kept_as_in_the_core() -> None:
    qs = QuestionSet.model_validate({"questions": QUESTIONS})
    (first, second) = answers_from_form(qs.questions, {"q1": "Summary", "q1_other": "short"})
    assert (first.selected, first.other_text) == (("Summary",), "short")
    assert (second.selected, second.other_text) == ((), None)
    # The same answer given straight to the core tool normalises the same way.
    (tool,) = tools_interactive(lambda q, ctx: {q[0].question: ["Summary", "short"]})
    assert answers_of_text(tool(QUESTIONS))[0] == {
        "question": "Which format?",
        "selected": ["Summary"],
        "other_text": "short",
    }
    (typed_only, _) = answers_from_form(qs.questions, {"q1_other": "Neither"})
    assert (typed_only.selected, typed_only.other_text) == ((), "Neither")


def test_typed_text_in_a_form_is_judged_as_in_a_chat() -> None:
    qs = QuestionSet.model_validate({"questions": QUESTIONS})
    content = {"q1_other": "\u200b\u2060", "q2": ["Intro"], "q2_other": "soon\u200b\u2028please"}
    (first, second) = answers_from_form(qs.questions, content)
    assert (first.selected, first.other_text) == ((), None)
    assert (second.selected, second.other_text) == (("Intro",), "soon\nplease")


# -- configuration from the environment ---------------------------------------------------------


def test_no_platform_means_no_chat_route() -> None:
    assert chat_route_from_env(environ={}) is None


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"ASK_BRIDGE_PLATFORM": "slack"}, "needs ASK_BRIDGE_CHANNEL"),
        ({"ASK_BRIDGE_PLATFORM": "console", "ASK_BRIDGE_CHANNEL": "C1"}, "terminal belongs"),
        ({"ASK_BRIDGE_PLATFORM": "carrier-pigeon", "ASK_BRIDGE_CHANNEL": "C1"}, "unknown platform"),
    ],
)
def test_bad_chat_configuration_names_the_problem(environ: dict[str, str], expected: str) -> None:
    with pytest.raises(PlatformUnavailable, match=expected):
        chat_route_from_env(environ=environ)


def test_client_config_snippets_run_the_real_command() -> None:
    text = (Path(__file__).resolve().parents[2] / "examples" / "mcp_config.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 4
    for block in blocks:
        for entry in json.loads(block)["mcpServers"].values():
            if "url" in entry:
                assert entry["url"].endswith("/mcp")
                continue
            assert entry["command"] == "ask-bridge"
            args = build_parser().parse_args(entry["args"])
            assert args.command == "mcp"


async def test_modern_retry_with_a_non_form_reply_is_an_error_result() -> None:
    form = FormFiller("accept", {})
    async with Client(create_server(), elicitation_callback=form) as client:
        result = await client.call_tool(
            "ask_user",
            {"questions": QUESTIONS},
            input_responses={"ask_user": types.ListRootsResult(roots=[])},
        )
    assert result.is_error
    assert "not a form result" in text_of(result)
    assert form.seen == []
