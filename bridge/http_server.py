"""The process's one HTTP server: every platform's routes, plus ``GET /healthz`` and, for
``serve``, ``GET /readyz`` and ``GET /metrics``.

``/healthz``: the process is alive (200 ``ok``). ``/readyz``: 200 ``ready`` when the
:class:`Readiness` given (``serve``'s :class:`~bridge.health.Health`) finds nothing wrong, else
503 with one reason per line.
``/metrics``: Prometheus' text format (:mod:`bridge.metrics`).

``ask-bridge serve`` runs all configured platforms in one process; those called over HTTP (Slack's
HTTP mode) each contribute :class:`~bridge.platform.HttpRoute` objects, and this server serves
them all on one address. aiohttp (the ``slack`` extra's) is imported only when a server starts,
so ``bridge`` imports without it. The runner is our own rather than aiohttp's ``run_app``, which
blocks (no task to cancel) and cannot report the port it bound, so ``port=0`` would be of no use.

Anyone who can reach the port can send it anything, so nothing it sends is logged as an error:
every request a route answers with a 4xx, one that leaves before its body arrived, and one that is
not HTTP at all (an 8 KB request line, bad chunked encoding, a bad ``Content-Length``: answered
400 by aiohttp) is a *refusal*, logged through :class:`RefusalLog` in one line at most every
:data:`LOG_EVERY` seconds, with a count of the rest. A 5xx is a bug of ours and keeps its traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from bridge.platform import HttpRoute

if TYPE_CHECKING:
    from aiohttp import web

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
METRICS_PATH = "/metrics"
OWN_PATHS = (HEALTH_PATH, READY_PATH, METRICS_PATH)
SHUTDOWN_GRACE = 3.0
"""Seconds requests in flight get to finish when the server stops (SIGTERM: the whole stop
fits in 10 s with the receivers' drain)."""
LOG_EVERY = 10.0
"""Seconds between log lines about refused requests."""
log = logging.getLogger(__name__)


class Readiness(Protocol):
    """What ``/readyz`` asks: why this replica is not ready, empty when it is. The server needs
    nothing else of :class:`~bridge.health.Health`, so it does not depend on what health checks
    (the store, Redis, the receivers)."""

    async def problems(self) -> list[str]: ...


class CannotListen(RuntimeError):
    """The address could not be bound (in use, not ours, no permission)."""


class HttpServer:
    def __init__(
        self,
        routes: Sequence[HttpRoute],
        host: str = "127.0.0.1",
        port: int = 3000,
        *,
        health: Readiness | None = None,
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
        self.refusals = RefusalLog()
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Listen; log the URL of each route; return the bound port (useful with ``port=0``).
        Raises :class:`CannotListen` saying why the address could not be bound."""
        from aiohttp import web

        async def alive(request: web.Request) -> web.Response:
            return web.Response(text="ok")

        app = web.Application()
        for route in self.routes:
            app.router.add_route(route.method.upper(), route.path, self._refusing(route))
        app.router.add_get(HEALTH_PATH, alive)
        if self.health is not None:
            app.router.add_get(READY_PATH, self._ready)
            app.router.add_get(METRICS_PATH, _metrics)
        runner = web.AppRunner(
            app,
            access_log=None,
            shutdown_timeout=SHUTDOWN_GRACE,
            logger=_ProtocolLog(self.refusals),
        )
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

    def _refusing(self, route: HttpRoute) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """``route``'s handler, with its refusals logged: every 4xx it answers or aiohttp raises in
        it (413 for a body over the size limit), and a client that left before its request was
        read (aiohttp raises that in the handler, which would otherwise end as a 500 and a
        traceback of a request nobody waits for any more)."""
        from aiohttp import web

        def noted(request: web.Request, response: web.StreamResponse) -> None:
            if 400 <= response.status < 500:
                self.refusals.note(request.remote, _why(response), route.path)

        async def handler(request: web.Request) -> web.StreamResponse:
            try:
                response = await route.handler(request)
            except web.HTTPException as exc:
                noted(request, exc)
                raise
            except ConnectionError:
                if request.transport is not None:  # not the client's connection: a bug of ours
                    raise
                left = "the client left before it was answered"
                self.refusals.note(request.remote, left, route.path)
                return web.Response(status=400)  # written nowhere; ends the request quietly
            noted(request, response)
            return response

        return handler

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


class RefusalLog:
    """One log line per refused request, but at most one per :data:`LOG_EVERY` seconds: the
    rest are counted and reported with the next line, so a flood cannot flood the log."""

    def __init__(self) -> None:
        self._last = -LOG_EVERY
        self._quiet = 0

    def note(self, remote: str | None, why: str, path: str | None = None) -> None:
        """A request from ``remote`` was refused (``why``: the status and reason), at ``path``
        when it reached a route (a request that is not HTTP has none we could trust)."""
        now = time.monotonic()
        if now - self._last < LOG_EVERY:
            self._quiet += 1
            return
        more = f" ({self._quiet} more refused since the last report)" if self._quiet else ""
        to = f" to {path}" if path else ""
        log.warning("refused a request%s from %s: %s%s", to, remote, why, more)
        self._last, self._quiet = now, 0


def _why(response: web.StreamResponse) -> str:
    """The status and the first line of a refusal's text (the route's reason), else its
    HTTP reason phrase."""
    from aiohttp import web

    text = response.text if isinstance(response, web.Response) else None
    reason = text.strip().partition("\n")[0][:200] if text and text.strip() else response.reason
    return f"{response.status} {reason}"


class _ProtocolLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server logger (``aiohttp.server``), except for requests its parser refused.

    aiohttp answers a request that is not valid HTTP with 400 itself, and logs it with the
    parser's traceback at ERROR (``Error handling request``): one traceback per garbage request
    anyone sends. Those are refusals (:class:`RefusalLog`, named by the error's class: its message
    quotes the sender's bytes); everything else it logs is left as it was."""

    def __init__(self, refusals: RefusalLog) -> None:
        super().__init__(logging.getLogger("aiohttp.server"))
        self.refusals = refusals

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        from aiohttp.http_exceptions import HttpProcessingError

        error = kwargs.get("exc_info")
        if isinstance(error, HttpProcessingError):
            # aiohttp logs these as ("Error handling request from %s", request.remote)
            remote = args[0] if args and isinstance(args[0], str) else None
            self.refusals.note(remote, f"{error.code} malformed HTTP ({type(error).__name__})")
            return
        super().log(level, msg, *args, **kwargs)


async def _metrics(request: web.Request) -> web.Response:
    from aiohttp import web

    from bridge.metrics import exposition

    body, content_type = exposition()
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type
    return response
