"""Who may call ``ask-bridge mcp --http``: the decision from the bind address, and the command."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bridge.mcp_access import check_access, is_loopback, token_from_env

ASK_BRIDGE = str(Path(sys.executable).with_name("ask-bridge"))
TOKEN = "0123456789abcdef-token"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.9.9.9", "::1", "[::1]", "localhost"])
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host)
    check_access(host, None)  # no token needed
    check_access(host, TOKEN)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "example.org", "::ffff:10.0.0.1"])
def test_other_addresses_need_a_token(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ValueError, match=r"^ASK_BRIDGE_MCP_TOKEN is not set: serving on "):
        check_access(host, None)
    check_access(host, TOKEN)


@pytest.mark.parametrize("token", ["short", "has a space in it ok?", "tökén-tökén-tökén-x"])
def test_a_token_must_be_sendable_and_not_trivially_short(token: str) -> None:
    with pytest.raises(ValueError, match="ASK_BRIDGE_MCP_TOKEN must be at least 16 printable"):
        check_access("127.0.0.1", token)


def test_token_from_env() -> None:
    assert token_from_env("127.0.0.1", {}) is None
    assert token_from_env("127.0.0.1", {"ASK_BRIDGE_MCP_TOKEN": " "}) is None  # blank is unset
    assert token_from_env("0.0.0.0", {"ASK_BRIDGE_MCP_TOKEN": f" {TOKEN}\n"}) == TOKEN
    with pytest.raises(ValueError, match="ASK_BRIDGE_MCP_TOKEN"):
        token_from_env("0.0.0.0", {"ASK_BRIDGE_MCP_TOKEN": ""})


def environment(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ASK_BRIDGE_", "REDIS_"))}
    return {**base, **extra}


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, "ASK_BRIDGE_MCP_TOKEN is not set"), ({"ASK_BRIDGE_MCP_TOKEN": "abc"}, "at least 16")],
)
def test_the_command_refuses_an_open_public_bind(env: dict[str, str], expected: str) -> None:
    done = subprocess.run(
        [ASK_BRIDGE, "mcp", "--http", "0.0.0.0:0"],
        env=environment(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1  # a configuration failure, as in every command
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("ask-bridge mcp: ") and expected in line


async def test_the_command_serves_a_public_bind_to_token_holders_only() -> None:
    proc = await asyncio.create_subprocess_exec(
        ASK_BRIDGE,
        "mcp",
        "--http",
        "0.0.0.0:0",
        env=environment(ASK_BRIDGE_MCP_TOKEN=TOKEN),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        found = re.fullmatch(r"ask-bridge mcp: serving http://0\.0\.0\.0:(\d+)/mcp\n", line)
        assert found, line
        url = f"http://127.0.0.1:{found.group(1)}/mcp"
        async with httpx2.AsyncClient() as http:
            assert (await http.post(url, json={})).status_code == 401
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["ask_user"]
    finally:
        proc.terminate()
        await proc.wait()
