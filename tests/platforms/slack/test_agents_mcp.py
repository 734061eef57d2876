"""The MCP server as its users run it: the ``mcp`` SDK's client drives ``ask-bridge mcp`` (stdio,
or ``--http`` on 127.0.0.1) configured for Slack over the rig's Redis, so its questions go to the
fake Slack and the rig's ``serve`` takes the teammate's signed clicks.

With a shared store the server does not receive clicks itself, so a call whose ``--wait`` runs out
returns the deferred result with the ask id (docs/frameworks.md, MCP server); the host then gets the
outcome from the answers feed or ``ask-bridge wait ASK_ID``. Every result is checked as the client
receives it: the content text, ``structuredContent`` and ``isError``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from bridge.deferred import DEFAULT_INSTRUCTIONS
from bridge.feed import render_delivery
from bridge.store.base import Delivery
from bridge.tool import PARAMETERS, tool_ask_user
from tests.support.procs import cli_env
from tests.support.redis_server import RedisServer, free_port
from tests.support.slack.agent_rig import CHANNEL, Rig
from tests.support.slack.fake_slack import BOT_TOKEN

ASK_BRIDGE = str(Path(sys.executable).with_name("ask-bridge"))


@pytest.fixture(scope="module")
def rig(redis_srv: RedisServer) -> Iterator[Rig]:
    r = Rig(redis_srv.url)
    yield r
    r.close()


def env(rig: Rig) -> dict[str, str]:
    """``ask-bridge``'s settings: Slack to the rig's fake, the rig's Redis and key prefix."""
    return cli_env(
        ASK_BRIDGE_PLATFORM="slack",
        ASK_BRIDGE_CHANNEL=CHANNEL,
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_API_URL=rig.fake.url,
        REDIS_URL=rig.redis_url,
        ASK_BRIDGE_KEY_PREFIX=rig.prefix,
    )


