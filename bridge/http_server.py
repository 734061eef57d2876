"""The process's one HTTP server: every platform's routes, plus ``GET /healthz``.

``ask-bridge serve`` runs all configured platforms in one process; those called over HTTP (Slack's
HTTP mode) each contribute :class:`~bridge.platform.HttpRoute` objects, and this server serves
them all on one address. aiohttp (the ``slack`` extra's) is imported only when a server starts,
so ``bridge`` imports without it. The runner is our own rather than aiohttp's ``run_app``, which
blocks (no task to cancel) and cannot report the port it bound, so ``port=0`` would be of no use.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bridge.platform import HttpRoute

if TYPE_CHECKING:
    from aiohttp import web

HEALTH_PATH = "/healthz"
log = logging.getLogger(__name__)


class CannotListen(RuntimeError):
    """The address could not be bound (in use, not ours, no permission)."""


class HttpServer:
    def __init__(
        self, routes: Sequence[HttpRoute], host: str = "127.0.0.1", port: int = 3000
    ) -> None:
        seen: set[tuple[str, str]] = set()
        for route in routes:
            key = (route.method.upper(), route.path)
            if key in seen or route.path == HEALTH_PATH:
                raise ValueError(f"two handlers for {route.method.upper()} {route.path}")
            seen.add(key)
        self.routes = tuple(routes)
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Listen; log the URL of each route; return the bound port (useful with ``port=0``).
        Raises :class:`CannotListen` saying why the address could not be bound."""
        from aiohttp import web

        async def health(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        for route in self.routes:
            app.router.add_route(route.method.upper(), route.path, route.handler)
        app.router.add_get(HEALTH_PATH, health)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except OSError as exc:
            await runner.cleanup()
            raise CannotListen(f"cannot listen on {self.host}:{self.port}: {exc}") from exc
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        for route in self.routes:
            log.info("serving %s %s", route.method.upper(), self.url(route.path))
        return self.port

    async def stop(self) -> None:
        """Stop listening; requests in flight get aiohttp's shutdown grace to finish."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def url(self, path: str = "") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"
