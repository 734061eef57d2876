"""Shared pieces of the MCP tests: a broken question set, result readers, an HTTP server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types

from bridge.mcp_server import bind, create_server, serve_http

BAD_QUESTIONS: list[dict[str, Any]] = [
    {"question": "Q?", "header": "A header far too long", "options": [{"label": "only"}]}
]


def text_of(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


def answers_of(result: types.CallToolResult) -> list[dict[str, Any]]:
    assert not result.is_error, text_of(result)
    payload = json.loads(text_of(result))
    answers: list[dict[str, Any]] = payload["answers"]
    return answers


def assert_rejected(result: types.CallToolResult, *fragments: str) -> None:
    assert result.is_error
    text = text_of(result)
    assert text.startswith("The ask_user call was rejected"), text
    for fragment in fragments:
        assert fragment in text, text


@asynccontextmanager
async def http_server(handler: Callable[..., Any] | None, **kwargs: Any) -> AsyncIterator[str]:
    """``create_server(handler, **kwargs)`` over streamable HTTP on a free loopback port; yields
    the endpoint URL."""
    sock = bind("127.0.0.1", 0)
    task = asyncio.create_task(serve_http(create_server(handler, **kwargs), sock))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        sock.close()
