"""What a click's cheaper steps give is what the libraries' own steps gave: a text's cost as its
JSON encoding counts it, and an ack on the wire as Bolt's aiohttp adapter sends it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.response import BoltResponse

from platforms.slack.http import http_response
from platforms.slack.text import cost
from tests.platforms.slack.test_slack_markup import NASTY


def outcome(count: Callable[[str], int], text: str) -> int | type[Exception]:
    try:
        return count(text)
    except UnicodeEncodeError as exc:  # a lone surrogate: nothing shown carries one
        return type(exc)


def json_cost(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-16-le")) // 2 - 2


@settings(max_examples=500)
@given(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(NASTY + "é·—✅"))))
def test_a_texts_cost_is_what_its_json_encoding_counts(text: str) -> None:
    assert outcome(cost, text) == outcome(json_cost, text)


ANSWERS = {
    "ack": lambda: BoltResponse(status=200, body=""),
    "modal errors": lambda: BoltResponse(
        status=200, body={"response_action": "errors", "errors": {"q0.pick": "Choose é"}}
    ),
    "unhandled": lambda: BoltResponse(status=404, body={"error": "unhandled request"}),
    "failed": lambda: BoltResponse(status=500, body=""),
    "a header of its own": lambda: BoltResponse(
        status=200, body="ok", headers={"X-Slack-No-Retry": "1"}
    ),
    "a cookie": lambda: BoltResponse(
        status=302, body="", headers={"Set-Cookie": ["state=abc; Path=/"], "Location": "/x"}
    ),
    "another type": lambda: BoltResponse(
        status=200, body="<p>hi</p>", headers={"Content-Type": "text/html; charset=utf-8"}
    ),
}


async def raw_answer(answer: Callable[[], Any]) -> list[bytes]:
    """What a loopback aiohttp server sends for the response ``answer`` builds (but its date)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        return await answer()

    app = web.Application()
    app.router.add_get("/", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        raw = await reader.read()
        writer.close()
    finally:
        await runner.cleanup()
    return [line for line in raw.split(b"\r\n") if not line.startswith(b"Date:")]


@pytest.mark.parametrize("name", ANSWERS)
async def test_an_answer_goes_out_as_bolts_adapter_sends_it(name: str) -> None:
    answer = ANSWERS[name]
    ours = await raw_answer(lambda: http_response(answer()))
    bolts = await raw_answer(lambda: to_aiohttp_response(answer()))
    assert ours == bolts
