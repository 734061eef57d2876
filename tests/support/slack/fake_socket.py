"""A fake Socket Mode endpoint: ``apps.connections.open`` hands out its ``ws://`` URL; it says
``hello``, pushes envelopes, and returns each ack (with any ``response_action`` payload);
``drop()`` closes the connection the way Slack does before a client must reconnect."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from aiohttp import WSMsgType, web

from tests.support.slack.slack_rules import describe, response_problems


class FakeSocketMode:
    def __init__(self) -> None:
        self.url = ""
        self.connected = asyncio.Event()
        self._ws: web.WebSocketResponse | None = None
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None

    async def start(self) -> FakeSocketMode:
        app = web.Application()
        app.router.add_get("/link", self._link)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"ws://127.0.0.1:{self._runner.addresses[0][1]}/link"
        return self

    async def stop(self) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def drop(self) -> None:
        """Close the live connection (slack_sdk then asks ``apps.connections.open`` for another)."""
        self.connected.clear()
        if self._ws is not None:
            await self._ws.close()

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._ws = ws
        hello = {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0FAKE"}}
        await ws.send_json(hello)
        self.connected.set()
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            waiter = self._acks.pop(str(data.get("envelope_id")), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(data)
        return ws

    async def send(self, payload: dict[str, Any], within: float = 30.0) -> dict[str, Any]:
        """Push an interactive envelope; returns the app's ack (must come within ``within``, and
        carry nothing Slack would refuse:
        :func:`tests.support.slack.slack_rules.response_problems`)."""
        await asyncio.wait_for(self.connected.wait(), 30)
        assert self._ws is not None
        envelope_id = f"env-{next(self._ids)}"
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = waiter
        await self._ws.send_json(
            {
                "envelope_id": envelope_id,
                "type": "interactive",
                "accepts_response_payload": True,
                "retry_attempt": 0,
                "retry_reason": "",
                "payload": payload,
            }
        )
        ack = await asyncio.wait_for(waiter, within)
        problems = response_problems(ack.get("payload"))
        assert not problems, describe(problems)  # an answer Slack would refuse fails the test
        return ack
