"""The MCP server over streamable HTTP on a loopback port, through the official ``mcp`` client."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bridge import AskUserDeferred
from bridge.mcp_server import bind, create_server, endpoint, serve_http
from bridge.tool import PARAMETERS
from tests.support.mcp_fixtures import (
    BAD_QUESTIONS,
    answers_of,
    assert_rejected,
    http_server,
    text_of,
)
from tests.support.procs import cli_env
from tests.support.samples import SHORT_FORMAT_AND_SECTIONS as QUESTIONS


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


# -- who may call: bearer token off loopback, DNS-rebinding protection on it ---------------------

TOKEN = "k" * 12 + "-0123456789"


@asynccontextmanager
async def guarded_server(host: str, token: str | None) -> AsyncIterator[str]:
    """The server bound to ``host`` with ``token``; yields its endpoint URL (on 127.0.0.1 for
    ``0.0.0.0``: the tests still connect over loopback)."""
    sock = bind(host, 0)
    task = asyncio.create_task(serve_http(create_server(None), sock, token=token))
    try:
        yield endpoint(sock).replace("0.0.0.0", "127.0.0.1")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        sock.close()


async def list_tools_with(url: str, headers: dict[str, str]) -> tuple[bool, list[int]]:
    """Whether the official client could list the tools sending ``headers``, and the HTTP
    statuses it got."""
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async with httpx2.AsyncClient(headers=headers, event_hooks={"response": [record]}) as http:
        try:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                (tool,) = (await client.list_tools()).tools
                assert tool.name == "ask_user"
        except Exception:
            return False, statuses
    return True, statuses


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
async def test_with_a_token_only_its_holders_get_in(host: str) -> None:
    async with guarded_server(host, TOKEN) as url:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            ok, statuses = await list_tools_with(url, headers)
            assert not ok and statuses and set(statuses) == {401}, headers
        ok, statuses = await list_tools_with(url, {"Authorization": f"Bearer {TOKEN}"})
        assert ok and 401 not in statuses


async def test_off_loopback_a_server_without_a_token_refuses_to_start() -> None:
    sock = bind("0.0.0.0", 0)
    try:
        with pytest.raises(ValueError, match="ASK_BRIDGE_MCP_TOKEN is not set"):
            await serve_http(create_server(None), sock)
    finally:
        sock.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
@pytest.mark.parametrize(
    ("headers", "status"),
    [({"Origin": "http://evil.example"}, 403), ({"Host": "evil.example:80"}, 421)],
)
async def test_on_loopback_foreign_pages_and_names_are_refused(
    host: str, headers: dict[str, str], status: int
) -> None:
    async with guarded_server(host, None) as url:
        ok, statuses = await list_tools_with(url, headers)
        assert not ok and status in statuses
        ok, _ = await list_tools_with(url, {"Origin": url.removesuffix("/mcp")})
        assert ok


# -- metrics beside the MCP endpoint: where the waiting calls resume -----------------------------


async def test_metrics_are_served_beside_the_endpoint() -> None:
    async with guarded_server("127.0.0.1", None) as url:
        metrics_url = url.replace("/mcp", "/metrics")
        async with httpx2.AsyncClient() as http:
            response = await http.get(metrics_url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert "# TYPE ask_bridge_answer_to_resume_seconds histogram" in response.text


async def test_with_a_token_metrics_need_it_too() -> None:
    async with guarded_server("0.0.0.0", TOKEN) as url:
        metrics_url = url.replace("/mcp", "/metrics")
        async with httpx2.AsyncClient() as http:
            refused = [
                (await http.get(metrics_url, headers=headers)).status_code
                for headers in ({}, {"Authorization": "Bearer wrong"})
            ]
            allowed = await http.get(metrics_url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert refused == [401, 401]
    assert allowed.status_code == 200
    assert "# TYPE ask_bridge_asks_created_total counter" in allowed.text


# -- the command: SIGTERM ------------------------------------------------------------------------


async def test_the_command_stops_on_sigterm_cleanly() -> None:
    """``mcp --http`` with a client connected, then SIGTERM: exit 0 within 10 s, and stderr has
    nothing but its serving line and log lines in its format (uvicorn's too) -- no traceback.
    uvicorn was cut short, and logged the cancelled lifespan task with a traceback of its own."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge.cli", "mcp", "--http", "127.0.0.1:0",
        env=cli_env(), stdin=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        found = re.fullmatch(r"ask-bridge mcp: serving (http://127\.0\.0\.1:\d+/mcp)\n", line)
        assert found, line
        async with Client(found.group(1)) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["ask_user"]
            stopping = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            rest = (await asyncio.wait_for(proc.stderr.read(), 10)).decode()
            await asyncio.wait_for(proc.wait(), 10)
        assert time.monotonic() - stopping < 10
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, rest
    assert "Traceback" not in rest, rest
    for logged in rest.splitlines():
        assert json.loads(logged)["level"] in ("INFO", "WARNING"), logged
