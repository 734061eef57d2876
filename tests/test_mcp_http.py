"""The MCP server over streamable HTTP on a loopback port, through the official ``mcp`` client."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import mcp_types as types
from mcp import Client
from mcp_fixtures import BAD_QUESTIONS, answers_of, assert_rejected, http_server, text_of
from samples import SHORT_FORMAT_AND_SECTIONS as QUESTIONS

from bridge import AskUserDeferred
from bridge.tool import PARAMETERS


async def test_list_reject_answer_over_http() -> None:
    progressed = asyncio.Event()
    ticks: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        ticks.append(progress)
        progressed.set()

    async def handler(questions: Any, context: dict[str, Any]) -> Any:
        await progressed.wait()
        return {"Which format?": "Summary", "Which sections?": "Appendix"}

    async with http_server(handler, progress_interval=0.02) as url, Client(url) as client:
        (tool,) = (await client.list_tools()).tools
        assert tool.name == "ask_user"
        assert tool.input_schema == dict(PARAMETERS)

        assert_rejected(await client.call_tool("ask_user", {"questions": BAD_QUESTIONS}))

        result = await client.call_tool(
            "ask_user", {"questions": QUESTIONS}, progress_callback=on_progress
        )
        assert answers_of(result) == [
            {"question": "Which format?", "selected": ["Summary"], "other_text": None},
            {"question": "Which sections?", "selected": ["Appendix"], "other_text": None},
        ]
        assert ticks and ticks[0] == 1


async def test_deferred_over_http_legacy_handshake() -> None:
    def handler(qs: Any, ctx: Any) -> AskUserDeferred:
        return AskUserDeferred(extra={"ask_id": "ask-1"})

    async with http_server(handler) as url, Client(url, mode="legacy") as client:
        result = await client.call_tool("ask_user", {"questions": QUESTIONS})
    body = json.loads(text_of(result))
    assert (body["status"], body["ask_id"]) == ("deferred", "ask-1")


async def test_elicitation_over_http() -> None:
    async def form(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"q1": "Detailed", "q2": ["Intro"]})

    async with http_server(None) as url:
        for mode in ("auto", "legacy"):
            async with Client(url, mode=mode, elicitation_callback=form) as client:
                result = await client.call_tool("ask_user", {"questions": QUESTIONS})
            assert [a["selected"] for a in answers_of(result)] == [["Detailed"], ["Intro"]]
