"""A loopback HTTP receiver of the bridge's outcome webhooks, for the tests (never the internet)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from tests.support.redis_server import free_port


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    @property
    def ask_id(self) -> str:
        return str(json.loads(self.body)["ask_id"])


class Receiver:
    """A loopback HTTP receiver: ``/ok`` answers 204, ``/fail`` 500, ``/flaky`` 503 for its first
    ``flaky`` requests then 200, ``/slow`` 204 after ``slow`` seconds (``most``: the most requests
    it held at once), ``/moved`` a 307 to ``moved_to``. Every request is kept in ``hits``."""

    def __init__(
        self, port: int | None = None, *, flaky: int = 0, slow: float = 0.3, moved_to: str = ""
    ) -> None:
        self.port = port or free_port()
        self.flaky = flaky
        self.slow = slow
        self.moved_to = moved_to
        self.hits: list[Hit] = []
        self.changed = asyncio.Event()
        self.holding = self.most = 0
        self._runner: web.AppRunner | None = None

    def url(self, path: str = "ok") -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token=t0ps3cr3t"

    async def _handle(self, request: web.Request) -> web.Response:
        self.hits.append(Hit(request.path, dict(request.headers), await request.read()))
        self.changed.set()
        if request.path == "/fail":
            return web.Response(status=500)
        if request.path == "/flaky" and self.flaky > 0:
            self.flaky -= 1
            return web.Response(status=503)
        if request.path == "/moved":
            return web.Response(status=307, headers={"Location": self.moved_to})
        if request.path == "/slow":
            self.holding += 1
            self.most = max(self.most, self.holding)
            try:
                await asyncio.sleep(self.slow)
            finally:
                self.holding -= 1
        return web.Response(status=204)

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/{name}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def on(self, path: str) -> list[Hit]:
        return [h for h in self.hits if h.path == f"/{path}"]

    async def until(self, check: Callable[[], bool], within: float = 20.0) -> None:
        async def loop() -> None:
            while not check():
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(loop(), within)


class Trap:
    """A loopback TCP port that counts the connections made to it and answers none: where a
    refused webhook would have gone, to prove nothing connected."""

    def __init__(self) -> None:
        self.port = free_port()
        self.connections = 0
        self._server: asyncio.Server | None = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()

    async def start(self) -> Trap:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
