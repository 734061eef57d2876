"""The process's one HTTP server: every platform's routes, plus ``GET /healthz`` and, for
``serve``, ``GET /readyz`` and ``GET /metrics``.

``/healthz``: the process is alive (200 ``ok``). ``/readyz``: 200 ``ready`` when the
:class:`~bridge.health.Health` given finds nothing wrong, else 503 with one reason per line.
``/metrics``: Prometheus' text format (:mod:`bridge.metrics`).

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

    from bridge.health import Health

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"
OWN_PATHS = (HEALTH_PATH, READY_PATH, METRICS_PATH)
SHUTDOWN_GRACE = 3.0
"""Seconds requests in flight get to finish when the server stops (SIGTERM: the whole stop
fits in 10 s with the receivers' drain)."""
log = logging.getLogger(__name__)


class CannotListen(RuntimeError):
    """The address could not be bound (in use, not ours, no permission)."""


class HttpServer:
    def __init__(
        self,
        routes: Sequence[HttpRoute],
        host: str = "127.0.0.1",
        port: int = 3000,
        *,
        health: Health | None = None,
    ) -> None:
        seen: set[tuple[str, str]] = set()
        for route in routes:
            key = (route.method.upper(), route.path)
            if key in seen or route.path in OWN_PATHS:
                raise ValueError(f"two handlers for {route.method.upper()} {route.path}")
            seen.add(key)
        self.routes = tuple(routes)
        self.host = host
        self.port = port
        self.health = health
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Listen; log the URL of each route; return the bound port (useful with ``port=0``).
        Raises :class:`CannotListen` saying why the address could not be bound."""
        from aiohttp import web

        async def alive(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        for route in self.routes:
            app.router.add_route(route.method.upper(), route.path, route.handler)
        app.router.add_get(HEALTH_PATH, alive)
        if self.health is not None:
            app.router.add_get(READY_PATH, self._ready)
            app.router.add_get(METRICS_PATH, _metrics)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_GRACE)
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
        if self.health is not None:
            # the paths are in the docs: a line here saying "readyz" would read as "ready"
            log.info("health and metrics at %s", self.url())
        return self.port

    async def _ready(self, request: web.Request) -> web.Response:
        from aiohttp import web

        assert self.health is not None
        problems = await self.health.problems()
        if problems:
            return web.Response(status=503, text="\n".join(problems) + "\n")
        return web.Response(text="ready")

    async def stop(self) -> None:
        """Stop listening; requests in flight get aiohttp's shutdown grace to finish."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def url(self, path: str = "") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"


async def _metrics(request: web.Request) -> web.Response:
    from aiohttp import web

    from bridge.metrics import exposition

    body, content_type = exposition()
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type
    return response
