"""HTTP mode: the Bolt app behind ``POST /slack/events`` on an aiohttp server.

Bolt verifies each request's signature (``SLACK_SIGNING_SECRET``) and answers 401 to forged or
stale ones before any listener runs. The server is our own rather than Bolt's
``AsyncSlackAppServer``, which blocks in aiohttp's ``run_app`` (no task to cancel, no stop) and
cannot report the port it bound, so ``port=0`` is of no use with it.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

EVENTS_PATH = "/slack/events"
log = logging.getLogger(__name__)


class HttpServer:
    def __init__(self, app: AsyncApp, host: str = "127.0.0.1", port: int = 3000) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def _events(self, request: web.Request) -> web.Response:
        bolt_response = await self.app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(bolt_response)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def start(self) -> int:
        """Listen; returns the bound port (useful with ``port=0``)."""
        web_app = web.Application()
        web_app.router.add_post(EVENTS_PATH, self._events)
        web_app.router.add_get("/healthz", self._health)
        self._runner = web.AppRunner(web_app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{EVENTS_PATH}"


async def serve_http(
    app: AsyncApp, host: str, port: int, ready: asyncio.Event | None = None
) -> None:
    """Serve until cancelled; logs the URL it receives interactions at (the bound port)."""
    server = HttpServer(app, host, port)
    await server.start()
    try:
        log.info("receiving Slack interactions at %s", server.url)
        if ready is not None:
            ready.set()
        await asyncio.Event().wait()
    finally:
        await server.stop()
