"""The real ``ask-bridge mcp`` command over stdio, spawned by the official ``mcp`` client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from bridge.mcp_server import NO_ROUTE_MESSAGE
from bridge.tool import PARAMETERS
from tests.support.mcp_fixtures import BAD_QUESTIONS, answers_of, assert_rejected, text_of
from tests.support.samples import SHORT_FORMAT_AND_SECTIONS as QUESTIONS

ASK_BRIDGE = str(Path(sys.executable).with_name("ask-bridge"))


def command(*args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ASK_BRIDGE_", "REDIS_"))}
    return StdioServerParameters(
        command=ASK_BRIDGE, args=["mcp", *args], env={**base, **(env or {})}
    )


async def form(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(
        action="accept", content={"q1": "Summary", "q2": ["Results"], "q2_other": "FAQ"}
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_list_reject_and_elicit(mode: str) -> None:
    async with Client(command(), mode=mode, elicitation_callback=form) as client:
        (tool,) = (await client.list_tools()).tools
        assert tool.name == "ask_user"
        assert tool.input_schema == dict(PARAMETERS)
        assert tool.annotations is not None and tool.annotations.read_only_hint is True

        assert_rejected(
            await client.call_tool("ask_user", {"questions": BAD_QUESTIONS}),
            "questions[0].header",
        )

        result = await client.call_tool("ask_user", {"questions": QUESTIONS})
        assert answers_of(result) == [
            {"question": "Which format?", "selected": ["Summary"], "other_text": None},
            {"question": "Which sections?", "selected": ["Results"], "other_text": "FAQ"},
        ]


async def test_stdio_without_route_or_elicitation_says_so() -> None:
    async with Client(command()) as client:
        result = await client.call_tool("ask_user", {"questions": QUESTIONS})
    assert result.is_error
    assert text_of(result) == NO_ROUTE_MESSAGE


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ((), {"ASK_BRIDGE_PLATFORM": "slack"}, "needs ASK_BRIDGE_CHANNEL"),
        ((), {"ASK_BRIDGE_PLATFORM": "nope", "ASK_BRIDGE_CHANNEL": "C1"}, "unknown platform"),
        (("--http", "localhost"), {}, "--http takes HOST:PORT"),
        (("--wait", "-1"), {}, "--wait must be"),
    ],
)
def test_configuration_errors_go_to_stderr(
    args: tuple[str, ...], env: dict[str, str], expected: str
) -> None:
    params = command(*args, env=env)
    done = subprocess.run(
        [params.command, *params.args],
        env=params.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1  # a configuration failure, as in every command
    assert done.stdout == ""  # stdout belongs to the protocol
    assert expected in done.stderr