@asynccontextmanager
async def mcp_client(rig: Rig, *args: str, http: bool = False) -> AsyncIterator[Client]:
    """A client session with ``ask-bridge mcp ARGS``: spawned over stdio by the client, or
    started here with ``--http`` on a free loopback port."""
    if not http:
        server = StdioServerParameters(command=ASK_BRIDGE, args=["mcp", *args], env=env(rig))
        async with Client(server) as client:
            yield client
        return
    address = f"127.0.0.1:{free_port()}"
    proc = await asyncio.create_subprocess_exec(
        ASK_BRIDGE, "mcp", "--http", address, *args,
        env=env(rig), stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        async with asyncio.timeout(60):
            line = (await proc.stderr.readline()).decode()
        assert line == f"ask-bridge mcp: serving http://{address}/mcp\n", line
        async with Client(f"http://{address}/mcp") as client:
            yield client
    finally:
        if proc.returncode is None:
            proc.terminate()  # SIGTERM: a clean stop
        await proc.wait()


def questions(marker: str) -> list[dict[str, Any]]:
    return [
        {
            "question": f"Which database for {marker}?",
            "header": "Database",
            "options": [
                {"label": "Postgres", "description": "Relational"},
                {"label": "SQLite", "description": "One file"},
            ],
        }
    ]


def as_returned(marker: str) -> list[dict[str, Any]]:
    """The question set as every result states it: ``multiSelect`` filled in."""
    return [{**q, "multiSelect": False} for q in questions(marker)]


def answered(marker: str, label: str) -> dict[str, Any]:
    return {
        "questions": as_returned(marker),
        "answers": [
            {"question": f"Which database for {marker}?", "selected": [label], "other_text": None}
        ],
    }


def received(result: types.CallToolResult) -> tuple[str, Any, bool]:
    """What the client got: the one text block, ``structuredContent`` and ``isError``."""
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return block.text, result.structured_content, result.is_error


def text(body: dict[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False)


async def ask_bridge(rig: Rig, *args: str) -> tuple[int, str, str]:
    """Run ``ask-bridge ARGS`` against the rig's store: exit status, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        ASK_BRIDGE, *args, env=env(rig), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def delivered(rig: Rig, ask_id: str) -> Delivery:
    """The answers feed's delivery of ``ask_id`` (acknowledged): the module's deferred asks
    reach the feed one at a time, each read before the next."""
    store = rig.store()
    feed = store.feed("mcp-host")
    try:
        delivery = await asyncio.wait_for(anext(feed), 30)
    finally:
        await feed.aclose()  # type: ignore[attr-defined]
    await store.ack(delivery)
    assert delivery.record.id == ask_id
    return delivery


async def test_lists_the_bridge_tool_and_is_answered_by_a_click(rig: Rig) -> None:
    """The definition a client lists is ask_user's own -- name, description, schema (1-4
    questions, 2-4 options, a header of at most 12 characters) and annotations. Called, the
    question shows up in Slack, the teammate clicks "SQLite" through serve, and the waiting call
    returns the answers: the same JSON as text and as structuredContent."""
    marker = uuid.uuid4().hex[:8]
    async with mcp_client(rig, "--wait", "60") as client:
        [tool] = (await client.list_tools()).tools
        clicked = rig.answer(marker, 1)
        result = await client.call_tool("ask_user", {"questions": questions(marker)})
    clicked.result(10)

    assert (tool.name, tool.description) == ("ask_user", tool_ask_user.description)
    assert tool.input_schema == dict(PARAMETERS)
    listed = tool.input_schema["properties"]["questions"]
    options = listed["items"]["properties"]["options"]
    assert (listed["minItems"], listed["maxItems"]) == (1, 4)
    assert (options["minItems"], options["maxItems"]) == (2, 4)
    assert listed["items"]["properties"]["header"]["maxLength"] == 12
    assert tool.annotations is not None
    hints = tool.annotations.model_dump(by_alias=True, exclude_none=True)
    assert hints == tool_ask_user.annotations.as_dict()

    expected = answered(marker, "SQLite")
    assert received(result) == (text(expected), expected, False)


async def test_nobody_answered_within_the_wait_is_deferred(rig: Rig) -> None:
    """Nobody clicks within ``--wait``: with a shared store the ask stays open and the call
    returns the deferred result, with the ask id for the host. Nobody ever answers, so the host
    cancels it, and the answers feed delivers the cancellation in the feed's words. Over
    streamable HTTP."""
    marker = uuid.uuid4().hex[:8]
    async with mcp_client(rig, "--wait", "1", http=True) as client:
        result = await client.call_tool("ask_user", {"questions": questions(marker)})
    ask_id = rig.posted(marker).ask_id
    deferred = {
        "questions": as_returned(marker),
        "status": "deferred",
        "instructions": DEFAULT_INSTRUCTIONS,
        "ask_id": ask_id,
    }
    assert received(result) == (text(deferred), deferred, False)

    assert (await ask_bridge(rig, "cancel", ask_id))[0] == 0
    delivery = await delivered(rig, ask_id)
    assert json.loads(render_delivery(delivery)) == {
        "questions": as_returned(marker),
        "status": "cancelled",
        "error": "the questions were cancelled before anyone answered",
    }
    assert "Cancelled" in rig.shown_answered(marker)


async def test_deferred_then_answered_reaches_the_host(rig: Rig) -> None:
    """The call defers after ``--wait``; the teammate answers later in Slack; the host gets the
    answers -- the JSON a waiting call returns -- from ``ask-bridge wait ASK_ID`` and from the
    answers feed."""
    marker = uuid.uuid4().hex[:8]
    async with mcp_client(rig, "--wait", "1") as client:
        result = await client.call_tool("ask_user", {"questions": questions(marker)})
    _, structured, is_error = received(result)
    assert (structured["status"], is_error) == ("deferred", False)
    ask_id = structured["ask_id"]
    assert ask_id == rig.posted(marker).ask_id

    rig.answer(marker, 0).result(30)
    expected = text(answered(marker, "Postgres"))
    assert await ask_bridge(rig, "wait", ask_id, "--wait", "60") == (0, expected + "\n", "")
    assert render_delivery(await delivered(rig, ask_id)) == expected
